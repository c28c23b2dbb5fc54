#pragma once
// PrefixMatchReceipt (spec 0x07G): what a prefix-index lookup proved and what
// remains to execute. It is an immutable physical fact, not a scheduling
// command (0x07C): M5.2 may consume its work and capacity figures.
//
// The four prefix lengths of 0x07A are all carried so that a consumer can
// check the invariant chain
//     0 <= S_runtime <= min(S_sem, S_indexed, S_cap) <= S_prompt,
//     S_recompute = S_prompt - S_runtime
// from the receipt alone; the 0x07G field list names S_sem, S_runtime and
// S_recompute, the others come from 0x07A and 0x07C.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/physical_block_handle.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

// How the logits cap is derived (0x07A, 0x07C requires_logits).
enum class LogitsPath : uint8_t {
  logits_required = 0,  // generative request: S_cap = S_prompt - 1
  no_logits = 1,        // prefill-only / embedding path: S_cap = S_prompt
};
inline constexpr uint8_t kLogitsPathMax = 1;

// One matched full block: its handle in every cache group (0x07C
// lookup_all_groups: a digest present for only some groups is not a hit).
struct MatchedBlockBundle {
  uint32_t logical_block = 0;                // j: block index in the prompt [blocks]
  std::vector<PhysicalBlockHandle> handles;  // one per cache group, in manifest group order

  friend bool operator==(const MatchedBlockBundle&, const MatchedBlockBundle&) = default;
};

struct PrefixMatchReceipt {
  RequestId request_id;
  RequestGeneration request_generation;
  IndexSnapshotId index_snapshot_id;           // index snapshot the lookup read
  uint64_t index_publication_generation = 0;   // publication generation of that snapshot
  Sha256Digest compatibility_manifest_sha256;  // the consumer manifest the candidates passed
  std::string namespace_id;                    // authorized cache namespace (0x01A, 0x0CE)
  NamespaceGeneration namespace_generation;
  std::string policy_id;          // reuse policy (full-block / partial-tail, 0x07D)
  uint32_t alignment_tokens = 0;  // policy.alignment_tokens: hit granularity P [tokens]
  LogitsPath logits_path = LogitsPath::logits_required;
  uint32_t prompt_tokens = 0;                             // S_prompt [tokens]
  uint32_t semantic_match_tokens = 0;                     // S_sem [tokens]
  uint32_t indexed_match_tokens = 0;                      // S_indexed [tokens]
  uint32_t reuse_cap_tokens = 0;                          // S_cap [tokens]
  uint32_t runtime_hit_tokens = 0;                        // S_runtime [tokens]
  uint32_t prompt_rows_recomputed = 0;                    // S_recompute = S_prompt - S_runtime [rows]
  std::vector<MatchedBlockBundle> matched_group_handles;  // S_runtime / P bundles (full-block policy)
  uint32_t new_block_bundles = 0;                         // N_new = ceil(S_recompute / P) [bundles] (0x07G)
  uint32_t copy_valid_partial_rows = 0;                   // rows of an immutable partial tail to copy
                                                          // before a divergent write (0x07D) [rows]
  LeaseId lease_id;                                       // lease holding the matched handles (0x01A step 5)
  Sha256Digest receipt_sha256;                            // canonical_digest() of every other field

  // Canonical SHA-256 over every field except receipt_sha256 (0x07G). A
  // producer stores it in receipt_sha256; a consumer recomputes and compares.
  Sha256Digest canonical_digest() const;

  friend bool operator==(const PrefixMatchReceipt&, const PrefixMatchReceipt&) = default;
};

}  // namespace kvrt
