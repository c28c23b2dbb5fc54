#include "services/telemetry/reconciliation_gauges.hpp"

#include <map>
#include <string>

namespace kvrt {
namespace {

Error identity_broken(std::string reason, std::string field) {
  return make_error(ErrorCode::ledger_identity_broken, std::move(reason), std::move(field));
}

Result<std::map<uint32_t, const BlockObservation*>> index_blocks(const PoolObservation& pool) {
  std::map<uint32_t, const BlockObservation*> by_id;
  for (const BlockObservation& b : pool.blocks)
    if (!by_id.emplace(b.block.value, &b).second)
      return identity_broken("block " + std::to_string(b.block.value) +
                                 " is observed twice; block states must be "
                                 "mutually exclusive",
                             "blocks");
  return by_id;
}

}  // namespace

Result<PoolPartition> pool_partition(const PoolObservation& pool) {
  std::map<uint32_t, const BlockObservation*> by_id;
  KVRT_TRY_ASSIGN(by_id, index_blocks(pool));
  if (pool.blocks.size() != pool.capacity_blocks)
    return identity_broken("observed " + std::to_string(pool.blocks.size()) + " blocks of a " +
                               std::to_string(pool.capacity_blocks) + "-block pool",
                           "capacity_blocks");
  PoolPartition p;
  p.pool = pool.capacity_blocks;
  for (const BlockObservation& b : pool.blocks) switch (b.state) {
      case ObservedBlockState::free:
        ++p.free;
        break;
      case ObservedBlockState::evictable:
        ++p.evictable;
        break;
      case ObservedBlockState::live:
        ++p.live;
        break;
      case ObservedBlockState::reserved:
      case ObservedBlockState::copying:
        ++p.reserved_or_copying;
        break;
    }
  return p;
}

Result<RefcountReconciliation> reconcile_refcounts(const PoolObservation& pool) {
  std::map<uint32_t, const BlockObservation*> by_id;
  KVRT_TRY_ASSIGN(by_id, index_blocks(pool));
  std::map<uint32_t, uint64_t> derived;
  auto count = [&](const std::vector<PhysicalBlockId>& refs, const char* field) -> Status {
    for (size_t i = 0; i < refs.size(); ++i) {
      if (!by_id.contains(refs[i].value))
        return identity_broken("reference to block " + std::to_string(refs[i].value) + " outside the pool",
                               std::string(field) + "[" + std::to_string(i) + "]");
      ++derived[refs[i].value];
    }
    return Status::success();
  };
  KVRT_TRY(count(pool.request_map_refs, "request_map_refs"));
  KVRT_TRY(count(pool.lease_refs, "lease_refs"));
  RefcountReconciliation r;
  for (const auto& [id, b] : by_id) {
    const uint64_t d = derived.contains(id) ? derived.at(id) : 0;
    r.recorded += b->recorded_refcount;
    r.derived += d;
    if (d != b->recorded_refcount) ++r.blocks_with_drift;
  }
  r.delta = static_cast<int64_t>(r.recorded) - static_cast<int64_t>(r.derived);
  return r;
}

}  // namespace kvrt
