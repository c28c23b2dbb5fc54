#pragma once
// A small fixed thread pool for the executor's data-parallel phases, across
// requests and heads. One job at a time: a caller
// hands parallel_for() a count of independent work items; the pool's workers
// and the calling thread take items from one atomic counter until none are
// left, and parallel_for() returns when every item has finished. Items must
// not depend on each other; a kernel that needs two phases (split-K partials,
// then their reduction) calls parallel_for() twice.
//
// Each item receives its worker index in [0, workers()), so a kernel can keep
// one scratch buffer per worker without locking. The calling thread is worker
// 0. A pool of one worker runs everything inline on the caller.
//
// Waiting: an idle worker, and the caller waiting for the last items, spin
// for up to kSpin before sleeping on a condition variable. Attention calls
// come back to back (one per layer of a decode step) and finish in tens to
// hundreds of microseconds, about what a futex wake-up costs in a VM, so a
// sleeping pool would run short calls on one thread.
//
// Lifetime (docs/conventions.md habit 5): the pool owns its std::jthreads; destruction
// stops and joins them. Not copyable or movable (workers hold `this`).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvrt::executor {

class ThreadPool {
 public:
  // workers == 0 picks std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(unsigned workers = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned workers() const { return workers_; }
  static constexpr std::chrono::microseconds kSpin{50};

  // Runs fn(item, worker) for every item in [0, items). Not reentrant: fn must
  // not call parallel_for on the same pool. Concurrent callers are serialised.
  void parallel_for(std::size_t items, const std::function<void(std::size_t item, unsigned worker)>& fn);

 private:
  void worker_loop(std::stop_token stop, unsigned worker);
  void drain(unsigned worker);

  unsigned workers_ = 1;
  std::mutex submit_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t, unsigned)>* job_ = nullptr;
  std::size_t items_ = 0;
  std::atomic<std::size_t> next_{0};
  uint64_t job_serial_ = 0;          // bumped per job (under mutex_) so a worker joins each job once
  std::atomic<uint64_t> posted_{0};  // job_serial_, readable while spinning
  std::atomic<unsigned> busy_{0};    // helpers inside the current job (changed under mutex_)
  std::vector<std::jthread> threads_;
};

}  // namespace kvrt::executor
