#pragma once
// Capacity arithmetic that is not a ledger of live state: the expected tail
// waste of a block under a uniform terminal occupancy (0x02G), block counts and
// full-block prefix hits (0x09B), and the model-wide capacity-pressure
// illustration of 0x0D (prompt blocks, prefix-hit blocks, decode growth).
#include <cstdint>

#include "services/common/result.hpp"
#include "tools/ledger/exact_fraction.hpp"
#include "tools/ledger/row_ledger.hpp"

namespace kvrt {

// 0x02G: with terminal occupancy J uniform on {1..P}, E[P - J] = (P - 1) / 2
// slots [rows / terminal block] and E[M_tail] = (P - 1) / 2 * B_row [bytes]. An
// expectation under that model, not a prediction for any one trace.
ExactFraction expected_tail_waste_rows(uint32_t block_rows);
ExactFraction expected_tail_waste_bytes(uint32_t block_rows, uint64_t row_bytes);

// ceil(tokens / P) [blocks] (0x02C, 0x09B).
uint64_t blocks_for_tokens(uint64_t tokens, uint32_t block_rows);

// Full-block-only prefix publication (0x09B). A request that needs next-token
// logits recomputes at least its last token, so its reusable length is capped
// at T - 1 before aligning down (0x07A).
enum class PrefixHitCap : uint8_t { uncapped, logits_capped };
// H_r^full = P * floor(T / P), or P * floor((T - 1) / P) when logits_capped [rows].
uint64_t full_block_hit_rows(uint64_t tokens, uint32_t block_rows, PrefixHitCap cap);

// Decode growth of n generated tokens (M5.1 via 0x0D): under an ordinary stop
// the final emitted token is never fed back, so n - 1 rows are appended; only
// the optional repair append writes the n-th.
enum class DecodeStop : uint8_t { ordinary_stop, repair_append };
uint64_t decode_growth_rows(uint64_t generated_tokens, DecodeStop stop);

struct CapacityPressureInput {
  uint64_t prompt_tokens = 0;      // S_prompt [tokens], > 0
  uint64_t prefix_hit_tokens = 0;  // exact prefix already cached [tokens], <= S_prompt
  uint64_t generated_tokens = 0;   // response length [tokens]
};

struct CapacityPressure {
  uint64_t row_bytes = 0;    // B_row [bytes / token]
  uint32_t block_rows = 0;   // P [rows / block]
  uint64_t block_bytes = 0;  // P * B_row
  uint64_t prompt_tokens = 0;
  uint64_t prompt_blocks = 0;           // ceil(S_prompt / P)
  uint64_t prompt_bytes = 0;            // S_prompt * B_row
  uint64_t hit_blocks = 0;              // floor(hit / P): only full blocks are reusable
  uint64_t prefill_tokens_skipped = 0;  // hit_blocks * P
  uint64_t new_prompt_tokens = 0;       // S_prompt - skipped
  uint64_t generated_tokens = 0;
  uint64_t decode_rows_ordinary = 0;  // n - 1
  uint64_t decode_bytes_ordinary = 0;
  uint64_t decode_rows_repair = 0;  // n (the upper bound)
  uint64_t decode_bytes_repair = 0;
};

// Errors (invalid_argument): zero prompt ("prompt_tokens"), hit beyond the prompt
// ("prefix_hit_tokens"), byte figures beyond 2^63 - 1 ("generated_tokens").
Result<CapacityPressure> capacity_pressure(const RowLedger& row, const CapacityPressureInput& input);

}  // namespace kvrt
