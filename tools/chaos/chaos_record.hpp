#pragma once
// What a campaign has found so far: the report it fills, its clock, and the
// fault that came last, which every violation names so that `--seed`
// replays it. The campaign's parts (the node, the worker slots, the hostile
// client) each write here; none of them keeps a report of its own.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "tools/chaos/chaos_campaign.hpp"

namespace kvrt::chaos {

using Clock = std::chrono::steady_clock;

struct CampaignRecord {
  ChaosReport report;
  Clock::time_point start = Clock::now();
  std::string last_fault = "none";
  std::function<void(const std::string&)> on_progress;  // may be empty

  uint64_t elapsed_ms() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  }
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
  uint64_t faults_injected() const {
    uint64_t n = 0;
    for (uint64_t k : report.injected) n += k;
    return n;
  }
  void violation(const std::string& what) {
    report.violations.push_back(Violation{elapsed_ms(), what, last_fault});
    if (on_progress) on_progress("VIOLATION at " + std::to_string(elapsed_ms()) + " ms: " + what);
  }
};

}  // namespace kvrt::chaos
