#include "services/mapper/prefetching_backing.hpp"

#include <algorithm>
#include <chrono>
#include <string>

namespace kvrt {
namespace {

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

PrefetchingBacking::PrefetchingBacking(std::unique_ptr<PageBacking> inner, AsyncMappingOptions thread)
    : inner_(std::move(inner)), worker_(std::make_unique<AsyncMappingWorker>(*inner_, thread)) {}

PrefetchingBacking::~PrefetchingBacking() {
  worker_.reset();  // joins the thread: nothing may still be mapping into inner_
  if (inner_) inner_->release();
}

Status PrefetchingBacking::create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) {
  settle();
  KVRT_TRY(inner_->create(reserved_bytes, pool_bytes, page_group_bytes));
  created_ = true;
  return Status::success();
}

void PrefetchingBacking::settle() {
  if (!worker_->in_flight()) return;
  const uint64_t t0 = monotonic_ns();
  const std::vector<MappingJobResult> results = worker_->await();
  stats_.await_ns += monotonic_ns() - t0;
  absorb(results);
}

void PrefetchingBacking::absorb(const std::vector<MappingJobResult>& results) {
  std::vector<PlannedMapping> mapped;  // in job order: sorted by address (prefetch())
  mapped.reserve(results.size());
  for (const MappingJobResult& r : results) {
    const PlannedMapping& m = r.job.mapping;
    if (r.ok) {
      if (r.job.kind == MappingJob::Kind::map) {
        mapped.push_back(m);
        ++stats_.background_maps;
      } else {
        prefetched_.erase_va(m.va_offset);
        ++stats_.background_unmaps;
      }
      continue;
    }
    // A refused prefetch changes timing only: the page stays unprefetched and
    // step() maps it synchronously. What must not survive is an address in
    // an unknown state (a stale mapping, or a hole another mmap could take).
    ++stats_.background_failures;
    if (r.job.kind == MappingJob::Kind::map && r.range_restored) continue;  // back to PROT_NONE
    ++stats_.foreground_revokes;
    if (inner_->unmap(m.va_offset, m.bytes).ok()) {
      prefetched_.erase_va(m.va_offset);
    } else if (poisoned_.ok()) {
      poisoned_ = make_error(ErrorCode::os_mapping_failed,
                             "prefetched page at reservation offset " + std::to_string(m.va_offset) +
                                 " could not be returned to reserved address space",
                             "prefetch");
    }
  }
  // Unmap jobs ran before every map job of the batch, so recording the new
  // pages last matches the order the OS saw.
  prefetched_.insert(std::move(mapped));
}

Status PrefetchingBacking::revoke_pool_alias(uint64_t va_offset, uint64_t pool_offset) {
  const std::optional<uint64_t> stale_va = prefetched_.va_of_pool(pool_offset);
  if (!stale_va || *stale_va == va_offset) return Status::success();
  ++stats_.foreground_revokes;
  KVRT_TRY(inner_->unmap(*stale_va, prefetched_.at_va(*stale_va)->bytes));
  prefetched_.erase_va(*stale_va);
  return Status::success();
}

Status PrefetchingBacking::map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) {
  settle();
  if (!poisoned_.ok()) return poisoned_;
  const PlannedMapping* ready = prefetched_.at_va(va_offset);
  if (ready != nullptr && ready->pool_offset == pool_offset && ready->bytes == bytes) {
    prefetched_.erase_va(va_offset);  // the OS already shows exactly this page here: now the core's
    ++stats_.hits;
    return Status::success();
  }
  // Never let one pool page show at two addresses, even for a moment.
  KVRT_TRY(revoke_pool_alias(va_offset, pool_offset));
  ++stats_.foreground_maps;
  const Status mapped = inner_->map(va_offset, pool_offset, bytes);
  // MAP_FIXED replaced (or, on failure, may have removed) any prefetched page
  // in the range; either way none of them is there as recorded any more.
  prefetched_.erase_range(va_offset, bytes);
  return mapped;
}

Status PrefetchingBacking::unmap(uint64_t va_offset, uint64_t bytes) {
  settle();
  if (!poisoned_.ok()) return poisoned_;
  prefetched_.erase_range(va_offset, bytes);
  return inner_->unmap(va_offset, bytes);
}

void PrefetchingBacking::release() {
  settle();
  prefetched_.clear();  // the whole reservation goes, prefetched pages with it
  inner_->release();
  created_ = false;
}

Status PrefetchingBacking::prefetch(const std::vector<PlannedMapping>& plan) {
  if (!created_) return make_error(ErrorCode::invalid_argument, "backing not created", "backing");
  // Sorted copies instead of node-based sets: this runs on the owner thread
  // every step, so its cost counts against what the prefetch hides.
  std::vector<PlannedMapping> by_va = plan;
  std::sort(by_va.begin(), by_va.end(),
            [](const PlannedMapping& a, const PlannedMapping& b) { return a.va_offset < b.va_offset; });
  std::vector<uint64_t> pools;
  pools.reserve(plan.size());
  for (const PlannedMapping& m : plan) {
    if (m.bytes == 0) return make_error(ErrorCode::invalid_argument, "empty planned mapping", "plan");
    pools.push_back(m.pool_offset);
  }
  std::sort(pools.begin(), pools.end());
  const auto same_va = [](const PlannedMapping& a, const PlannedMapping& b) { return a.va_offset == b.va_offset; };
  if (std::adjacent_find(by_va.begin(), by_va.end(), same_va) != by_va.end() ||
      std::adjacent_find(pools.begin(), pools.end()) != pools.end())
    return make_error(ErrorCode::invalid_argument, "plan names one reservation offset or pool offset twice", "plan");
  settle();
  if (!poisoned_.ok()) return poisoned_;
  const auto planned = [&](const PlannedMapping& m) {
    auto it = std::lower_bound(by_va.begin(), by_va.end(), m, [](const PlannedMapping& a, const PlannedMapping& b) {
      return a.va_offset < b.va_offset;
    });
    return it != by_va.end() && *it == m;
  };
  std::vector<MappingJob> jobs;
  jobs.reserve(prefetched_.size() + plan.size());
  // Revocations first: a pool page leaving a stale address is unmapped there
  // before the same page is mapped at its planned one (single thread, in order).
  for (const PlannedMapping& m : prefetched_.entries())
    if (!planned(m)) jobs.push_back(MappingJob{MappingJob::Kind::unmap, m});
  for (const PlannedMapping& p : by_va) {  // address order: absorb() records them without sorting
    const PlannedMapping* done = prefetched_.at_va(p.va_offset);
    if (done == nullptr || !(*done == p)) jobs.push_back(MappingJob{MappingJob::Kind::map, p});
  }
  stats_.planned += plan.size();
  worker_->submit(std::move(jobs));
  return Status::success();
}

PrefetchStats PrefetchingBacking::stats() const {
  PrefetchStats s = stats_;
  s.background_ns = worker_->busy_ns();
  s.batches = worker_->batches();
  s.wakeups = worker_->wakeups();
  s.thread_pinned = worker_->pinned();
  return s;
}

}  // namespace kvrt
