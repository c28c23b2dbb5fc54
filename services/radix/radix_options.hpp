#pragma once
// Options of the radix index (spec 0x08): page granularity and the eviction
// policy, as typed values (docs/conventions.md: never a policy chosen by comparing
// strings on the hot path; strings are parsed once, at the boundary).
#include <cstdint>
#include <string_view>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// Victim ranking among unlocked leaves (0x08E: "unlocked leaf first; victim
// ranking is a policy choice"). The pinned SGLang v0.5.11 strategies, each a
// lexicographic key, smallest evicted first:
//   lru      (last_access)             least recently used (default)
//   lfu      (hits, last_access)       least frequently used, LRU within ties
//   fifo     (created)                 oldest node first
//   mru      (-last_access)            most recently used first
//   filo     (-created)                newest node first
//   priority (priority, last_access)   lowest request priority first, then LRU
//   slru     (hits >= threshold, last_access)  segmented LRU: probationary
//                                      segment (few hits) before protected
enum class EvictionPolicy : uint8_t { lru, lfu, fifo, mru, filo, priority, slru };

std::string_view to_string(EvictionPolicy policy);
// Parses "lru", "lfu", ... (lower case, as SGLang's --radix-eviction-policy).
Result<EvictionPolicy> parse_eviction_policy(std::string_view name);

struct RadixOptions {
  // Tokens per page [tokens]. Every exposed boundary (edge length, split
  // point, stored length) is a multiple of it (0x08: "larger page policies
  // must align every exposed boundary to their declared granularity").
  uint32_t page_size = 1;
  EvictionPolicy eviction = EvictionPolicy::lru;
  // Whether a match counts one hit on every node it walks (drives lfu/slru).
  // SGLang's RadixCache declares hit_count but never increments it (only its
  // hierarchical cache does), so its lfu/slru order degenerates to LRU; the
  // sglang replay profile turns counting off to stay identical.
  bool count_hits = true;
  // SLRU: a node with at least this many hits is in the protected segment
  // (SGLang SLRUStrategy protected_threshold).
  uint32_t slru_protected_hits = 2;

  Status validate() const;
};

}  // namespace kvrt
