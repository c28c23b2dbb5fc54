// The CI fault campaign: `kvrt chaos` on tests/data/chaos/chaos-ci.toml
// (fixed seed, about 20 s of faults) must fire every fault kind and end
// with 0 violations; its checks are the campaign's own
// (tools/chaos/chaos_campaign.hpp), its report is read back here.
#include <nlohmann/json.hpp>

#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"
#include "tools/chaos/chaos_config.hpp"
#include "tools/chaos/hostile_client.hpp"

namespace kvrt::test {
namespace {

struct Campaign {
  nlohmann::json report;
  int status = -1;
  std::string output;  // for the failure message
};

// `kvrt chaos --json` on a config of tests/data/chaos/, its report into `out`.
Campaign run_campaign(const ScratchDir& dir, const std::string& config, const std::string& out) {
  KvrtProcess chaos(
      {"chaos", "--config", std::string(KVRT_SOURCE_DIR) + "/tests/data/chaos/" + config, "--json", "--out", out},
      dir.file("chaos.log"));
  const int status = chaos.wait(std::chrono::seconds(240));
  const std::string output = chaos.output();
  INFO(output);
  const size_t start = output.find("{\n");
  REQUIRE(start != std::string::npos);
  nlohmann::json report = nlohmann::json::parse(output.substr(start), nullptr, false);
  REQUIRE_FALSE(report.is_discarded());
  return {std::move(report), status, output};
}

}  // namespace

TEST_CASE("the CI chaos campaign fires every fault kind and ends with 0 violations", "[node][process][chaos]") {
  ScratchDir dir("chaos-ci");
  const std::string out = dir.file("campaign");
  const auto [report, status, output] = run_campaign(dir, "chaos-ci.toml", out);
  INFO(output);
  CHECK(report["violations"].size() == 0);
  CHECK(status == 0);
  for (size_t k = 0; k < chaos::kFaultKindCount; ++k) {
    const std::string kind(chaos::to_string(static_cast<chaos::FaultKind>(k)));
    INFO(kind);
    CHECK(report["faults"][kind]["injected"].get<uint64_t>() >= 1);
  }
  CHECK(report["node_restarts"].get<uint64_t>() == report["faults"]["node_sigkill"]["injected"].get<uint64_t>());
  CHECK(report["requests"].get<uint64_t>() > 0);
  CHECK(report["reuse_mismatches"].get<uint64_t>() == 0);
  CHECK(report["node_death_detection"]["count"].get<uint64_t>() >= 1);
  // Armed fault points fire: the workers' transactions that reach them roll
  // back, and the node still validates and ends quiescent.
  uint64_t fired = 0;
  for (const auto& [name, counts] : report["fault_points"].items()) fired += counts["fired"].get<uint64_t>();
  CHECK(fired >= 1);
  // The live-node fuzzer ran beside them and every answer was typed.
  CHECK(report["hostile_client"]["runs"].get<uint64_t>() >= 1);
  CHECK(report["hostile_client"]["typed_errors"].get<uint64_t>() > 0);
  CHECK(report["hostile_client"]["frames_refused"].get<uint64_t>() > 0);
  CHECK(report["hostile_client"]["unexpected"].get<uint64_t>() == 0);
  CHECK(std::filesystem::exists(out + "/report.md"));
}

// The same faults over virtual reservations (0x06): workers and the engine
// slot serve from the mapper's request slots, the node dies and restarts
// under them, and the campaign's checks (exactness of every reused and
// every slot row, the node's validate(), nothing left held) all hold.
TEST_CASE("a chaos campaign over virtual reservations ends with 0 violations", "[node][process][chaos][mapper]") {
  ScratchDir dir("chaos-ci-virtual");
  const auto [report, status, output] = run_campaign(dir, "chaos-ci-virtual.toml", dir.file("campaign"));
  INFO(output);
  CHECK(report["violations"].size() == 0);
  CHECK(status == 0);
  CHECK(report["node_restarts"].get<uint64_t>() >= 1);
  CHECK(report["requests"].get<uint64_t>() > 0);
  CHECK(report["reuse_mismatches"].get<uint64_t>() == 0);
  // The mapper's OS fault points are among those the campaign may arm.
  CHECK(report["fault_points"].contains("mapper.os_map"));
}

TEST_CASE("a hostile client gets a receipt or a typed error for everything it sends, and honest work goes on",
          "[node][chaos][hostile]") {
  ScratchDir dir("hostile");
  InProcessNode n(dir);
  auto honest = n.connect("worker-0");
  REQUIRE(honest->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const uint64_t seed = GENERATE(1ull, 20261202ull);
  INFO("seed " << seed);
  chaos::HostileClientOptions o;
  o.node = n.descriptor;
  o.token_hex = read_token_file(n.descriptor.token_path("worker-1")).value();
  o.seed = seed;
  o.duration = std::chrono::milliseconds(1500);
  const Result<chaos::HostileClientSummary> s = chaos::run_hostile_client(o);
  REQUIRE(s.ok());
  INFO("first unexpected: " << s->first_unexpected);
  CHECK(s->unexpected == 0);
  CHECK_FALSE(s->session_lost);
  // Both transports and every kind of answer were exercised.
  CHECK(s->requests_channel > 0);
  CHECK(s->requests_middleman > 0);
  CHECK(s->mutated > 0);
  CHECK(s->receipts > 0);
  CHECK(s->typed_errors > 0);
  CHECK(s->frames_refused > 0);
  // The honest session still works, and the node ends valid with nothing of
  // the hostile session left (stat() validates every owner).
  const AllocationReceipt r = allocation(*honest, AllocateOp{20, {}, std::nullopt});
  CHECK(r.outcome == AllocationOutcome::committed);
  const auto live = [&] { return n.stat("allocator", "live_requests"); };
  for (int i = 0; i < 200 && live() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(live() == 1);
}

}  // namespace kvrt::test
