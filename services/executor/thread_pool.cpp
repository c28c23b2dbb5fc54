#include "services/executor/thread_pool.hpp"

namespace kvrt::executor {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpin has passed; true when done() held.
template <class Done>
bool spin_until(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + ThreadPool::kSpin;
  for (uint32_t i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace

ThreadPool::ThreadPool(unsigned workers) {
  if (workers == 0) workers = std::max(1u, std::thread::hardware_concurrency());
  workers_ = workers;
  threads_.reserve(workers_ - 1);
  for (unsigned w = 1; w < workers_; ++w)
    threads_.emplace_back([this, w](std::stop_token stop) { worker_loop(stop, w); });
}

ThreadPool::~ThreadPool() {
  for (auto& t : threads_) t.request_stop();
  {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  threads_.clear();  // jthread joins
}

void ThreadPool::drain(unsigned worker) {
  while (true) {
    const std::size_t item = next_.fetch_add(1, std::memory_order_relaxed);
    if (item >= items_) return;
    (*job_)(item, worker);
  }
}

void ThreadPool::worker_loop(std::stop_token stop, unsigned worker) {
  uint64_t seen = 0;
  while (true) {
    spin_until([&] { return posted_.load(std::memory_order_acquire) != seen || stop.stop_requested(); });
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop.stop_requested() || job_serial_ != seen; });
      if (stop.stop_requested()) return;
      seen = job_serial_;
      busy_.fetch_add(1, std::memory_order_relaxed);
    }
    drain(worker);
    {
      std::lock_guard lock(mutex_);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(std::size_t items, const std::function<void(std::size_t, unsigned)>& fn) {
  if (items == 0) return;
  if (workers_ == 1 || items == 1) {
    for (std::size_t i = 0; i < items; ++i) fn(i, 0);
    return;
  }
  std::lock_guard submit(submit_);
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    items_ = items;
    next_.store(0, std::memory_order_relaxed);
    ++job_serial_;
    posted_.store(job_serial_, std::memory_order_release);
  }
  wake_.notify_all();
  drain(0);
  // Every item has been taken; wait for helpers still running theirs. A helper
  // that joins after this point finds no item left and leaves at once, and it
  // cannot see the next job's state before registering as busy under mutex_.
  spin_until([&] { return busy_.load(std::memory_order_acquire) == 0; });
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return busy_.load(std::memory_order_relaxed) == 0; });
  job_ = nullptr;
  items_ = 0;
}

}  // namespace kvrt::executor
