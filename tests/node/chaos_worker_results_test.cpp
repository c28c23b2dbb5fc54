// How an ended process's figures count in a chaos campaign
// (tools/chaos/chaos_worker_results.hpp), on figures made up to reach each
// verdict: the totals add up, and exactly the results that break the
// campaign's rules are violations.
#include "tools/chaos/chaos_worker_results.hpp"

#include <catch2/catch.hpp>

namespace kvrt::test {

TEST_CASE("chaos: a worker's summary adds up, and unexplained withdrawals or inexact rows are violations", "[chaos]") {
  chaos::ChaosReport report;
  std::vector<double> p99;
  nlohmann::json ok{{"requests", 10},      {"hit_tokens", 64},      {"prompt_tokens", 160},
                    {"round_trips", 40},   {"call_p99_us", 900.0},  {"call_max_us", 2500.0},
                    {"hits_withdrawn", 1}, {"receipts_revoked", 1}, {"reuse_mismatches", 0}};
  CHECK(chaos::add_worker_summary(report, p99, ok, "worker slot 0").empty());
  CHECK(report.requests == 10);
  CHECK(report.prompt_tokens == 160);
  CHECK(p99 == std::vector<double>{900.0});
  CHECK(report.worker_call_max_us == 2500.0);

  nlohmann::json withdrawn = ok;
  withdrawn["hits_withdrawn"] = 3;  // only 1 receipt revoked, and the worker ran to its end
  const std::vector<std::string> v = chaos::add_worker_summary(report, p99, withdrawn, "worker slot 1");
  REQUIRE(v.size() == 1);
  CHECK(v[0] == "worker slot 1: 3 hits withdrawn but only 1 receipts revoked");
  withdrawn["stopped_by"] = "node_lost";  // stopped early: its releases never came back
  CHECK(chaos::add_worker_summary(report, p99, withdrawn, "worker slot 1").empty());

  nlohmann::json inexact = ok;
  inexact["reuse_mismatches"] = 2;
  CHECK(chaos::add_worker_summary(report, p99, inexact, "worker slot 2") ==
        std::vector<std::string>{"worker slot 2: 2 reused rows not exact"});
  CHECK(report.reuse_mismatches == 2);
  CHECK(report.requests == 40);
}

TEST_CASE("chaos: an engine slot must finish, verify or privately serve every request of its share", "[chaos]") {
  chaos::ChaosReport report;
  EngineResult r;
  r.requests = r.requests_total = 12;
  r.requests_verified = 9;
  r.requests_served_privately = 3;
  CHECK(chaos::add_engine_result(report, r, "engine slot 3").empty());
  CHECK(report.engine.finished == 1);
  CHECK(report.requests == 12);
  r.requests_total = 13;
  r.requests_verified = 8;
  r.token_mismatches = 1;
  r.first_mismatch = "job 4 turn 0";
  const std::vector<std::string> v = chaos::add_engine_result(report, r, "engine slot 3");
  REQUIRE(v.size() == 3);
  CHECK(v[0] == "engine slot 3 finished 12 of its 13 requests");
  CHECK(v[1] == "engine slot 3: 1 token and 0 row mismatches: job 4 turn 0");
  CHECK(v[2] == "engine slot 3: 1 requests neither verified nor served privately");
}

TEST_CASE("chaos: a worker's exit must follow from the fault done to it", "[chaos]") {
  using chaos::FaultKind;
  using chaos::WorkerEnding;
  auto judge = [](std::optional<FaultKind> fault, int status, const std::string& output, bool summary = true,
                  bool died = false) {
    return chaos::judge_worker_exit(fault, status, output, summary, died, "worker slot 1");
  };
  // Killed or hung: SIGKILL's status, or a clean exit that beat the signal.
  CHECK(judge(FaultKind::worker_sigkill, 128 + 9, "").ending == WorkerEnding::expected);
  CHECK(judge(FaultKind::worker_hang, 0, "").ending == WorkerEnding::expected);
  const chaos::WorkerVerdict odd = judge(FaultKind::worker_sigkill, 3, "boom");
  CHECK(odd.ending == WorkerEnding::violation);
  CHECK(odd.violation == "worker slot 1 was killed but exited with status 3: boom");
  // A kill that found the worker already exited, unreaped: its own typed
  // ending stands (seen once in a 10-minute campaign: an engine slot that
  // could not reach a restarting node exited 2 just before its SIGKILL).
  CHECK(judge(FaultKind::worker_sigkill, 2, "node_unreachable: cannot reach the node").ending ==
        WorkerEnding::unreachable);
  CHECK(judge(FaultKind::worker_sigterm, 1, "node_lost", true, true).ending == WorkerEnding::node_lost);
  CHECK(judge(FaultKind::worker_sigkill, 1, "node_lost", true, false).ending == WorkerEnding::violation);
  // A transport fault ends typed, or not at all; an untyped failure is a violation.
  CHECK(judge(FaultKind::transport, 1, "error rpc_timeout").ending == WorkerEnding::transport_interrupted);
  CHECK(judge(FaultKind::transport, 2, "session_ended").ending == WorkerEnding::transport_interrupted);
  CHECK(judge(FaultKind::transport, 1, "node_lost", true, true).ending == WorkerEnding::node_lost);
  CHECK(judge(FaultKind::transport, 1, "something else").ending == WorkerEnding::violation);
  // Its node killed before it connected (seen once in a 10-minute campaign:
  // a fresh worker of a node that lived 90 ms): the same typed ending as a
  // worker without a fault.
  CHECK(judge(FaultKind::transport, 2, "node_unreachable: cannot reach the node at 127.0.0.1:42667").ending ==
        WorkerEnding::unreachable);
  CHECK(judge(FaultKind::transport, 2, "something else").ending == WorkerEnding::violation);
  // Status 0 without the summary line completes, and says so.
  const chaos::WorkerVerdict silent = judge(std::nullopt, 0, "", false);
  CHECK(silent.ending == WorkerEnding::completed);
  CHECK(silent.violation == "worker slot 1 exited 0 without its summary");
  // No fault of its own: only a dead node explains status 1, an unreachable one status 2.
  CHECK(judge(std::nullopt, 1, "node_lost", true, true).ending == WorkerEnding::node_lost);
  CHECK(judge(std::nullopt, 1, "node_lost", true, false).ending == WorkerEnding::violation);
  CHECK(judge(std::nullopt, 2, "node_unreachable").ending == WorkerEnding::unreachable);
  CHECK(judge(FaultKind::worker_sigstop, 1, "session_ended").ending == WorkerEnding::expected);
  CHECK(judge(FaultKind::worker_sigterm, 128 + 15, "").ending == WorkerEnding::expected);
  CHECK(judge(FaultKind::worker_sigterm, 1, "").ending == WorkerEnding::violation);
}

TEST_CASE("chaos: an engine's exit must follow from the fault done to it", "[chaos]") {
  using chaos::FaultKind;
  using chaos::WorkerEnding;
  auto judge = [](std::optional<FaultKind> fault, int status, const std::string& output, bool died = false) {
    return chaos::judge_engine_exit(fault, status, output, died, "engine slot 0");
  };
  CHECK(judge(std::nullopt, 0, "").ending == WorkerEnding::completed);
  CHECK(judge(FaultKind::worker_sigkill, 128 + 9, "").ending == WorkerEnding::expected);
  CHECK(judge(FaultKind::worker_sigterm, 128 + 15, "").ending == WorkerEnding::expected);
  CHECK(judge(FaultKind::worker_hang, 0, "").ending == WorkerEnding::expected);
  // A kill that found it already exited: its own typed ending stands.
  CHECK(judge(FaultKind::worker_sigkill, 2, "node_unreachable: cannot reach the node").ending ==
        WorkerEnding::unreachable);
  const chaos::WorkerVerdict odd = judge(FaultKind::worker_sigkill, 3, "boom");
  CHECK(odd.ending == WorkerEnding::violation);
  CHECK(odd.violation == "engine slot 0 was killed but exited with status 3: boom");
  CHECK(judge(std::nullopt, 2, "kvrt run-worker: node_unreachable: no node serves node.json").ending ==
        WorkerEnding::unreachable);
  // Its node killed 14 ms after the engine connected (seen in the CI
  // campaign): lost while binding, nothing admitted, so counted like an
  // engine that could not connect; lost later it rides out, so an exit on
  // node_lost then is a violation, as is one without a dead node.
  const std::string binding =
      "kvrt run-worker: node_lost: before admitting any request: the node at 127.0.0.1:45877 (pid 21159) is gone";
  CHECK(judge(std::nullopt, 2, binding, true).ending == WorkerEnding::unreachable);
  CHECK(judge(std::nullopt, 2, binding, false).ending == WorkerEnding::violation);
  const chaos::WorkerVerdict midway =
      judge(std::nullopt, 2, "kvrt run-worker: node_lost: the node at 127.0.0.1:45877 (pid 21159) is gone", true);
  CHECK(midway.ending == WorkerEnding::violation);
  CHECK(midway.violation.rfind("engine slot 0 exited with status 2 after its node died: ", 0) == 0);
  CHECK(judge(std::nullopt, 1, "").ending == WorkerEnding::violation);
}

}  // namespace kvrt::test
