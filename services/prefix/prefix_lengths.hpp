#pragma once
// The prefix lengths of spec 0x07A, the reuse policies of 0x07D and the
// N_new / capacity ledger of 0x07G. All lengths are token counts, which are
// also prompt rows (one K/V row per token per cache group).
//
//   S_prompt    request prompt length
//   S_sem       longest semantically exact token prefix
//   S_indexed   longest contiguous compatible prefix present in the index
//   S_cap       maximum prefix the execution path may reuse
//   S_runtime   prefix rows actually returned
//   S_recompute = S_prompt - S_runtime
//   0 <= S_runtime <= min(S_sem, S_indexed, S_cap) <= S_prompt
#include <cstdint>
#include <string_view>

#include "services/common/result.hpp"
#include "services/prefix/prefix_match_receipt.hpp"

namespace kvrt {

// The two reuse designs of 0x07D. The numeric value is the policy byte that
// enters a partial tail's hash (hash_chain.hpp); never renumber.
enum class ReusePolicy : uint8_t {
  // Pinned vLLM path: only whole hash blocks hit; S_runtime is a multiple of P.
  full_block = 0,
  // Full blocks, then the leading rows of one published block (a full block
  // or an immutable tail of v rows) whose tokens agree; a hit ending inside it
  // emits a copy-rows intent, since appending under its key would make the
  // key lie about the object (0x07D).
  immutable_partial_tail = 1,
};

// Receipt policy_id of each policy ("kvrt.full_block.v1", ...).
std::string_view policy_id(ReusePolicy policy);
// The policy a receipt names, or an Error naming policy_id.
Result<ReusePolicy> reuse_policy_from_id(std::string_view id);

struct PrefixLengths {
  uint32_t prompt = 0;     // S_prompt [tokens]
  uint32_t semantic = 0;   // S_sem [tokens]
  uint32_t indexed = 0;    // S_indexed [tokens]
  uint32_t cap = 0;        // S_cap [tokens]
  uint32_t runtime = 0;    // S_runtime [tokens]
  uint32_t recompute = 0;  // S_recompute [rows]

  friend bool operator==(const PrefixLengths&, const PrefixLengths&) = default;
};

// S_cap of 0x07A: S_prompt - 1 when the request needs next-token logits (the
// final prompt row must execute to feed the LM head), S_prompt otherwise. An
// empty logits-producing prompt is an error, never an unsigned wrap.
Result<uint32_t> reuse_cap(uint32_t prompt_tokens, LogitsPath logits_path);

// S_runtime_full = P * floor(min(S_sem, S_indexed, S_cap) / P)   (0x07A)
uint32_t full_block_runtime(uint32_t semantic, uint32_t indexed, uint32_t cap, uint32_t block_tokens);

// The invariant chain and S_recompute = S_prompt - S_runtime; the failing
// relation is named in the error (field = the length that breaks it).
Status check_lengths(const PrefixLengths& lengths);

// N_new = ceil(S_prompt / P) - floor(S_runtime / P) [bundles]: the request
// newly owns every block that is not a fully reused shared bundle. Under the
// full-block policy this is the 0x07G ceil(S_recompute / P); after a partial
// hit the copy-on-write destination of the shared tail is one of them.
// Assumes no already-owned writable tail slots (0x07G).
uint32_t new_block_bundles(uint32_t prompt_tokens, uint32_t runtime_tokens, uint32_t block_tokens);

// The separate ledgers of 0x07E: useful recompute payload versus requested
// capacity (M_new_capacity = N_new * P * B_row), plus partial-tail copy bytes.
struct ReuseCapacityLedger {
  uint32_t new_block_bundles = 0;       // N_new [bundles]
  uint64_t new_capacity_bytes = 0;      // N_new * P * B_row [bytes]
  uint64_t useful_recompute_bytes = 0;  // S_recompute * B_row [bytes]
  uint64_t copy_payload_bytes = 0;      // copy_valid_partial_rows * B_row [bytes]

  friend bool operator==(const ReuseCapacityLedger&, const ReuseCapacityLedger&) = default;
};
// From a receipt and the local row bytes B_row (sum over cache groups,
// CacheLayoutManifest::row_bytes) [bytes / token].
ReuseCapacityLedger capacity_ledger(const PrefixMatchReceipt& receipt, uint64_t row_bytes);

}  // namespace kvrt
