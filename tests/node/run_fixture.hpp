#pragma once
// What the `kvrt run` process tests share: their data files, the run's JSON
// summary line, and a run of the real binary that must succeed.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine_worker.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {

inline std::string data(const std::string& name) { return std::string(KVRT_SOURCE_DIR) + "/tests/data/run/" + name; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The JSON line of `kvrt run --json` in a log that may hold other lines.
inline nlohmann::json json_line(const std::string& log) {
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line))
    if (!line.empty() && line.front() == '{') return nlohmann::json::parse(line);
  FAIL("no JSON line in:\n" << log);
  return {};
}

// Runs `kvrt run --json --quiet` with `args`, requires exit 0 and returns the
// summary object.
inline nlohmann::json run_to_json(const std::vector<std::string>& args, const ScratchDir& dir) {
  std::vector<std::string> all{"run"};
  all.insert(all.end(), args.begin(), args.end());
  all.insert(all.end(), {"--json", "--quiet"});
  KvrtProcess run(all, dir.file("run.log"));
  const int code = run.wait(std::chrono::seconds(240));
  const std::string log = run.output();
  INFO(log);
  REQUIRE(code == 0);
  return json_line(log);
}

// The `workers` workers' results a run wrote in its report directory `out`,
// each read back and free of operation errors.
inline std::vector<EngineResult> worker_results(const std::string& out, int workers) {
  std::vector<EngineResult> results;
  for (int i = 0; i < workers; ++i) {
    Result<EngineResult> r =
        engine_result_from_json(read_file(out + "/node/worker-" + std::to_string(i) + ".json"), "worker");
    REQUIRE(r.ok());
    CHECK(r->operation_errors == 0);
    results.push_back(std::move(r).value());
  }
  return results;
}

}  // namespace kvrt::test
