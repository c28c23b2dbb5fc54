#include "services/mapper/async_mapping_worker.hpp"

#include <pthread.h>
#include <sched.h>

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

AsyncMappingWorker::AsyncMappingWorker(PageBacking& target, AsyncMappingOptions options)
    : target_(target), options_(options), thread_([this] { run(); }) {
  if (options_.cpu >= 0 && options_.cpu < CPU_SETSIZE) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(options_.cpu, &set);
    pinned_ = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set) == 0;
  }
}

AsyncMappingWorker::~AsyncMappingWorker() {
  (void)await();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_flag_.store(true, std::memory_order_release);  // ends a spin at once
  work_ready_.notify_one();
  thread_.join();
}

void AsyncMappingWorker::submit(std::vector<MappingJob> jobs) {
  KVRT_ASSERT(!in_flight_, "submit() while a mapping batch is in flight");
  if (jobs.empty()) return;  // nothing to hide: no wake-up, no hand-off
  bool parked = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = std::move(jobs);
    results_.clear();
    has_work_ = true;
    done_ = false;
    parked = parked_;
    ++batches_;
    if (parked) ++wakeups_;
  }
  work_flag_.store(true, std::memory_order_release);
  in_flight_ = true;
  // A spinning thread sees the flag; only a parked one needs the system call.
  if (parked) work_ready_.notify_one();
}

std::vector<MappingJobResult> AsyncMappingWorker::await() {
  if (!in_flight_) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  owner_waiting_ = true;
  work_done_.wait(lock, [this] { return done_; });
  owner_waiting_ = false;
  in_flight_ = false;
  return std::move(results_);
}

uint64_t AsyncMappingWorker::batches() {
  std::lock_guard<std::mutex> lock(mutex_);
  return batches_;
}

uint64_t AsyncMappingWorker::wakeups() {
  std::lock_guard<std::mutex> lock(mutex_);
  return wakeups_;
}

uint64_t AsyncMappingWorker::busy_ns() {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_ns_;
}

void AsyncMappingWorker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (options_.spin_ns > 0 && !has_work_ && !stop_) {
      // Poll the hint outside the lock; the owner does not notify a thread
      // that has not parked.
      lock.unlock();
      const uint64_t deadline = monotonic_ns() + options_.spin_ns;
      for (uint32_t i = 1; !work_flag_.load(std::memory_order_acquire); ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (i % 64 == 0 && monotonic_ns() >= deadline) break;
      }
      lock.lock();
    }
    while (!has_work_ && !stop_) {
      parked_ = true;
      work_ready_.wait(lock);
      parked_ = false;
    }
    if (stop_ && !has_work_) return;
    std::vector<MappingJob> jobs = std::move(pending_);
    pending_.clear();
    has_work_ = false;
    work_flag_.store(false, std::memory_order_relaxed);
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
    if (owner_waiting_) work_done_.notify_one();
  }
}

}  // namespace kvrt
