#pragma once
// AsyncMappingWorker: the background thread of spec 0x06D ("maps a future page
// group in a background thread while the preceding iteration runs").
//
// It owns no mapper state and decides nothing. The owner thread submits one
// batch of pre-decided OS operations at a time: unmap (va) or map (va, pool
// offset) on a PageBacking; the thread performs them in order and reports, per
// job, whether it succeeded. Everything about *which* pages to map stays on the
// owner thread (VmmMapper, PrefetchingBacking).
//
// Thread safety, reasoned out:
// - Shared between the two threads: the fields under `mutex_` (the pending
//   batch, the results, the flags) and the PageBacking `target_`.
// - Batch hand-off: submit() writes the jobs under the mutex; the thread takes
//   them under the mutex. await() reads the results under the mutex after the
//   thread set `done_` under it. So every write of one side happens-before the
//   other side's read (mutex acquire/release).
// - `target_`: the thread calls it only while a batch is in flight (between
//   submit and the done_ flag). The owner promises not to call `target_` in
//   that window: PrefetchingBacking awaits before each of its own calls. So
//   `target_` is never used by two threads at once, and whatever the owner did
//   to it before submit (create()) happens-before the thread's use via the
//   mutex. The kernel serialises the mmap calls themselves; writes by kernels
//   to *other*, already published pages may run concurrently (disjoint pages).
// - Statistics written by the thread (`busy_ns_`) are read by the owner only
//   under the mutex.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "services/mapper/page_backing.hpp"

namespace kvrt {

struct MappingJob {
  enum class Kind : uint8_t { unmap = 0, map = 1 };
  Kind kind = Kind::map;
  PlannedMapping mapping;  // unmap uses va_offset and bytes only
};

struct MappingJobResult {
  MappingJob job;
  bool ok = false;
  // After a failed map the thread re-reserves the range (PROT_NONE /
  // cuMemUnmap) so it is not left as a hole; false when that failed too.
  bool range_restored = true;
};

class AsyncMappingWorker {
 public:
  explicit AsyncMappingWorker(PageBacking& target);
  ~AsyncMappingWorker();  // waits for the batch in flight, then stops the thread
  AsyncMappingWorker(const AsyncMappingWorker&) = delete;
  AsyncMappingWorker& operator=(const AsyncMappingWorker&) = delete;

  // Owner thread only. Precondition: no batch in flight (await() first).
  void submit(std::vector<MappingJob> jobs);
  // Owner thread only. Blocks until the batch in flight (if any) is done and
  // returns its results in job order; empty when nothing was in flight.
  std::vector<MappingJobResult> await();
  bool in_flight() const { return in_flight_; }  // owner's own flag, no lock needed
  // Nanoseconds the thread spent executing jobs so far (off the owner thread).
  uint64_t busy_ns();

 private:
  void run();

  PageBacking& target_;
  bool in_flight_ = false;  // owner thread only

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::vector<MappingJob> pending_;        // guarded by mutex_
  std::vector<MappingJobResult> results_;  // guarded by mutex_
  bool has_work_ = false;                  // guarded by mutex_
  bool done_ = false;                      // guarded by mutex_
  bool stop_ = false;                      // guarded by mutex_
  uint64_t busy_ns_ = 0;                   // guarded by mutex_
  std::thread thread_;                     // started last, after every field above
};

}  // namespace kvrt
