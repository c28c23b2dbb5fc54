#pragma once
// Named fault points inside multi-step transactions, e.g.
// "after_reserve_group_0". Tests and fault-injection runs (the fault_arm
// route of a node started with [node] fault_injection) arm a point; the
// transaction that reaches it fails there and must roll back to the exact
// predecessor digest (0x04F). Disarmed points cost one branch.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvrt {

// An armed point and how many more times it must be reached to fire.
struct ArmedFaultPoint {
  std::string name;
  uint32_t remaining = 1;
};

class FaultPoints {
 public:
  // Fires the `nth` time (1-based) the named point is reached, once.
  void arm(std::string name, uint32_t nth = 1) { armed_.push_back({std::move(name), nth}); }
  void disarm_all() { armed_.clear(); }
  bool any_armed() const { return !armed_.empty(); }
  // In the order they were armed.
  const std::vector<ArmedFaultPoint>& armed() const { return armed_; }

  // True when an armed point fires now.
  bool reached(std::string_view name) {
    if (armed_.empty()) [[likely]]
      return false;
    for (size_t i = 0; i < armed_.size(); ++i)
      if (armed_[i].name == name && --armed_[i].remaining == 0) {
        ++fired_[armed_[i].name];
        armed_.erase(armed_.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
    return false;
  }
  // How often each point has fired since the owner started (points that
  // never fired are absent): a fault campaign reports them.
  const std::map<std::string, uint64_t, std::less<>>& fired() const { return fired_; }

 private:
  std::vector<ArmedFaultPoint> armed_;
  std::map<std::string, uint64_t, std::less<>> fired_;
};

}  // namespace kvrt
