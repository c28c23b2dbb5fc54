#include "services/identity/compatibility_check.hpp"

#include <string>

#include "services/common/digest.hpp"
#include "services/identity/operand_text.hpp"

namespace kvrt {
namespace {

using Manifest = CacheCompatibilityManifest;

Error mismatch(CompatibilityField f, std::string detail) {
  std::string name{to_string(f)};
  return make_error(ErrorCode::incompatible, name + " differs: " + detail, name);
}

std::optional<Error> compare_text(CompatibilityField f, std::string_view p, std::string_view c,
                                  bool empty_means_none = false) {
  if (p == c) return std::nullopt;
  return mismatch(f, describe_operands(p, c, empty_means_none));
}

std::optional<Error> compare_number(CompatibilityField f, uint64_t p, uint64_t c) {
  if (p == c) return std::nullopt;
  return mismatch(f, "producer " + std::to_string(p) + " vs consumer " + std::to_string(c));
}

// Lengths and the first differing position only; the token values stay private.
std::optional<Error> compare_tokens(const std::vector<uint32_t>& p, const std::vector<uint32_t>& c) {
  if (p == c) return std::nullopt;
  size_t i = 0;
  while (i < p.size() && i < c.size() && p[i] == c[i]) ++i;
  return mismatch(CompatibilityField::covered_token_ids,
                  "first difference at token index " + std::to_string(i) + " (producer " + std::to_string(p.size()) +
                      " tokens vs consumer " + std::to_string(c.size()) + " tokens; token values withheld)");
}

std::string_view kind_name(SideInputKind k) {
  switch (k) {
    case SideInputKind::multimodal_feature:
      return "multimodal_feature";
    case SideInputKind::prompt_embedding:
      return "prompt_embedding";
  }
  return "unknown_side_input_kind";
}

std::optional<Error> compare_side_inputs(const std::vector<SideInputIdentity>& p,
                                         const std::vector<SideInputIdentity>& c) {
  constexpr auto kField = CompatibilityField::input_side_data_identity;
  if (p == c) return std::nullopt;
  if (p.size() != c.size())
    return mismatch(
        kField, "producer has " + std::to_string(p.size()) + " side inputs vs consumer " + std::to_string(c.size()));
  size_t i = 0;
  while (p[i] == c[i]) ++i;  // sizes are equal and the vectors differ, so some i < size differs
  const std::string at = "entry " + std::to_string(i) + " ";
  const auto& a = p[i];
  const auto& b = c[i];
  if (a.kind != b.kind)
    return mismatch(kField, at + "kind: producer " + std::string(kind_name(a.kind)) + " vs consumer " +
                                std::string(kind_name(b.kind)));
  if (a.identity != b.identity) return mismatch(kField, at + "identity: " + describe_operands(a.identity, b.identity));
  if (a.token_offset != b.token_offset)
    return mismatch(kField, at + "token_offset: producer " + std::to_string(a.token_offset) + " vs consumer " +
                                std::to_string(b.token_offset) + " [tokens]");
  return mismatch(kField, at + "token_count: producer " + std::to_string(a.token_count) + " vs consumer " +
                              std::to_string(b.token_count) + " [tokens]");
}

// An unguessable salt must not be echoed; a short SHA-256 fingerprint lets an
// operator tell two salts apart without disclosing either.
std::string salt_fingerprint(std::string_view salt) {
  if (salt.empty()) return "(none)";
  return "sha256:" + sha256(salt).hex().substr(0, 8);
}

}  // namespace

std::string_view to_string(CompatibilityField f) {
  switch (f) {
    case CompatibilityField::cache_abi_sha256:
      return "cache_abi_sha256";
    case CompatibilityField::cache_layout_sha256:
      return "cache_layout_sha256";
    case CompatibilityField::model_generation:
      return "model_generation";
    case CompatibilityField::adapter_identity:
      return "adapter_identity";
    case CompatibilityField::weight_transform_identity:
      return "weight_transform_identity";
    case CompatibilityField::position_contract_sha256:
      return "position_contract_sha256";
    case CompatibilityField::covered_token_ids:
      return "covered_token_ids";
    case CompatibilityField::input_side_data_identity:
      return "input_side_data_identity";
    case CompatibilityField::cache_isolation_namespace:
      return "cache_isolation_namespace";
    case CompatibilityField::namespace_generation:
      return "namespace_generation";
    case CompatibilityField::cache_salt:
      return "cache_salt";
    case CompatibilityField::publication_generation:
      return "publication_generation";
  }
  return "unknown_compatibility_field";
}

std::optional<Error> compare_field(CompatibilityField f, const Manifest& p, const Manifest& c) {
  using F = CompatibilityField;
  switch (f) {
    case F::cache_abi_sha256:
      return compare_text(f, p.cache_abi_sha256, c.cache_abi_sha256);
    case F::cache_layout_sha256:
      return compare_text(f, p.cache_layout_sha256.hex(), c.cache_layout_sha256.hex());
    case F::model_generation:
      return compare_number(f, p.model_generation, c.model_generation);
    case F::adapter_identity:
      return compare_text(f, p.adapter_identity, c.adapter_identity, true);
    case F::weight_transform_identity:
      return compare_text(f, p.weight_transform_identity, c.weight_transform_identity, true);
    case F::position_contract_sha256:
      return compare_text(f, p.position_contract_sha256, c.position_contract_sha256);
    case F::covered_token_ids:
      return compare_tokens(p.covered_token_ids, c.covered_token_ids);
    case F::input_side_data_identity:
      return compare_side_inputs(p.input_side_data, c.input_side_data);
    case F::cache_isolation_namespace:
      return compare_text(f, p.cache_isolation_namespace, c.cache_isolation_namespace);
    case F::namespace_generation:
      return compare_number(f, p.namespace_generation.value, c.namespace_generation.value);
    case F::cache_salt:
      if (p.cache_salt == c.cache_salt) return std::nullopt;
      return mismatch(f, "values withheld; producer " + salt_fingerprint(p.cache_salt) + " vs consumer " +
                             salt_fingerprint(c.cache_salt));
    case F::publication_generation:
      return compare_number(f, p.publication_generation, c.publication_generation);
  }
  // A value outside the enum is a caller's corrupt input, not a match.
  return make_error(ErrorCode::invalid_argument, "unknown compatibility field " + std::to_string(static_cast<int>(f)),
                    "field");
}

CompatibilityVerdict compatible_on(std::span<const CompatibilityField> fields, const Manifest& producer,
                                   const Manifest& consumer) {
  for (CompatibilityField f : fields) {
    if (auto error = compare_field(f, producer, consumer))
      return CompatibilityVerdict{f, std::move(*error), std::nullopt};
  }
  return CompatibilityVerdict{};
}

CompatibilityVerdict compatible(const Manifest& producer, const Manifest& consumer) {
  return compatible_on(kCompatibilityFieldOrder, producer, consumer);
}

CompatibilityVerdict compatible_explained(const Manifest& producer, const Manifest& consumer,
                                          const CacheLayoutManifest& producer_layout,
                                          const CacheLayoutManifest& consumer_layout) {
  auto verdict = compatible(producer, consumer);
  if (verdict.failing_field != CompatibilityField::cache_layout_sha256) return verdict;
  if (producer_layout.digest() != producer.cache_layout_sha256 ||
      consumer_layout.digest() != consumer.cache_layout_sha256) {
    verdict.error.reason += "; the supplied layouts are not the manifests' layouts, no layout field named";
    return verdict;
  }
  auto diffs = diff_layouts(producer_layout, consumer_layout);
  // Different digests of the supplied layouts imply at least one named field
  // (diff_layouts compares every digested field).
  KVRT_ASSERT(!diffs.empty(), "layout digests differ but diff_layouts found no field");
  verdict.error.reason += "; " + explain_layout_mismatch(producer_layout, consumer_layout).error().reason;
  verdict.layout_difference = std::move(diffs.front());
  return verdict;
}

}  // namespace kvrt
