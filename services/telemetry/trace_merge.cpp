#include "services/telemetry/trace_merge.hpp"

#include <nlohmann/json.hpp>

namespace kvrt {

Status TraceMerge::add(std::string_view text, const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
    return make_error(ErrorCode::invalid_argument, origin + " is not a Chrome trace-event file", "input");
  for (const nlohmann::json& e : j["traceEvents"]) events_.push_back(e.dump());
  return Status::success();
}

std::string TraceMerge::json() const {
  // nlohmann::json orders an object's keys, so this is the text that dumping
  // {"displayTimeUnit": "ns", "traceEvents": [...]} as one value gives.
  std::string out = R"({"displayTimeUnit":"ns","traceEvents":[)";
  for (size_t i = 0; i < events_.size(); ++i) {
    if (i > 0) out += ',';
    out += events_[i];
  }
  return out + "]}";
}

}  // namespace kvrt
