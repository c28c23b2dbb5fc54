#include "services/prefix/prefix_lengths.hpp"

#include <algorithm>
#include <string>

#include "services/common/units.hpp"

namespace kvrt {

namespace {
constexpr std::string_view kFullBlockId = "kvrt.full_block.v1";
constexpr std::string_view kPartialTailId = "kvrt.immutable_partial_tail.v1";

Error broken(const std::string& what, const char* field) {
  return make_error(ErrorCode::invalid_argument, "prefix lengths break 0x07A: " + what, field);
}
}  // namespace

std::string_view policy_id(ReusePolicy policy) {
  return policy == ReusePolicy::full_block ? kFullBlockId : kPartialTailId;
}

Result<ReusePolicy> reuse_policy_from_id(std::string_view id) {
  if (id == kFullBlockId) return ReusePolicy::full_block;
  if (id == kPartialTailId) return ReusePolicy::immutable_partial_tail;
  return make_error(ErrorCode::invalid_argument, "unknown reuse policy '" + std::string(id) + "'", "policy_id");
}

Result<uint32_t> reuse_cap(uint32_t prompt_tokens, LogitsPath logits_path) {
  if (logits_path == LogitsPath::no_logits) return prompt_tokens;
  if (prompt_tokens == 0)
    return make_error(ErrorCode::invalid_argument,
                      "a logits-producing request needs at least one prompt token (S_cap = S_prompt - 1)",
                      "prompt_tokens");
  return prompt_tokens - 1;
}

uint32_t full_block_runtime(uint32_t semantic, uint32_t indexed, uint32_t cap, uint32_t block_tokens) {
  const uint32_t bound = std::min({semantic, indexed, cap});
  return block_tokens * (bound / block_tokens);
}

Status check_lengths(const PrefixLengths& l) {
  const uint32_t bound = std::min({l.semantic, l.indexed, l.cap});
  if (l.runtime > bound)
    return broken(
        "S_runtime " + std::to_string(l.runtime) + " exceeds min(S_sem, S_indexed, S_cap) = " + std::to_string(bound),
        "runtime_hit_tokens");
  if (l.semantic > l.prompt)
    return broken("S_sem " + std::to_string(l.semantic) + " exceeds S_prompt " + std::to_string(l.prompt),
                  "semantic_match_tokens");
  if (l.indexed > l.prompt)
    return broken("S_indexed " + std::to_string(l.indexed) + " exceeds S_prompt " + std::to_string(l.prompt),
                  "indexed_match_tokens");
  if (l.cap > l.prompt)
    return broken("S_cap " + std::to_string(l.cap) + " exceeds S_prompt " + std::to_string(l.prompt),
                  "reuse_cap_tokens");
  if (l.recompute != l.prompt - l.runtime)
    return broken("S_recompute " + std::to_string(l.recompute) +
                      " is not S_prompt - S_runtime = " + std::to_string(l.prompt - l.runtime),
                  "prompt_rows_recomputed");
  return Status::success();
}

uint32_t new_block_bundles(uint32_t prompt_tokens, uint32_t runtime_tokens, uint32_t block_tokens) {
  return static_cast<uint32_t>(ceil_div(prompt_tokens, block_tokens)) - runtime_tokens / block_tokens;
}

ReuseCapacityLedger capacity_ledger(const PrefixMatchReceipt& r, uint64_t row_bytes) {
  ReuseCapacityLedger l;
  l.new_block_bundles = r.new_block_bundles;
  l.new_capacity_bytes = uint64_t{r.new_block_bundles} * r.alignment_tokens * row_bytes;
  l.useful_recompute_bytes = uint64_t{r.prompt_rows_recomputed} * row_bytes;
  l.copy_payload_bytes = uint64_t{r.copy_valid_partial_rows} * row_bytes;
  return l;
}

}  // namespace kvrt
