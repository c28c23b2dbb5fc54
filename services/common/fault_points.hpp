#pragma once
// Named fault points inside multi-step transactions, e.g. the allocator's
// "after_reserve_group_0" or the reuse coordinator's "after_acquire_leases".
// Tests and fault-injection runs (the fault_arm route of a node started with
// [node] fault_injection, NodeFaultPoints) arm a point; the transaction that
// reaches it fails there and must roll back to the exact predecessor digest,
// or compensate (0x04F). Disarmed points cost one atomic load.
//
// Thread-safe: the owner that reaches its points runs on its own actor
// thread, while the fault_arm route arms them from the allocator's. The
// table lives behind a pointer so that an owner core holding one stays
// movable; copying an owner copies its armed points (a twin in a test must
// not share them).
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrt {

// An armed point and how many more times it must be reached to fire.
struct ArmedFaultPoint {
  std::string name;
  uint32_t remaining = 1;
};

class FaultPoints {
 public:
  FaultPoints() : table_(std::make_unique<Table>()) {}
  FaultPoints(const FaultPoints& other) : table_(std::make_unique<Table>()) { copy_from(other); }
  FaultPoints& operator=(const FaultPoints& other) {
    if (this != &other) {
      table_ = std::make_unique<Table>();
      copy_from(other);
    }
    return *this;
  }
  // A moved-from owner keeps an empty table, never a null one.
  FaultPoints(FaultPoints&& other) : table_(std::exchange(other.table_, std::make_unique<Table>())) {}
  FaultPoints& operator=(FaultPoints&& other) {
    if (this != &other) table_ = std::exchange(other.table_, std::make_unique<Table>());
    return *this;
  }

  // Fires the `nth` time (1-based) the named point is reached, once.
  void arm(std::string name, uint32_t nth = 1) {
    std::lock_guard lock(table_->mutex);
    table_->armed.push_back({std::move(name), nth});
    table_->armed_count.store(table_->armed.size(), std::memory_order_release);
  }
  void disarm_all() {
    std::lock_guard lock(table_->mutex);
    table_->armed.clear();
    table_->armed_count.store(0, std::memory_order_release);
  }
  bool any_armed() const { return table_->armed_count.load(std::memory_order_acquire) != 0; }
  // In the order they were armed.
  std::vector<ArmedFaultPoint> armed() const {
    std::lock_guard lock(table_->mutex);
    return table_->armed;
  }

  // True when an armed point fires now.
  bool reached(std::string_view name) {
    if (!any_armed()) [[likely]]
      return false;
    std::lock_guard lock(table_->mutex);
    std::vector<ArmedFaultPoint>& armed = table_->armed;
    for (size_t i = 0; i < armed.size(); ++i)
      if (armed[i].name == name && --armed[i].remaining == 0) {
        ++table_->fired[armed[i].name];
        armed.erase(armed.begin() + static_cast<std::ptrdiff_t>(i));
        table_->armed_count.store(armed.size(), std::memory_order_release);
        return true;
      }
    return false;
  }
  // How often each point has fired since the owner started (points that
  // never fired are absent): a fault campaign reports them.
  std::map<std::string, uint64_t, std::less<>> fired() const {
    std::lock_guard lock(table_->mutex);
    return table_->fired;
  }

 private:
  struct Table {
    mutable std::mutex mutex;
    std::atomic<size_t> armed_count{0};
    std::vector<ArmedFaultPoint> armed;
    std::map<std::string, uint64_t, std::less<>> fired;
  };
  void copy_from(const FaultPoints& other) {
    std::lock_guard lock(other.table_->mutex);
    table_->armed = other.table_->armed;
    table_->fired = other.table_->fired;
    table_->armed_count.store(table_->armed.size(), std::memory_order_release);
  }
  std::unique_ptr<Table> table_;
};

}  // namespace kvrt
