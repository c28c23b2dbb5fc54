// `kvrt replay radix` (docs/replay-format.md): the demo trace reproduces
// its expected output value for value, through the library under both
// profiles and through the kvrt binary; random traces built from the format's
// rules keep every state field reconciled; bad lines change nothing.
#include "tools/replay/radix_replay.hpp"

#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/support/kvrt_cli.hpp"
#include "tests/tools/replay_fixture.hpp"

using namespace kvrt;
using nlohmann::json;

namespace {

std::string read_file(const std::string& path) { return kvrt::test::read_text_file(path); }
std::vector<json> parse_lines(const std::string& text) { return kvrt::test::parse_json_lines(text); }

// Value-by-value comparison: key order does not matter, values do.
void require_same_lines(const std::vector<json>& got, const std::vector<json>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("line " << k << "\n got      " << got[k].dump() << "\n expected " << expected[k].dump());
    CHECK(got[k] == expected[k]);
  }
}

std::string replay_text(const std::string& trace, RadixReplayOptions options) {
  std::istringstream in(trace);
  std::ostringstream out;
  (void)run_radix_replay(in, out, options);
  return out.str();
}

std::string run_binary(const std::string& args, int& exit_code) {
  const kvrt::test::KvrtRun run = kvrt::test::run_kvrt(args);
  exit_code = run.exit_code;
  return run.out;
}

}  // namespace

TEST_CASE("the radix demo trace reproduces its expected output through the library", "[radix][replay]") {
  const std::string trace = read_file(kvrt::test::kReplayDataDir + "radix_demo.trace.jsonl");
  const std::vector<json> expected = parse_lines(read_file(kvrt::test::kReplayDataDir + "radix_demo.expected.jsonl"));
  for (RadixReplayProfile profile : {RadixReplayProfile::sglang, RadixReplayProfile::kvrt}) {
    INFO("profile " << (profile == RadixReplayProfile::sglang ? "sglang" : "kvrt"));
    const std::string out = replay_text(trace, RadixReplayOptions{profile, true});
    require_same_lines(parse_lines(out), expected);
    // Byte for byte too: same keys in the same order, compact separators.
    CHECK(out == read_file(kvrt::test::kReplayDataDir + "radix_demo.expected.jsonl"));
  }
  // Without --indices the lines are the same minus "indices".
  std::vector<json> no_indices = expected;
  for (json& line : no_indices) line.erase("indices");
  require_same_lines(parse_lines(replay_text(trace, RadixReplayOptions{RadixReplayProfile::sglang, false})),
                     no_indices);
}

TEST_CASE("kvrt replay radix reproduces the demo through the binary", "[radix][replay][cli]") {
  int code = -1;
  const std::string out = run_binary(
      "replay radix --profile sglang --indices '" + kvrt::test::kReplayDataDir + "radix_demo.trace.jsonl'", code);
  CHECK(code == 0);
  require_same_lines(parse_lines(out),
                     parse_lines(read_file(kvrt::test::kReplayDataDir + "radix_demo.expected.jsonl")));
  run_binary("replay radix --profile vllm -", code);
  CHECK(code == 2);
  run_binary("replay radix /nonexistent/trace.jsonl", code);
  CHECK(code == 2);
}

TEST_CASE("bad radix trace lines print a typed error and change nothing", "[radix][replay]") {
  const std::string trace =
      "{\"op\":\"insert\",\"tokens\":[1,2,3]}\n"
      "\n"
      "# a comment line is counted but not answered\n"
      "not json\n"
      "[1,2]\n"
      "{\"tokens\":[1]}\n"
      "{\"op\":\"fly\"}\n"
      "{\"op\":\"insert\"}\n"
      "{\"op\":\"insert\",\"tokens\":[1,\"x\"]}\n"
      "{\"op\":\"match\",\"tokens\":[1],\"extra_key\":5}\n"
      "{\"op\":\"evict\",\"n\":1.5}\n"
      "{\"op\":\"unlock\",\"handle\":\"nobody\"}\n"
      "{\"op\":\"lock\",\"tokens\":[1,2],\"handle\":\"A\"}\n"
      "{\"op\":\"lock\",\"tokens\":[1],\"handle\":\"A\"}\n"
      "{\"op\":\"config\",\"eviction_policy\":\"random\"}\n"
      "{\"op\":\"unlock\"}\n"
      "{\"op\":\"match\",\"tokens\":[1,2,3],\"indices\":true}\n";
  const std::vector<json> out = parse_lines(replay_text(trace, RadixReplayOptions{RadixReplayProfile::sglang, true}));
  REQUIRE(out.size() == 15);
  CHECK(out[0]["i"] == 0);
  const std::vector<std::pair<uint64_t, std::string>> errors{
      {3, "ParseError"},     {4, "WrongType"},    {5, "MissingField"},  {6, "UnknownOp"},
      {7, "MissingField"},   {8, "WrongType"},    {9, "WrongType"},     {10, "WrongType"},
      {11, "UnknownHandle"}, {13, "HandleInUse"}, {14, "InvalidValue"}, {15, "MissingField"}};
  size_t k = 1;
  for (const auto& [line, type] : errors) {
    INFO(out[k].dump());
    CHECK(out[k]["i"] == line);
    CHECK(out[k]["error"].get<std::string>().rfind(type + ": ", 0) == 0);
    CHECK_FALSE(out[k].contains("total"));
    ++k;
    if (line == 11) ++k;  // line 12 is the successful lock
  }
  CHECK(out[1]["op"].is_null());
  CHECK(out[4]["op"] == "fly");
  // After all the bad lines the tree is exactly what the good lines made.
  const json& last = out.back();
  CHECK(last["i"] == 16);
  CHECK(last["matched"] == 3);
  CHECK(last["indices"] == json::array({1, 2, 3}));
  CHECK(last["total"] == 3);
  CHECK(last["protected"] == 2);
  CHECK(last["nodes"] == 2);
}

TEST_CASE("profiles: kvrt counts hits, pages and rejects negative sizes, sglang does not", "[radix][replay]") {
  const std::string lfu =
      "{\"op\":\"config\",\"eviction_policy\":\"lfu\"}\n"
      "{\"op\":\"insert\",\"tokens\":[1]}\n"
      "{\"op\":\"insert\",\"tokens\":[2]}\n"
      "{\"op\":\"match\",\"tokens\":[1]}\n"
      "{\"op\":\"match\",\"tokens\":[1]}\n"
      "{\"op\":\"match\",\"tokens\":[2]}\n"
      "{\"op\":\"evict\",\"n\":1}\n"
      "{\"op\":\"match\",\"tokens\":[1]}\n";
  // SGLang: no hit counts, so LFU ranks by last access and evicts [1].
  CHECK(parse_lines(replay_text(lfu, {RadixReplayProfile::sglang, false})).back()["matched"] == 0);
  // kvrt: [1] has two hits, [2] one: [2] goes.
  CHECK(parse_lines(replay_text(lfu, {RadixReplayProfile::kvrt, false})).back()["matched"] == 1);

  const std::string paged =
      "{\"op\":\"config\",\"page_size\":2}\n"
      "{\"op\":\"insert\",\"tokens\":[1,2,3]}\n"
      "{\"op\":\"evict\",\"n\":-1}\n";
  const std::vector<json> sg = parse_lines(replay_text(paged, {RadixReplayProfile::sglang, false}));
  CHECK(sg[0]["error"].get<std::string>().rfind("InvalidValue", 0) == 0);
  CHECK(sg[2]["requested"] == -1);
  CHECK(sg[2]["evicted"] == 0);
  const std::vector<json> kv = parse_lines(replay_text(paged, {RadixReplayProfile::kvrt, false}));
  CHECK(kv[1]["inserted"] == 2);  // whole pages only
  CHECK(kv[1]["total"] == 2);
  CHECK(kv[2]["error"].get<std::string>().rfind("InvalidValue", 0) == 0);
}

TEST_CASE("random radix traces keep every state field reconciled", "[radix][replay][random]") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const RadixReplayProfile profile = seed % 2 ? RadixReplayProfile::sglang : RadixReplayProfile::kvrt;
    RadixReplay state(RadixReplayOptions{profile, true});
    json before{{"evictable", 0}, {"protected", 0}, {"total", 0}, {"nodes", 0}};
    std::vector<std::string> names;
    auto tokens = [&] {
      json t = json::array();
      for (size_t n = rng() % 10; n > 0; --n) t.push_back(rng() % 3);
      return t;
    };
    for (int step = 0; step < 300; ++step) {
      json line;
      const unsigned dice = rng() % 100;
      const char* policies[] = {"lru", "lfu", "fifo", "mru", "filo", "priority", "slru"};
      if (dice < 3)
        line = {{"op", "config"}, {"eviction_policy", policies[rng() % 7]}};
      else if (dice < 35)
        line = {{"op", "insert"}, {"tokens", tokens()}, {"priority", int(rng() % 5) - 2}};
      else if (dice < 55)
        line = {{"op", "match"}, {"tokens", tokens()}};
      else if (dice < 68)
        line = {{"op", "lock"}, {"tokens", tokens()}};
      else if (dice < 80)
        line = {{"op", "unlock"}, {"handle", names.empty() ? std::string("none") : names[rng() % names.size()]}};
      else if (dice < 90)
        line = {{"op", "evict"}, {"n", rng() % 8}};
      else if (dice < 95)
        line = {{"op", "trim"}, {"max_total", rng() % 20}};
      else if (dice < 97)
        line = {{"op", "reset"}};
      else
        line = {{"op", "match"}, {"tokens", "oops"}};
      if (rng() % 5 == 0 && line.contains("tokens") && line["tokens"].is_array()) line["extra_key"] = "lora-a";
      INFO("step " << step << " " << line.dump());

      replay::OpOutcome outcome = state.apply(line["op"].get<std::string>(), line);
      const Status valid = state.validate();  // locked paths are live, lock counts = handles through each node
      INFO((valid.ok() ? std::string("valid") : valid.error().describe()));
      REQUIRE(valid.ok());
      if (std::holds_alternative<replay::ReplayError>(outcome)) {
        // An error changes nothing: the next op starts from `before`.
        CHECK(state.tree().ledger().total_tokens == before["total"].get<uint64_t>());
        continue;
      }
      const json out = json::parse(std::get<replay::OutFields>(outcome).dump());
      const int64_t ev = out["evictable"], pr = out["protected"], total = out["total"], nodes = out["nodes"];
      CHECK(ev >= 0);
      CHECK(pr >= 0);
      CHECK(ev + pr == total);
      CHECK(nodes <= total);  // every edge holds at least one token
      CHECK((nodes == 0) == (total == 0));
      const std::string op = line["op"];
      const int64_t ev0 = before["evictable"], pr0 = before["protected"], total0 = before["total"];
      if (op == "insert") {
        CHECK(out["prefix_len"].get<int64_t>() + out["inserted"].get<int64_t>() ==
              static_cast<int64_t>(line["tokens"].size()));
        CHECK(ev == ev0 + out["inserted"].get<int64_t>());
        CHECK(pr == pr0);
      } else if (op == "match") {
        CHECK(total == total0);
        CHECK(out["indices"].size() == out["matched"].get<size_t>());
      } else if (op == "lock" || op == "unlock") {
        CHECK(total == total0);
        CHECK(ev == ev0 + out["delta"].get<int64_t>());
        if (op == "lock") {
          CHECK(out["delta"].get<int64_t>() <= 0);
          names.push_back(out["handle"]);
        } else {
          CHECK(out["delta"].get<int64_t>() >= 0);
          std::erase(names, out["handle"].get<std::string>());
        }
      } else if (op == "evict" || op == "trim") {
        CHECK(total == total0 - out["evicted"].get<int64_t>());
        CHECK(pr == pr0);  // locked paths are never evicted
        const int64_t requested = out["requested"];
        CHECK((out["evicted"].get<int64_t>() >= requested || ev == 0));
      } else {  // config, reset
        CHECK(total == 0);
        names.clear();
      }
      before = out;
    }
  }
}
