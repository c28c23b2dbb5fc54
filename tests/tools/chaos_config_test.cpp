// The chaos config and its fault schedule: errors name file, line and field;
// the schedule is a pure function of (config, seed), each kind a Poisson
// process of its configured rate, checked against its expectation.
#include "tools/chaos/chaos_config.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>

namespace kvrt::chaos {
namespace {

ChaosConfig parse(const std::string& text) {
  Result<ChaosConfig> c = parse_chaos_config(text, "/tmp/chaos.toml");
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  return *c;
}

Error refuse(const std::string& text) {
  Result<ChaosConfig> c = parse_chaos_config(text, "/tmp/chaos.toml");
  REQUIRE_FALSE(c.ok());
  return c.error();
}

}  // namespace

TEST_CASE("chaos config: defaults, overrides and a node config relative to the file", "[chaos]") {
  const ChaosConfig d = parse("[chaos]\n");
  CHECK(d.seed == 1);
  CHECK(d.workers == 4);
  CHECK(d.node_config_path == "/tmp/node.toml");
  for (uint32_t r : d.per_minute) CHECK(r == 0);
  CHECK(d.baseline_s == 0);
  CHECK(d.hostile_principal == "chaos-hostile");
  CHECK(d.hostile_ms == 2000);
  const ChaosConfig c = parse(
      "[chaos]\nseed = 9\nduration_s = 30\nworkers = 2\nnode_config = \"n/x.toml\"\nbaseline_s = 15\n"
      "hostile_principal = \"fuzzer\"\nhostile_ms = 500\n"
      "[faults]\nworker_sigkill = 12\nnode_sigkill = 1\nhostile_client = 4\n");
  CHECK(c.baseline_s == 15);
  CHECK(c.hostile_principal == "fuzzer");
  CHECK(c.hostile_ms == 500);
  CHECK(c.per_minute[static_cast<size_t>(FaultKind::hostile_client)] == 4);
  CHECK(c.seed == 9);
  CHECK(c.duration_s == 30);
  CHECK(c.node_config_path == "/tmp/n/x.toml");
  CHECK(c.per_minute[static_cast<size_t>(FaultKind::worker_sigkill)] == 12);
  CHECK(c.per_minute[static_cast<size_t>(FaultKind::node_sigkill)] == 1);
}

TEST_CASE("chaos config: a bad key, table or value is a typed error naming the field", "[chaos]") {
  CHECK(refuse("").field == "chaos");
  CHECK(refuse("[chaos]\nwrokers = 2\n").field == "chaos.wrokers");
  CHECK(refuse("[chaos]\n[faults]\nworker_sigkil = 2\n").field == "faults.worker_sigkil");
  CHECK(refuse("[chaos]\n[extra]\n").field == "extra");
  CHECK(refuse("[chaos]\nworkers = 0\n").code == ErrorCode::config_field);
  CHECK(refuse("[chaos]\nhostile_ms = 0\n").field == "chaos.hostile_ms");
  CHECK(refuse("[chaos]\n[faults]\nnode_sigkill = -1\n").field.find("node_sigkill") != std::string::npos);
  CHECK(refuse("[chaos]\nseed = \"x\"\n").code == ErrorCode::config_field);
  CHECK(refuse("[chaos\n").code == ErrorCode::config_parse);
  // Rates and duration bound the schedule drawn before the campaign starts.
  CHECK(refuse("[chaos]\nduration_s = 86400\n[faults]\nworker_sigkill = 60000\n").field == "faults");
}

TEST_CASE("chaos schedule: one seed always gives one schedule, another seed another", "[chaos]") {
  ChaosConfig c = parse("[chaos]\nduration_s = 120\nworkers = 5\n[faults]\nworker_sigkill = 30\nnode_sigkill = 2\n");
  const std::vector<FaultEvent> a = make_fault_schedule(c, 7), b = make_fault_schedule(c, 7);
  CHECK(a == b);
  CHECK(a != make_fault_schedule(c, 8));
  for (size_t i = 1; i < a.size(); ++i) CHECK(a[i - 1].at_ms <= a[i].at_ms);
  for (const FaultEvent& e : a) {
    CHECK(e.at_ms < 120000);
    CHECK(e.slot < 5);
    if (e.kind == FaultKind::node_sigkill) CHECK(e.slot == 0);
  }
  // Changing one kind's rate leaves every other kind's moments alone.
  ChaosConfig more = c;
  more.per_minute[static_cast<size_t>(FaultKind::worker_sigkill)] = 90;
  auto of_kind = [](const std::vector<FaultEvent>& events, FaultKind k) {
    std::vector<FaultEvent> out;
    for (const FaultEvent& e : events)
      if (e.kind == k) out.push_back(e);
    return out;
  };
  CHECK(of_kind(make_fault_schedule(more, 7), FaultKind::node_sigkill) == of_kind(a, FaultKind::node_sigkill));
}

TEST_CASE("chaos schedule: each kind arrives at its rate, uniformly over slots", "[chaos]") {
  // Seeded: a failure prints the seed. Over many seeds the counts of a
  // Poisson process of mean m stay within 5 standard deviations (sqrt m).
  ChaosConfig c = parse(
      "[chaos]\nduration_s = 600\nworkers = 4\n[faults]\nworker_sigkill = 60\nworker_sigstop = 20\n"
      "worker_hang = 5\nworker_sigterm = 1\nnode_sigkill = 3\n");
  for (uint64_t seed : {1ull, 2ull, 20261202ull}) {
    INFO("seed " << seed);
    const std::vector<FaultEvent> events = make_fault_schedule(c, seed);
    std::map<FaultKind, uint64_t> count;
    std::map<uint32_t, uint64_t> per_slot;
    for (const FaultEvent& e : events) {
      ++count[e.kind];
      if (e.kind == FaultKind::worker_sigkill) ++per_slot[e.slot];
    }
    for (size_t k = 0; k < kFaultKindCount; ++k) {
      const double mean = c.per_minute[k] * 10.0;  // 10 minutes
      const auto n = static_cast<double>(count[static_cast<FaultKind>(k)]);
      INFO(to_string(static_cast<FaultKind>(k)) << ": " << n << " events, expected " << mean);
      CHECK(std::abs(n - mean) <= 5 * std::sqrt(mean) + 1);
    }
    // 600 kills over 4 slots: about 150 each (binomial sd about 10.6).
    for (uint32_t s = 0; s < 4; ++s) CHECK(std::abs(static_cast<double>(per_slot[s]) - 150.0) <= 60.0);
  }
}

}  // namespace kvrt::chaos
