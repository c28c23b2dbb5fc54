// `kvrt replay prefix` (docs/replay-format.md): the demo trace (copied
// to tests/data/replay/) reproduces its expected output byte for byte through
// the library and the kvrt binary under --profile vllm; random traces built
// from the format's rules give, line for line, the output of an independent
// literal model of vLLM v1's block pool (tests/prefix_vllm_model.hpp), with
// every state field reconciled and validate() after every op under both
// profiles; bad lines change nothing.
#include "tools/replay/prefix_replay.hpp"

#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "tests/support/kvrt_cli.hpp"
#include "tests/tools/prefix_vllm_model.hpp"
#include "tests/tools/replay_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;
using nlohmann::json;

namespace {

std::string read_file(const std::string& path) { return kvrt::test::read_text_file(path); }
std::vector<json> parse_lines(const std::string& text) { return kvrt::test::parse_json_lines(text); }

std::string replay_text(const std::string& trace, PrefixReplayOptions options) {
  std::istringstream in(trace);
  std::ostringstream out;
  (void)run_prefix_replay(in, out, options);
  return out.str();
}

std::string run_binary(const std::string& args, int& exit_code) {
  const kvrt::test::KvrtRun run = kvrt::test::run_kvrt(args);
  exit_code = run.exit_code;
  return run.out;
}

const PrefixReplayOptions kVllm{PrefixReplayProfile::vllm, true};
const PrefixReplayOptions kKvrt{PrefixReplayProfile::kvrt, true};

// The state fields FORMAT.md prints after every op.
json state_of(const json& line) {
  return json{{"free", line["free"]},
              {"cached", line["cached"]},
              {"evictable", line["evictable"]},
              {"hash_keys", line["hash_keys"]},
              {"running", line["running"]}};
}

}  // namespace

TEST_CASE("the prefix demo trace reproduces its expected output byte for byte under --profile vllm",
          "[prefix][replay]") {
  const std::string trace = read_file(kvrt::test::kReplayDataDir + "prefix_demo.trace.jsonl");
  const std::string expected = read_file(kvrt::test::kReplayDataDir + "prefix_demo.expected.jsonl");
  const std::string out = replay_text(trace, kVllm);
  CHECK(out == expected);
  const std::vector<json> got = parse_lines(out), want = parse_lines(expected);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("line " << k << "\n got      " << got[k].dump() << "\n expected " << want[k].dump());
    CHECK(got[k] == want[k]);
  }
  // The literal vLLM model agrees with the expected file too (the model is
  // the reference of the random traces below).
  VllmPrefixModel model;
  std::istringstream lines(trace);
  size_t k = 0;
  for (std::string line; std::getline(lines, line); ++k) {
    json m = model.apply(json::parse(line));
    json w = want[k];
    w.erase("i");
    w.erase("op");
    CHECK(json(m) == w);
  }
}

TEST_CASE("the kvrt binary replays the demo, bad command lines exit 2", "[prefix][replay]") {
  int code = -1;
  const std::string path = kvrt::test::kReplayDataDir + "prefix_demo.trace.jsonl";
  CHECK(run_binary("replay prefix --profile vllm '" + path + "'", code) ==
        read_file(kvrt::test::kReplayDataDir + "prefix_demo.expected.jsonl"));
  CHECK(code == 0);
  const std::vector<json> no_ids =
      parse_lines(run_binary("replay prefix --profile vllm --no-ids - < '" + path + "'", code));
  CHECK(code == 0);
  REQUIRE(no_ids.size() == 17);
  for (const json& line : no_ids) CHECK_FALSE(line.contains("block_ids"));
  CHECK(no_ids[14]["evicted"] == 4);
  (void)run_binary("replay prefix --profile sglang '" + path + "'", code);
  CHECK(code == 2);
  (void)run_binary("replay prefix /nonexistent/trace.jsonl", code);
  CHECK(code == 2);
}

TEST_CASE("kvrt profile on the demo: same hits where nothing was evicted, no duplicate blocks cached",
          "[prefix][replay]") {
  const std::string trace = read_file(kvrt::test::kReplayDataDir + "prefix_demo.trace.jsonl");
  const std::vector<json> kv = parse_lines(replay_text(trace, kKvrt));
  const std::vector<json> vl = parse_lines(read_file(kvrt::test::kReplayDataDir + "prefix_demo.expected.jsonl"));
  REQUIRE(kv.size() == vl.size());
  for (size_t k = 0; k < kv.size(); ++k) {
    INFO(kv[k].dump());
    CHECK(kv[k]["cached"] == kv[k]["hash_keys"]);
    CHECK(kv[k]["free"] == vl[k]["free"]);  // the same blocks are in use
    CHECK(kv[k]["running"] == vl[k]["running"]);
  }
  // Lines 1-13 evict nothing under either profile, so the hits agree.
  for (size_t k = 1; k <= 13; ++k)
    if (vl[k].contains("hit_tokens")) CHECK(kv[k]["hit_tokens"] == vl[k]["hit_tokens"]);
  // kvrt takes truly free blocks first, so the 100-token request f evicts one
  // cached block fewer (the duplicate of block 1 was never tagged) ...
  CHECK(vl[14]["evicted"] == 4);
  CHECK(kv[14]["evicted"] == 3);
}

TEST_CASE("bad prefix lines print an error and change nothing", "[prefix][replay]") {
  const std::string trace =
      "{\"op\":\"request\",\"id\":\"a\",\"tokens\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}\n"
      "not json\n"
      "[1]\n"
      "{\"id\":\"a\"}\n"
      "{\"op\":\"fly\"}\n"
      "{\"op\":\"request\",\"tokens\":[1]}\n"
      "{\"op\":\"request\",\"id\":\"b\",\"tokens\":[1,\"x\"]}\n"
      "{\"op\":\"request\",\"id\":\"b\",\"tokens\":[]}\n"
      "{\"op\":\"request\",\"id\":\"a\",\"tokens\":[1]}\n"
      "{\"op\":\"request\",\"id\":\"b\",\"tokens\":[1],\"salt\":7}\n"
      "{\"op\":\"decode\",\"id\":\"a\"}\n"
      "{\"op\":\"free\",\"id\":3}\n"
      "{\"op\":\"probe\",\"tokens\":[]}\n"
      "{\"op\":\"config\",\"block_size\":0}\n"
      "{\"op\":\"config\",\"num_blocks\":1}\n"
      "{\"op\":\"config\",\"max_model_len\":0}\n"
      "{\"op\":\"decode\",\"id\":\"zz\",\"tokens\":[1]}\n"
      "{\"op\":\"free\",\"id\":\"zz\"}\n"
      "{\"op\":\"probe\",\"tokens\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}\n";
  for (const PrefixReplayOptions& options : {kVllm, kKvrt}) {
    const std::vector<json> out = parse_lines(replay_text(trace, options));
    REQUIRE(out.size() == 19);
    const json after_first = state_of(out[0]);
    const std::vector<std::pair<size_t, std::string>> errors{
        {1, "ParseError"}, {2, "WrongType"},     {3, "MissingField"},  {4, "UnknownOp"},     {5, "MissingField"},
        {6, "WrongType"},  {7, "InvalidValue"},  {8, "InvalidValue"},  {9, "WrongType"},     {10, "MissingField"},
        {11, "WrongType"}, {12, "InvalidValue"}, {13, "InvalidValue"}, {14, "InvalidValue"}, {15, "InvalidValue"}};
    for (const auto& [k, type] : errors) {
      INFO(out[k].dump());
      CHECK(out[k]["i"] == k);
      CHECK(out[k]["error"].get<std::string>().rfind(type + ": ", 0) == 0);
      CHECK_FALSE(out[k].contains("free"));
    }
    CHECK(out[16]["skipped"] == true);
    CHECK(state_of(out[16]) == after_first);
    CHECK(out[17]["skipped"] == true);
    CHECK(out[18]["hit_tokens"] == 16);
    CHECK(state_of(out[18]) == after_first);
  }
}

TEST_CASE("max_model_len: longer prompts are not admitted, decode stops at the cap", "[prefix][replay]") {
  const std::string trace =
      "{\"op\":\"config\",\"block_size\":4,\"num_blocks\":16,\"max_model_len\":10}\n"
      "{\"op\":\"request\",\"id\":\"a\",\"tokens\":[1,2,3,4,5,6,7,8,9,10,11]}\n"
      "{\"op\":\"request\",\"id\":\"b\",\"tokens\":[1,2,3,4,5,6,7]}\n"
      "{\"op\":\"decode\",\"id\":\"b\",\"tokens\":[8,9,10,11,12]}\n"
      "{\"op\":\"free\",\"id\":\"b\"}\n";
  const std::vector<json> out = parse_lines(replay_text(trace, kVllm));
  CHECK(out[1]["admitted"] == false);
  CHECK(out[2]["admitted"] == true);
  CHECK(out[3]["decoded"] == 3);
  CHECK(out[3]["block_ids"] == json::array({1, 2, 3}));
  CHECK(out[4]["num_tokens"] == 10);
}

TEST_CASE("a decode step without a block preempts the request and frees its blocks tail first", "[prefix][replay]") {
  const std::string trace =
      "{\"op\":\"config\",\"block_size\":4,\"num_blocks\":4}\n"
      "{\"op\":\"request\",\"id\":\"a\",\"tokens\":[1,2,3,4,5]}\n"
      "{\"op\":\"request\",\"id\":\"b\",\"tokens\":[9,9,9]}\n"
      "{\"op\":\"decode\",\"id\":\"a\",\"tokens\":[6,7,8,9,10]}\n"
      "{\"op\":\"probe\",\"tokens\":[1,2,3,4,5,6,7,8,0]}\n"
      "{\"op\":\"request\",\"id\":\"c\",\"tokens\":[1,2,3,4,5,6,7,8]}\n";
  for (const PrefixReplayOptions& options : {kVllm, kKvrt}) {
    const std::vector<json> out = parse_lines(replay_text(trace, options));
    CHECK(out[3]["decoded"] == 3);
    CHECK(out[3]["preempted"] == true);
    CHECK_FALSE(out[3].contains("block_ids"));
    CHECK(out[3]["running"] == 1);
    CHECK(out[3]["free"] == 2);
    CHECK(out[3]["cached"] == 2);      // [1,2,3,4] and [5,6,7,8] stay cached
    CHECK(out[4]["hit_tokens"] == 8);  // preempted blocks still hit
    CHECK(out[5]["hit_tokens"] == 4);  // the logits cap: at most floor(7 / 4) blocks
    CHECK(out[5]["admitted"] == true);
    // It revives block 1 and needs one more: the only free block is a's
    // second block, whose hash goes (released tail first, it is the older).
    CHECK(out[5]["evicted"] == 1);
    CHECK(out[5]["block_ids"] == json::array({1, 2}));
  }
}

TEST_CASE("random prefix traces: --profile vllm equals the literal vLLM model, both profiles reconcile",
          "[prefix][replay][random]") {
  uint64_t compared = 0, admitted = 0, preempted = 0, evicted = 0, hits = 0, resets = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    PrefixReplay vllm(kVllm), kvrt(kKvrt);
    VllmPrefixModel model;
    const int64_t P = 1 + static_cast<int64_t>(rng() % 5);
    std::vector<std::vector<int64_t>> bases(3);
    for (auto& b : bases)
      for (int64_t n = 0; n < 8 * P; ++n) b.push_back(static_cast<int64_t>(rng() % 3) * 1000003);
    const char* ids[] = {"a", "b", "c", "d", "e", "f"};
    auto prompt = [&] {
      const auto& b = bases[rng() % bases.size()];
      json t = json::array();
      const size_t n = 1 + rng() % b.size();
      for (size_t k = 0; k < n; ++k) t.push_back(rng() % 11 == 0 ? int64_t(rng() % 3) : b[k]);
      return t;
    };
    for (int step = 0; step < 250; ++step) {
      json line;
      const unsigned dice = rng() % 100;
      if (step == 0 || dice < 2) {
        line = {{"op", "config"}, {"block_size", P}, {"num_blocks", 3 + rng() % 14}};
        if (rng() % 3 == 0) line["max_model_len"] = 1 + rng() % (10 * P);
      } else if (dice < 42) {
        line = {{"op", "request"}, {"id", ids[rng() % 6]}, {"tokens", prompt()}};
        if (rng() % 5 == 0) line["salt"] = rng() % 2 ? "s1" : "s2";
        if (rng() % 6 == 0) line["lora"] = "L";
      } else if (dice < 62) {
        json t = json::array();
        for (size_t n = rng() % (3 * P); n > 0; --n) t.push_back(rng() % 3);
        line = {{"op", "decode"}, {"id", ids[rng() % 6]}, {"tokens", t}};
      } else if (dice < 80) {
        line = {{"op", "free"}, {"id", ids[rng() % 6]}};
      } else if (dice < 96) {
        line = {{"op", "probe"}, {"tokens", prompt()}};
        if (rng() % 5 == 0) line["salt"] = "s1";
      } else {
        line = {{"op", "reset"}};
      }
      // A request for a running id is an error line (the two profiles may
      // run different sets: admission depends on which blocks still hit).
      const std::string op = line["op"].get<std::string>();
      const bool bad = op == "request" && model.running(line["id"].get<std::string>());
      const bool bad_kvrt = op == "request" && kvrt.running(line["id"].get<std::string>());
      const replay::OpOutcome got = vllm.apply(op, line);
      const replay::OpOutcome got_kvrt = kvrt.apply(op, line);
      CHECK(std::holds_alternative<replay::ReplayError>(got_kvrt) == bad_kvrt);
      if (!bad_kvrt) {
        const json kv = std::get<replay::OutFields>(got_kvrt);
        CHECK(kv["cached"] == kv["hash_keys"]);  // kvrt never tags a duplicate
        CHECK(kv["evictable"].get<uint64_t>() <= kv["cached"].get<uint64_t>());
        CHECK(kv["evictable"].get<uint64_t>() <= kv["free"].get<uint64_t>());
        CHECK(kv["free"].get<uint64_t>() <= kvrt.usable_blocks());
      }
      if (bad) {
        CHECK(std::holds_alternative<replay::ReplayError>(got));
      } else {
        REQUIRE(std::holds_alternative<replay::OutFields>(got));
        const json want = model.apply(line);
        const json have = std::get<replay::OutFields>(got);
        INFO("step " << step << " line " << line.dump() << "\n got  " << have.dump() << "\n want " << want.dump());
        REQUIRE(have == want);
        ++compared;
        if (have.contains("admitted") && have["admitted"] == true) ++admitted;
        if (have.contains("preempted") && have["preempted"] == true) ++preempted;
        if (have.contains("evicted")) evicted += have["evicted"].get<uint64_t>();
        if (have.contains("hit_tokens")) hits += have["hit_tokens"].get<uint64_t>() > 0;
        if (have.contains("ok") && have["ok"] == true) ++resets;
        CHECK(have["evictable"].get<uint64_t>() <= have["cached"].get<uint64_t>());
        CHECK(have["evictable"].get<uint64_t>() <= have["free"].get<uint64_t>());
        CHECK(have["hash_keys"].get<uint64_t>() <= have["cached"].get<uint64_t>());
        CHECK(have["free"].get<uint64_t>() <= vllm.usable_blocks());
      }
      const Status v1 = vllm.validate(), v2 = kvrt.validate();
      INFO((v1.ok() ? std::string() : v1.error().describe()) << (v2.ok() ? std::string() : v2.error().describe()));
      REQUIRE(v1.ok());
      REQUIRE(v2.ok());
    }
  }
  // The traces reached every rule.
  CHECK(compared > 10000);
  CHECK(admitted > 1000);
  CHECK(preempted > 50);
  CHECK(evicted > 500);
  CHECK(hits > 1000);
  CHECK(resets > 20);
}
