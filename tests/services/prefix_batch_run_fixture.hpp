#pragma once
// What the PrefixBatchRun tests share: pools, an in-process allocator owner
// that answers a run's requests as a script says, committed requests, and
// the hash-chain index both tests publish into.
#include <optional>
#include <vector>

#include "services/allocator/allocator_service.hpp"
#include "services/common/overloaded.hpp"
#include "services/prefix/prefix_batch_run.hpp"
#include "services/prefix/prefix_service.hpp"
#include "services/radix/radix_block_service.hpp"

namespace kvrt::test {

inline BlockAllocatorConfig pools(uint32_t groups, uint32_t blocks) {
  BlockAllocatorConfig c;
  c.block_size = 16;
  for (uint32_t g = 0; g < groups; ++g)
    c.groups.push_back(GroupPoolConfig{CacheGroupId{g}, PoolId{1 + g}, PoolGeneration{1}, blocks, 0, 64, {}});
  return c;
}

// What the in-process allocator owner does with each request.
struct AllocatorScript {
  bool fail_table = false;       // the allocator does not answer the table read
  bool fail_allocation = false;  // ... nor the tags or leases
  bool refuse_first = false;     // refuses the first tag or lease of an allocation
};

// Drives a run to its end against `alloc` under `session`; returns the
// requests in the order the run asked them (their variant index).
template <class Index>
std::vector<size_t> drive(PrefixBatchRun<Index>& run, AllocatorService& alloc, SessionId session,
                          const AllocatorScript& script) {
  std::vector<size_t> asked;
  while (std::optional<typename PrefixBatchRun<Index>::Request> request = run.next()) {
    asked.push_back(request->index());
    std::visit(overloaded{
                   [&](const TableRead& read) {
                     if (script.fail_table) return run.failed(make_error(ErrorCode::rpc_failed, "allocator: down"));
                     run.answer(alloc.read_table(session, read.request));
                   },
                   [&](const TagApply& tags) {
                     if (script.fail_allocation)
                       return run.failed(make_error(ErrorCode::rpc_failed, "allocator: down"));
                     std::vector<uint8_t> applied;
                     for (size_t i = 0; i < tags.tags.size(); ++i) {
                       const bool refuse = script.refuse_first && i == 0;
                       applied.push_back(!refuse && alloc.tag_cache_keys({tags.tags[i]})[0].ok() ? 1 : 0);
                     }
                     run.answer(PublicationAnswer{std::move(applied), {}});
                   },
                   [&](const NodeLeaseAcquire& leases) {
                     if (script.fail_allocation)
                       return run.failed(make_error(ErrorCode::rpc_failed, "allocator: down"));
                     std::vector<std::optional<LeaseId>> granted = alloc.lease_for_node(leases.handles);
                     if (script.refuse_first && !granted.empty()) {
                       if (granted[0]) alloc.release_node_leases({*granted[0]});
                       granted[0].reset();
                     }
                     run.answer(PublicationAnswer{{}, std::move(granted)});
                   },
                   [&](const NodeLeaseRelease& release) { alloc.release_node_leases(release.leases); },
               },
               *request);
  }
  return asked;
}

inline constexpr size_t kTableRead = 0, kTagApply = 1, kLeaseAcquire = 2, kLeaseRelease = 3;

// A committed request of `rows` rows that `session` owns.
inline RequestFence committed(AllocatorService& alloc, SessionId session, uint32_t rows) {
  const auto a = std::get<AllocationReceipt>(alloc.apply_one(session, AllocateOp{rows, {}, std::nullopt}));
  RequestFence fence{a.request_id, a.request_generation, a.table_version_after};
  const auto c = std::get<AllocationReceipt>(alloc.apply_one(session, CommitRowsOp{fence, rows}));
  fence.table_version = c.table_version_after;
  return fence;
}

inline PrefixService hash_chain(uint32_t groups) {
  PrefixIndexConfig config;
  config.block_tokens = 16;
  config.cache_groups = groups;
  PrefixService svc = PrefixService::create(config).value();
  svc.grant(SessionId{1}, SessionNamespaceGrant{"t/a", NamespaceGeneration{1}, "salt-a", {}, {}});
  svc.grant(SessionId{2}, SessionNamespaceGrant{"t/a", NamespaceGeneration{1}, "salt-a", {}, {}});
  return svc;
}

inline PrefixMatchOp match(const std::vector<TokenId>& prompt) {
  return PrefixMatchOp{"t/a", RequestId{0}, RequestGeneration{0}, prompt, LogitsPath::logits_required};
}

}  // namespace kvrt::test
