#include "engine/node_stats_json.hpp"

#include <string>

#include "services/reuse/reuse_funnel_counters.hpp"

namespace kvrt {
namespace {

nlohmann::ordered_json funnel_json(const NodeReuseFunnel& f) {
  nlohmann::ordered_json j;
  j["requests"] = f.requests;
  j["authorized"] = f.authorized;
  j["candidates"] = f.candidates;
  j["current_generation"] = f.current;
  j["leased"] = f.leased;
  j["out_of_capacity"] = f.out_of_capacity;
  j["quota_exceeded"] = f.quota_exceeded;
  j["unsettled"] = f.unsettled;
  nlohmann::ordered_json rejections = nlohmann::ordered_json::object();
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (f.rejections[r] > 0) rejections[std::string(to_string(static_cast<RejectionReason>(r)))] = f.rejections[r];
  j["rejections"] = rejections;
  return j;
}

}  // namespace

nlohmann::ordered_json node_stats_json(const NodeStats& stats) {
  bool validate_ok = true, validated = true;
  for (const OwnerStats& o : stats.owners) {
    validate_ok = validate_ok && o.validate_ok;
    validated = validated && o.validated;
  }
  auto top = [&](const char* owner, const char* name) { return stats.value(owner, name).value_or(-1); };
  nlohmann::ordered_json j;
  j["validated"] = validated;
  j["validate_ok"] = validate_ok;
  j["leaked_blocks"] = top("allocator", "leaked_blocks");
  j["refcount_delta"] = top("allocator", "refcount_delta");
  j["live_leases"] = top("allocator", "live_leases");
  j["workers_connected"] = top("node", "workers_connected");
  j["reuse_funnel"] = funnel_json(node_reuse_funnel(stats.owners));
  for (const OwnerStats& o : stats.owners) {
    nlohmann::ordered_json owner;
    owner["validated"] = o.validated;
    owner["validate_ok"] = o.validate_ok;
    if (!o.validate_error.empty()) owner["validate_error"] = o.validate_error;
    for (const StatValue& v : o.values) owner[v.name] = v.value;
    j["owners"][o.owner] = owner;
  }
  return j;
}

}  // namespace kvrt
