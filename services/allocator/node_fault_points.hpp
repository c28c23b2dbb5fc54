#pragma once
// NodeFaultPoints: the node's fault points, by owner. The fault_arm route
// names a point as "<owner>.<point>" ("allocator.after_reserve_group_0",
// "reuse.after_acquire_leases"). Each owner keeps its own FaultPoints and
// reaches them on its own thread; this table only names and arms them, so
// an owner's hot path never looks at another owner's points. It is the
// allocator service's because the allocator's actor answers the fault_arm
// route (schema/allocator.capnp); the other owners add theirs when the node
// is built, before any session can call it.
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "services/common/fault_points.hpp"
#include "services/common/result.hpp"

namespace kvrt {

class NodeFaultPoints {
 public:
  NodeFaultPoints() = default;
  // Owners are held by address: the table is not copied or moved with them.
  NodeFaultPoints(const NodeFaultPoints&) = delete;
  NodeFaultPoints& operator=(const NodeFaultPoints&) = delete;

  // `points` must outlive this table; `names` are the owner's own (without
  // the "<owner>." prefix), in the order the receipt lists them.
  void add(std::string owner, FaultPoints& points, std::vector<std::string> names);
  // Every point, qualified, owner by owner in the order they were added.
  std::vector<std::string> names() const;

  // Checked whole (every name registered, nth >= 1, at most kMaxArmed armed
  // afterwards) before any point changes; then disarm_all, then arm in order.
  // The receipt lists what is armed, what exists and what has fired.
  Result<FaultArmReceipt> arm(const FaultArmRequest& request);
  // What is armed, registered and fired now, without changing anything.
  FaultArmReceipt receipt(const TraceContext& trace) const;
  static constexpr size_t kMaxArmed = 1024;

 private:
  struct OwnerPoints {
    std::string owner;
    FaultPoints* points = nullptr;
    std::vector<std::string> names;
  };
  // The owner and the point's own name of a qualified name; nullptr when
  // no owner registered it.
  const OwnerPoints* find(const std::string& qualified, std::string* point) const;
  size_t armed_count() const;
  std::vector<OwnerPoints> owners_;
};

}  // namespace kvrt
