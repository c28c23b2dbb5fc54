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
//
// Waking a parked thread is a futex system call on the owner's path (about
// 1-6 us on a virtual machine), which is most of what an asynchronous step
// leaves visible. With AsyncMappingOptions::spin_ns the thread, having
// finished a batch, polls an atomic flag for that long before it parks, and
// the owner wakes it only if it parked: on a core of its own (cpu) and with a
// spin longer than a decode step, steady decode hands batches over without
// any system call. The flag is a hint; has_work_ under the mutex stays the
// truth, and `parked_` (under the mutex) is set before the thread waits and
// read by submit() after it published the batch, so no wake-up is lost.
#include <atomic>
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

struct AsyncMappingOptions {
  // Poll for the next batch this long before parking [ns]; 0 parks at once
  // (the right choice when the thread shares the owner's core).
  uint64_t spin_ns = 0;
  // Pin the thread to this CPU; -1 leaves it where the scheduler puts it.
  // A CPU outside the process's affinity is refused by the kernel and the
  // thread stays unpinned (pinned() says which).
  int cpu = -1;
};

class AsyncMappingWorker {
 public:
  explicit AsyncMappingWorker(PageBacking& target, AsyncMappingOptions options = {});
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
  // Batches submitted, and of those the ones handed to a parked thread
  // (a system call each).
  uint64_t batches();
  uint64_t wakeups();
  bool pinned() const { return pinned_; }

 private:
  void run();

  PageBacking& target_;
  const AsyncMappingOptions options_;
  bool in_flight_ = false;              // owner thread only
  bool pinned_ = false;                 // set before the thread starts its loop, read after construction
  std::atomic<bool> work_flag_{false};  // hint for the spinning thread: a batch may be pending

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::vector<MappingJob> pending_;        // guarded by mutex_
  std::vector<MappingJobResult> results_;  // guarded by mutex_
  bool has_work_ = false;                  // guarded by mutex_
  bool done_ = false;                      // guarded by mutex_
  bool stop_ = false;                      // guarded by mutex_
  bool parked_ = false;                    // guarded by mutex_: the thread waits on work_ready_
  bool owner_waiting_ = false;             // guarded by mutex_: await() waits on work_done_
  uint64_t wakeups_ = 0;                   // guarded by mutex_
  uint64_t batches_ = 0;                   // guarded by mutex_
  uint64_t busy_ns_ = 0;                   // guarded by mutex_
  std::thread thread_;                     // started last, after every field above
};

}  // namespace kvrt
