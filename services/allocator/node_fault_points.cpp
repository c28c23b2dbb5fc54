#include "services/allocator/node_fault_points.hpp"

#include <algorithm>

namespace kvrt {

void NodeFaultPoints::add(std::string owner, FaultPoints& points, std::vector<std::string> names) {
  owners_.push_back(OwnerPoints{std::move(owner), &points, std::move(names)});
}

std::vector<std::string> NodeFaultPoints::names() const {
  std::vector<std::string> out;
  for (const OwnerPoints& o : owners_)
    for (const std::string& n : o.names) out.push_back(o.owner + "." + n);
  return out;
}

const NodeFaultPoints::OwnerPoints* NodeFaultPoints::find(const std::string& qualified, std::string* point) const {
  const size_t dot = qualified.find('.');
  if (dot == std::string::npos) return nullptr;
  const std::string owner = qualified.substr(0, dot);
  *point = qualified.substr(dot + 1);
  for (const OwnerPoints& o : owners_)
    if (o.owner == owner && std::find(o.names.begin(), o.names.end(), *point) != o.names.end()) return &o;
  return nullptr;
}

size_t NodeFaultPoints::armed_count() const {
  size_t n = 0;
  for (const OwnerPoints& o : owners_) n += o.points->armed().size();
  return n;
}

Result<FaultArmReceipt> NodeFaultPoints::arm(const FaultArmRequest& request) {
  std::vector<std::pair<const OwnerPoints*, std::string>> targets;
  for (size_t i = 0; i < request.arm.size(); ++i) {
    const FaultPointArm& p = request.arm[i];
    const std::string at = "arm[" + std::to_string(i) + "]";
    std::string point;
    const OwnerPoints* owner = find(p.name, &point);
    if (owner == nullptr) {
      const std::vector<std::string> all = names();
      std::string known;
      for (size_t k = 0; k < all.size() && k < 4; ++k) known += (k ? ", " : "") + all[k];
      if (all.size() > 4) known += ", ... (" + std::to_string(all.size()) + " in all; fault_arm lists them)";
      return make_error(ErrorCode::invalid_argument,
                        "no fault point \"" + p.name + "\"; points are named <owner>.<point>: " + known, at + ".name");
    }
    if (p.nth == 0) return make_error(ErrorCode::invalid_argument, "nth counts reaches from 1", at + ".nth");
    targets.emplace_back(owner, std::move(point));
  }
  const size_t kept = request.disarm_all ? 0 : armed_count();
  if (kept + request.arm.size() > kMaxArmed)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(kept + request.arm.size()) + " armed fault points exceed the limit of " +
                          std::to_string(kMaxArmed),
                      "arm");
  if (request.disarm_all)
    for (const OwnerPoints& o : owners_) o.points->disarm_all();
  for (size_t i = 0; i < targets.size(); ++i) targets[i].first->points->arm(targets[i].second, request.arm[i].nth);
  return receipt(request.trace);
}

FaultArmReceipt NodeFaultPoints::receipt(const TraceContext& trace) const {
  FaultArmReceipt out;
  out.trace = trace;
  for (const OwnerPoints& o : owners_) {
    for (const ArmedFaultPoint& a : o.points->armed())
      out.armed.push_back(FaultPointArm{o.owner + "." + a.name, a.remaining});
    for (const auto& [name, count] : o.points->fired())
      out.fired.push_back(FaultPointFired{o.owner + "." + name, count});
  }
  out.registered = names();
  return out;
}

}  // namespace kvrt
