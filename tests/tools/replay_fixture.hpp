#pragma once
// Shared helpers of the `kvrt replay` suites: the demo traces of
// docs/replay-format.md (tests/data/replay/, with their expected output), and
// JSON-lines reading for value-by-value comparison (key order does not matter).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace kvrt::test {

inline const std::string kReplayDataDir = std::string(KVRT_SOURCE_DIR) + "/tests/data/replay/";

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<nlohmann::json> parse_json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace kvrt::test
