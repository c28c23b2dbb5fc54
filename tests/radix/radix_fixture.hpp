#pragma once
// Shared helpers of the [radix] suites: the 24-slot teaching index of spec
// 0x08F and small conversions.
#include <catch2/catch.hpp>
#include <vector>

#include "tests/spec_lab/radix_index.hpp"

namespace kvrt::radix_test {

inline std::vector<TokenSlotId> slots(std::initializer_list<uint64_t> ids) {
  std::vector<TokenSlotId> out;
  for (uint64_t s : ids) out.push_back(TokenSlotId{s});
  return out;
}

inline std::vector<RadixNodeId> node_ids(std::initializer_list<uint64_t> ids) {
  std::vector<RadixNodeId> out;
  for (uint64_t s : ids) out.push_back(RadixNodeId{s});
  return out;
}

inline RadixRequestRef request(uint64_t id, uint32_t generation = 1) {
  return RadixRequestRef{RequestId{id}, RequestGeneration{generation}};
}

// 0x08F: 24 physical token slots, page size 1, LRU.
inline RadixIndex teaching_index(uint64_t row_bytes = 0) {
  RadixIndexConfig c;
  c.pool_slots = 24;
  c.row_bytes = row_bytes;
  return RadixIndex::create(c).value();
}

// Every transition of the index leaves it valid (docs/conventions.md habit 2).
inline void require_valid(const RadixIndex& index) {
  const Status s = index.validate();
  INFO((s.ok() ? std::string("ok") : s.error().describe()));
  REQUIRE(s.ok());
}

inline void require_valid(const RadixTree& tree) {
  const Status s = tree.validate();
  INFO((s.ok() ? std::string("ok") : s.error().describe()));
  REQUIRE(s.ok());
}

// Publishes `tokens` for a request that holds no lease, with the next free
// slots of the pool as its freshly computed input slots (0x08C S_in).
inline RadixMutationReceipt publish_fresh(RadixIndex& index, RadixRequestRef req, std::vector<TokenId> tokens,
                                          RadixPublication publication) {
  RadixPublishArgs a;
  a.request = req;
  a.publication = publication;
  a.append_slots = index.pool().peek_free(static_cast<uint32_t>(tokens.size()));
  a.tokens = std::move(tokens);
  Result<RadixMutationReceipt> r = index.publish(a);
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  require_valid(index);
  return std::move(r).value();
}

}  // namespace kvrt::radix_test
