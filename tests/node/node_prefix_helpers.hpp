#pragma once
// Prefix-reuse steps against a node, as a worker takes them (tests/node_*):
// allocate, commit and publish a prompt; look it up; allocate with its hits.
#include <string>
#include <vector>

#include "tests/node/node_fixture.hpp"

namespace kvrt::test {

inline AllocationReceipt allocation(Client& c, AllocatorOp op) {
  Result<AllocatorBatchReceipt> r = c.call(AllocatorBatch{{}, {std::move(op)}});
  REQUIRE(r.ok());
  const auto* a = std::get_if<AllocationReceipt>(&r->outcomes.at(0));
  INFO((a == nullptr ? std::get<Error>(r->outcomes[0]).describe() : "ok"));
  REQUIRE(a != nullptr);
  return *a;
}

inline PrefixMatchReceipt match(Client& c, const std::string& ns, const std::vector<TokenId>& prompt,
                                const RequestIdentity& identity = {}) {
  Result<PrefixBatchReceipt> r =
      c.call(PrefixBatch{{}, {PrefixMatchOp{ns, RequestId{0}, RequestGeneration{0}, prompt, {}, identity}}});
  REQUIRE(r.ok());
  const auto* m = std::get_if<PrefixMatchReceipt>(&r->outcomes.at(0));
  REQUIRE(m != nullptr);
  return *m;
}

// Allocates `prompt` in namespace `ns` (which the session authorized),
// commits every row and publishes its full pages.
inline PrefixPublishReceipt serve_and_publish(Client& c, const std::vector<TokenId>& prompt, RequestFence* fence_out,
                                              const std::string& ns = "test/shared",
                                              const RequestIdentity& identity = {}) {
  const AllocationReceipt r = allocation(c, AllocateOp{static_cast<uint32_t>(prompt.size()), {}, std::nullopt, ns});
  const RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
  const AllocationReceipt committed = allocation(c, CommitRowsOp{fence, static_cast<uint32_t>(prompt.size())});
  if (fence_out) *fence_out = RequestFence{fence.request, fence.generation, committed.table_version_after};
  Result<PrefixBatchReceipt> p = c.call(PrefixBatch{
      {}, {PrefixPublishOp{ns, fence.request, prompt, 0, static_cast<uint32_t>(prompt.size() / 16), identity}}});
  REQUIRE(p.ok());
  const auto* receipt = std::get_if<PrefixPublishReceipt>(&p->outcomes.at(0));
  INFO((receipt == nullptr ? std::get<Error>(p->outcomes[0]).describe() : "ok"));
  REQUIRE(receipt != nullptr);
  return *receipt;
}

inline std::vector<TokenId> prompt_of(TokenId seed, size_t n) {
  std::vector<TokenId> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = seed * 1000 + static_cast<TokenId>(i);
  return t;
}

// Every handle of a match receipt, bundle-major, as AllocateOp::prefix_hit takes them.
inline std::vector<PhysicalBlockHandle> hit_handles(const PrefixMatchReceipt& m) {
  std::vector<PhysicalBlockHandle> hit;
  for (const auto& bundle : m.matched_group_handles)
    hit.insert(hit.end(), bundle.handles.begin(), bundle.handles.end());
  return hit;
}

}  // namespace kvrt::test
