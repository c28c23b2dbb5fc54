// `kvrt ledger` end to end: the built binary (KVRT_BINARY) prints one JSON
// object whose figures are the 0x0D worked ledger, and rejects bad input with
// exit code 2.
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/kvrt_cli.hpp"
#include "tests/tools/ledger_fixture.hpp"

using namespace kvrt;
using namespace kvrt::ledger_test;

namespace {

using kvrt::test::KvrtRun;
using kvrt::test::run_kvrt;

nlohmann::json run_json(const std::string& args) {
  const KvrtRun run = run_kvrt(args);
  INFO(run.out);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

}  // namespace

TEST_CASE("kvrt ledger --json prints the 0x0D worked ledger", "[ledger][cli]") {
  const nlohmann::json j = run_json("ledger --json");
  CHECK(j["row"]["row_bytes"] == 32ull * 4 * 128 * 4);
  CHECK(j["row"]["block_bytes"] == mib(1));
  CHECK(j["rectangular"]["logical_bytes"] == 74 * kib(64));
  CHECK(j["rectangular"]["reserved_bytes"] == mib(9));
  CHECK(j["rectangular"]["slack_bytes"] == mib(4.375));
  CHECK(j["request_view"]["reference_blocks"] == 6);
  CHECK(j["request_view"]["capacity_bytes"] == mib(6));
  CHECK(j["request_view"]["tail_bytes"] == mib(1.375));
  CHECK(j["unique_physical"]["block_ids"] == nlohmann::json::array({100, 101, 102}));
  CHECK(j["unique_physical"]["capacity_bytes"] == mib(3));
  CHECK(j["unique_physical"]["materialized_bytes"] == mib(2.0625));
  CHECK(j["unique_physical"]["tail_bytes"] == mib(0.9375));
  CHECK(j["sharing_savings"]["deduplicated_bytes"] == mib(2.5625));
  CHECK(j["sharing_savings"]["avoided_bytes"] == mib(3));
  CHECK(j["pool"]["idle_bytes"] == mib(5));
  CHECK(j["metadata"]["total_bytes"] == 482);
  CHECK(j["arena"]["external_fragmentation"]["state"] == "applicable");
  CHECK(j["arena"]["external_fragmentation"]["ratio"]["numerator"] == 1);
  CHECK(j["arena"]["external_fragmentation"]["ratio"]["denominator"] == 3);
  CHECK(j["arena"]["contiguous_accepted"] == false);
  CHECK(j["arena"]["block_pool"]["blocks_needed"] == 3);
  CHECK(j["arena"]["block_pool"]["accepted"] == true);
  CHECK(j["expected_tail_waste"]["bytes"]["numerator"] == kib(480));
  for (const auto& identity : j["identities"]) CHECK(identity["holds"] == true);
  CHECK(j["identities"].size() == 6);
}

TEST_CASE("kvrt ledger flags override the scenario", "[ledger][cli]") {
  const nlohmann::json priv = run_json("ledger --json --lengths 33,25,16 --reserved 64,48,32 --no-shared-prefix");
  CHECK(priv["unique_physical"]["unique_blocks"] == 6);
  CHECK(priv["unique_physical"]["capacity_bytes"] == priv["request_view"]["capacity_bytes"]);
  CHECK(priv["sharing_savings"]["avoided_bytes"] == 0);

  const nlohmann::json wide = run_json(
      "ledger --json --layout config/layouts/model-wide.toml --lengths 4096 --pool-blocks 256 "
      "--prompt-tokens 4096 --hit-tokens 3072 --generated-tokens 1024");
  CHECK(wide["row"]["block_bytes"] == mib(2));
  CHECK(wide["request_view"]["reference_blocks"] == 256);
  CHECK(wide["rectangular"]["slack_bytes"] == 0);  // --lengths without --reserved reserves exactly
  CHECK(wide["capacity_pressure"]["hit_blocks"] == 192);
  CHECK(wide["capacity_pressure"]["decode_bytes_ordinary"] == mib(127.875));
  CHECK(wide["capacity_pressure"]["decode_bytes_repair"] == mib(128));

  const KvrtRun human = run_kvrt("ledger");
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.find("9 MiB = 4.625 MiB logical references + 4.375 MiB rectangular slack") != std::string::npos);
  CHECK(human.out.find("F_ext = 1 - 2 MiB / 3 MiB = 1/3") != std::string::npos);
}

TEST_CASE("kvrt ledger rejects bad input with exit code 2", "[ledger][cli]") {
  CHECK(run_kvrt("ledger --lengths 33,0,16").exit_code == 2);
  CHECK(run_kvrt("ledger --lengths 33,x,16").exit_code == 2);
  CHECK(run_kvrt("ledger --lengths 33,,16").exit_code == 2);
  CHECK(run_kvrt("ledger --lengths 33,25,16 --reserved 64,24,32").exit_code == 2);
  CHECK(run_kvrt("ledger --pool-blocks 2").exit_code == 2);
  CHECK(run_kvrt("ledger --pool-blocks -3").exit_code == 2);
  CHECK(run_kvrt("ledger --scenario /nonexistent/ledger.toml").exit_code == 2);
  CHECK(run_kvrt("ledger --layout /nonexistent/layout.toml").exit_code == 2);
  CHECK(run_kvrt("ledger --hit-tokens 5").exit_code == 2);
  CHECK(run_kvrt("ledger --lengths 99999999999999999999").exit_code == 2);
}
