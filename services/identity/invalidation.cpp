#include "services/identity/invalidation.hpp"

#include <algorithm>
#include <charconv>

#include "services/identity/layout_mismatch.hpp"
#include "services/identity/operand_text.hpp"

namespace kvrt {
namespace {

bool is_lower_hex64(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool layout_aspect_changed(const GenerationFacts& a, const GenerationFacts& b, LayoutAspect aspect) {
  const auto diffs = diff_layouts(a.layout, b.layout);
  return std::any_of(diffs.begin(), diffs.end(), [&](const auto& d) { return d.aspect == aspect; });
}

Error unchanged(InvalidationCause cause, std::string_view fact, std::string detail) {
  return make_error(
      ErrorCode::invalid_argument,
      "invalidation cause " + std::string(to_string(cause)) + " does not change " + std::string(fact) + ": " + detail,
      std::string(fact));
}

}  // namespace

std::string_view to_string(InvalidationCause c) {
  switch (c) {
    case InvalidationCause::weights:
      return "weights";
    case InvalidationCause::adapter:
      return "adapter";
    case InvalidationCause::transform:
      return "transform";
    case InvalidationCause::positions:
      return "positions";
    case InvalidationCause::representation:
      return "representation";
    case InvalidationCause::shard:
      return "shard";
  }
  return "unknown_invalidation_cause";
}

Status validate_generation_facts(const GenerationFacts& facts) {
  KVRT_TRY(facts.layout.validate());
  if (!is_lower_hex64(facts.artifact.position_contract_sha256))
    return make_error(ErrorCode::invalid_manifest, "position_contract_sha256 must be 64 lowercase hex digits",
                      "position_contract_sha256");
  return Status::success();
}

std::vector<std::string> changed_facts(const GenerationFacts& current, const GenerationFacts& successor) {
  std::vector<std::string> out;
  for (auto& d : diff_layouts(current.layout, successor.layout)) out.push_back(std::move(d.field));
  if (current.artifact.adapter_identity != successor.artifact.adapter_identity) out.push_back("adapter_identity");
  if (current.artifact.weight_transform_identity != successor.artifact.weight_transform_identity)
    out.push_back("weight_transform_identity");
  if (current.artifact.position_contract_sha256 != successor.artifact.position_contract_sha256)
    out.push_back("position_contract_sha256");
  return out;
}

Status check_invalidation(InvalidationCause cause, const GenerationFacts& current, const GenerationFacts& successor) {
  KVRT_TRY(validate_generation_facts(successor));
  const uint64_t old_model = current.layout.model_generation;
  const uint64_t new_model = successor.layout.model_generation;
  // "advance model/cache/namespace generation": generations only move forward.
  if (new_model < old_model)
    return make_error(ErrorCode::invalid_argument,
                      "successor model_generation " + std::to_string(new_model) + " is older than current " +
                          std::to_string(old_model),
                      "model_generation");
  const auto& a = current.artifact;
  const auto& b = successor.artifact;
  switch (cause) {
    case InvalidationCause::weights:
      if (new_model == old_model) return unchanged(cause, "model_generation", "both " + std::to_string(old_model));
      return Status::success();
    case InvalidationCause::adapter:
      if (a.adapter_identity == b.adapter_identity)
        return unchanged(cause, "adapter_identity", "both " + quote_operand(a.adapter_identity, true));
      return Status::success();
    case InvalidationCause::transform:
      if (a.weight_transform_identity == b.weight_transform_identity)
        return unchanged(cause, "weight_transform_identity",
                         "both " + quote_operand(a.weight_transform_identity, true));
      return Status::success();
    case InvalidationCause::positions:
      if (a.position_contract_sha256 == b.position_contract_sha256)
        return unchanged(cause, "position_contract_sha256", "both " + quote_operand(a.position_contract_sha256));
      return Status::success();
    case InvalidationCause::representation:
      if (!layout_aspect_changed(current, successor, LayoutAspect::representation))
        return unchanged(cause, "representation",
                         "no dtype, quantization, axis, stride, mode or block-size field differs");
      return Status::success();
    case InvalidationCause::shard:
      if (!layout_aspect_changed(current, successor, LayoutAspect::ownership))
        return unchanged(cause, "ownership", "no TP world/rank, cache group or local-head field differs");
      return Status::success();
  }
  return make_error(ErrorCode::invalid_argument,
                    "unknown invalidation cause " + std::to_string(static_cast<int>(cause)), "cause");
}

Result<GenerationFacts> live_successor_facts(InvalidationCause cause, const GenerationFacts& current,
                                             std::string_view identity) {
  GenerationFacts next = current;
  auto need_identity = [&](std::string_view what) -> Status {
    if (identity.empty())
      return make_error(ErrorCode::invalid_argument,
                        "invalidation cause " + std::string(to_string(cause)) + " needs the new " + std::string(what),
                        "successor_identity");
    return Status::success();
  };
  switch (cause) {
    case InvalidationCause::weights:
      if (identity.empty()) {
        next.layout.model_generation = current.layout.model_generation + 1;
      } else {
        uint64_t g = 0;
        const auto [end, ec] = std::from_chars(identity.data(), identity.data() + identity.size(), g);
        if (ec != std::errc() || end != identity.data() + identity.size() || g <= current.layout.model_generation)
          return make_error(ErrorCode::invalid_argument,
                            "a weights successor names a model generation above the current " +
                                std::to_string(current.layout.model_generation) + ", not " + quote_operand(identity),
                            "successor_identity");
        next.layout.model_generation = g;
      }
      break;
    case InvalidationCause::adapter:
      KVRT_TRY(need_identity("adapter identity"));
      next.artifact.adapter_identity = std::string(identity);
      break;
    case InvalidationCause::transform:
      KVRT_TRY(need_identity("weight transform identity"));
      next.artifact.weight_transform_identity = std::string(identity);
      break;
    case InvalidationCause::positions:
      KVRT_TRY(need_identity("position contract digest"));
      if (!is_lower_hex64(identity))
        return make_error(ErrorCode::invalid_argument,
                          "a position contract digest is 64 lowercase hex digits, not " + quote_operand(identity),
                          "successor_identity");
      next.artifact.position_contract_sha256 = std::string(identity);
      break;
    case InvalidationCause::representation:
    case InvalidationCause::shard:
      return make_error(ErrorCode::invalid_argument,
                        "invalidation cause " + std::string(to_string(cause)) +
                            " changes the bytes of a block, which this node's pools cannot follow: start a node "
                            "with the successor layout",
                        "cause");
  }
  KVRT_TRY(check_invalidation(cause, current, next));
  return next;
}

}  // namespace kvrt
