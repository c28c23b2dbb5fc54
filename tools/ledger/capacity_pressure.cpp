#include "tools/ledger/capacity_pressure.hpp"

#include <limits>
#include <string>

namespace kvrt {

ExactFraction expected_tail_waste_rows(uint32_t block_rows) {
  KVRT_ASSERT(block_rows > 0, "block size P must be positive");
  // E[P - J] = P - (1/P) * sum_{j=1..P} j = P - (P + 1) / 2 = (P - 1) / 2.
  return ExactFraction::of(block_rows - 1, 2);
}

ExactFraction expected_tail_waste_bytes(uint32_t block_rows, uint64_t row_bytes) {
  KVRT_ASSERT(block_rows > 0, "block size P must be positive");
  // (P - 1) < 2^32 and row_bytes <= kMaxLedgerRowBytes in every ledger caller;
  // other callers get an assertion rather than a silent wrap.
  const unsigned __int128 numerator = static_cast<unsigned __int128>(block_rows - 1) * row_bytes;
  KVRT_ASSERT(numerator <= std::numeric_limits<uint64_t>::max(), "expected tail bytes overflow 64 bits");
  return ExactFraction::of(static_cast<uint64_t>(numerator), 2);
}

uint64_t blocks_for_tokens(uint64_t tokens, uint32_t block_rows) {
  KVRT_ASSERT(block_rows > 0, "block size P must be positive");
  return tokens / block_rows + (tokens % block_rows != 0 ? 1 : 0);
}

uint64_t full_block_hit_rows(uint64_t tokens, uint32_t block_rows, PrefixHitCap cap) {
  KVRT_ASSERT(block_rows > 0, "block size P must be positive");
  uint64_t reusable = tokens;
  if (cap == PrefixHitCap::logits_capped) reusable = tokens == 0 ? 0 : tokens - 1;
  return reusable / block_rows * block_rows;
}

uint64_t decode_growth_rows(uint64_t generated_tokens, DecodeStop stop) {
  if (stop == DecodeStop::repair_append || generated_tokens == 0) return generated_tokens;
  return generated_tokens - 1;
}

Result<CapacityPressure> capacity_pressure(const RowLedger& row, const CapacityPressureInput& in) {
  if (in.prompt_tokens == 0)
    return make_error(ErrorCode::invalid_argument, "a prompt has at least one token", "prompt_tokens");
  if (in.prefix_hit_tokens > in.prompt_tokens)
    return make_error(ErrorCode::invalid_argument,
                      "prefix hit of " + std::to_string(in.prefix_hit_tokens) + " tokens exceeds the prompt of " +
                          std::to_string(in.prompt_tokens),
                      "prefix_hit_tokens");
  const unsigned __int128 rows = static_cast<unsigned __int128>(in.prompt_tokens) + in.generated_tokens;
  if (rows * row.row_bytes > std::numeric_limits<int64_t>::max())
    return make_error(ErrorCode::invalid_argument, "prompt and decode bytes would exceed 2^63 - 1", "generated_tokens");
  CapacityPressure c;
  c.row_bytes = row.row_bytes;
  c.block_rows = row.block_rows;
  c.block_bytes = row.block_bytes;
  c.prompt_tokens = in.prompt_tokens;
  c.prompt_blocks = blocks_for_tokens(in.prompt_tokens, row.block_rows);
  c.prompt_bytes = in.prompt_tokens * row.row_bytes;
  c.hit_blocks = in.prefix_hit_tokens / row.block_rows;
  c.prefill_tokens_skipped = c.hit_blocks * row.block_rows;
  c.new_prompt_tokens = in.prompt_tokens - c.prefill_tokens_skipped;
  c.generated_tokens = in.generated_tokens;
  c.decode_rows_ordinary = decode_growth_rows(in.generated_tokens, DecodeStop::ordinary_stop);
  c.decode_bytes_ordinary = c.decode_rows_ordinary * row.row_bytes;
  c.decode_rows_repair = decode_growth_rows(in.generated_tokens, DecodeStop::repair_append);
  c.decode_bytes_repair = c.decode_rows_repair * row.row_bytes;
  return c;
}

}  // namespace kvrt
