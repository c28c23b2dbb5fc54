// The CI fault campaign: `kvrt chaos` on tests/data/chaos/chaos-ci.toml
// (fixed seed, about 20 s of faults) must fire every fault kind and end
// with 0 violations; its checks are the campaign's own
// (tools/chaos/chaos_campaign.hpp), its report is read back here.
#include <nlohmann/json.hpp>

#include "tests/node/node_fixture.hpp"
#include "tools/chaos/chaos_config.hpp"

namespace kvrt::test {

TEST_CASE("the CI chaos campaign fires every fault kind and ends with 0 violations", "[node][process][chaos]") {
  ScratchDir dir("chaos-ci");
  const std::string out = dir.file("campaign");
  KvrtProcess chaos(
      {"chaos", "--config", std::string(KVRT_SOURCE_DIR) + "/tests/data/chaos/chaos-ci.toml", "--json", "--out", out},
      dir.file("chaos.log"));
  const int status = chaos.wait(std::chrono::seconds(240));
  const std::string output = chaos.output();
  INFO(output);
  const size_t start = output.find("{\n");
  REQUIRE(start != std::string::npos);
  const nlohmann::json report = nlohmann::json::parse(output.substr(start), nullptr, false);
  REQUIRE_FALSE(report.is_discarded());
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
  CHECK(std::filesystem::exists(out + "/report.md"));
}

}  // namespace kvrt::test
