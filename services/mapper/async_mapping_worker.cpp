#include "services/mapper/async_mapping_worker.hpp"

#include <chrono>
#include <utility>

#include "services/common/assert.hpp"

namespace kvrt {
namespace {

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

AsyncMappingWorker::AsyncMappingWorker(PageBacking& target) : target_(target), thread_([this] { run(); }) {}

AsyncMappingWorker::~AsyncMappingWorker() {
  (void)await();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_one();
  thread_.join();
}

void AsyncMappingWorker::submit(std::vector<MappingJob> jobs) {
  KVRT_ASSERT(!in_flight_, "submit() while a mapping batch is in flight");
  if (jobs.empty()) return;  // nothing to hide: no wake-up, no hand-off
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = std::move(jobs);
    results_.clear();
    has_work_ = true;
    done_ = false;
  }
  in_flight_ = true;
  work_ready_.notify_one();
}

std::vector<MappingJobResult> AsyncMappingWorker::await() {
  if (!in_flight_) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return done_; });
  in_flight_ = false;
  return std::move(results_);
}

uint64_t AsyncMappingWorker::busy_ns() {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_ns_;
}

void AsyncMappingWorker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return has_work_ || stop_; });
    if (stop_ && !has_work_) return;
    std::vector<MappingJob> jobs = std::move(pending_);
    pending_.clear();
    has_work_ = false;
    lock.unlock();
    // Outside the lock: the owner does not touch target_ until done_ is set.
    const uint64_t t0 = monotonic_ns();
    std::vector<MappingJobResult> out;
    out.reserve(jobs.size());
    for (const MappingJob& job : jobs) {
      MappingJobResult r{job, false, true};
      const PlannedMapping& m = job.mapping;
      if (job.kind == MappingJob::Kind::map) {
        r.ok = target_.map(m.va_offset, m.pool_offset, m.bytes).ok();
        if (!r.ok) r.range_restored = target_.unmap(m.va_offset, m.bytes).ok();
      } else {
        r.ok = target_.unmap(m.va_offset, m.bytes).ok();
        r.range_restored = r.ok;
      }
      out.push_back(r);
    }
    const uint64_t spent = monotonic_ns() - t0;
    lock.lock();
    results_ = std::move(out);
    busy_ns_ += spent;
    done_ = true;
    work_done_.notify_one();
  }
}

}  // namespace kvrt
