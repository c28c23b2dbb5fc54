// `kvrt run`: the run config, the node config it derives, the
// worker result exchange, and short end-to-end runs of the real binary: a
// node and worker processes serving every request shape with the reference
// model, whose verdict must be exact with nothing leaked after shutdown, and
// bad files that must start nothing. Runs over virtual reservations are in
// run_virtual_test.cpp.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_worker.hpp"
#include "gpu/cuda_probe.hpp"
#include "node/node_config.hpp"
#include "services/identity/layout_loader.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/run_fixture.hpp"
#include "tools/run/run_config.hpp"
#include "tools/workload/workload.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// The node's own funnel (the node view) agrees with the engines' funnel: an
// engine admits a request with a hit exactly when the node leased the
// candidate to it, and every attempt an engine settles began with a lookup
// the node answered (retried lookups make the node count more).
void check_node_funnel_agrees(const nlohmann::json& s) {
  const nlohmann::json& funnel = s.at("funnel");
  uint64_t executed = 0, requests = 0;
  for (const auto& stage : funnel.at("stages")) {
    if (stage.at("name") == "executed") executed = stage.at("count").get<uint64_t>();
    if (stage.at("name") == "requests") requests = stage.at("count").get<uint64_t>();
  }
  const nlohmann::json& node = funnel.at("node_view");
  CHECK(executed > 0);
  CHECK(node.at("leased").get<uint64_t>() == executed);
  CHECK(node.at("requests").get<uint64_t>() >= requests);
  CHECK(node.at("candidates").get<uint64_t>() >= node.at("leased").get<uint64_t>());
}

// `[run] workers = 1` and the lines `run`, written into `dir` and loaded.
Result<RunConfig> load_run_lines(const test::ScratchDir& dir, const std::string& run) {
  const std::string path = dir.file("run.toml");
  std::ofstream(path) << "[run]\nworkers = 1\n" << run;
  return load_run_config(path);
}

}  // namespace

TEST_CASE("run config: defaults, paths relative to the file, and the derived node config", "[run]") {
  Result<RunConfig> c = load_run_config(data("run-test.toml"));
  REQUIRE(c.ok());
  CHECK(c->workers == 2);
  CHECK(c->in_flight == 4);
  CHECK(c->model.seed == 3);
  CHECK(std::filesystem::exists(c->workload_path));
  CHECK(std::filesystem::exists(c->layout_path));
  Result<workload::Workload> w = workload::load_workload(c->workload_path);
  REQUIRE(w.ok());

  // The node config kvrt run writes must load as a node config: one
  // namespace per tenant, one principal per worker allowed every tenant.
  Result<NodeConfig> node = parse_node_config(node_config_for_run(*c, *w, c->prefix_index), "derived");
  REQUIRE(node.ok());
  CHECK(c->prefix_index == PrefixIndexKind::hash_chain);
  CHECK(node->prefix_index == PrefixIndexKind::hash_chain);
  CHECK(node->scheduler == c->node_scheduler);  // kvrt run's node shares the cores: sharing by default
  CHECK(node->scheduler == NodeScheduler::sharing);
  Result<NodeConfig> radix = parse_node_config(node_config_for_run(*c, *w, PrefixIndexKind::radix), "derived");
  REQUIRE(radix.ok());
  CHECK(radix->prefix_index == PrefixIndexKind::radix);
  CHECK(radix->radix_budget_blocks == 256);  // half the pool by default
  CHECK(node->layout_path == c->layout_path);
  CHECK(node->blocks_per_group == 512);
  REQUIRE(node->authorization.namespaces.size() == w->tenants.size());
  REQUIRE(node->authorization.principals.size() == 2);
  for (const auto& p : node->authorization.principals) {
    std::set<std::string> allowed(p.namespaces.begin(), p.namespaces.end());
    for (const workload::TenantSpec& t : w->tenants) CHECK(allowed.contains(t.namespace_name));
  }
}

TEST_CASE("run config: an unknown key names the file, line and key", "[run]") {
  Result<RunConfig> c = load_run_config(data("bad-run-key.toml"));
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code == ErrorCode::config_field);
  CHECK(c.error().describe().find("bad-run-key.toml") != std::string::npos);
  CHECK(c.error().describe().find(":3") != std::string::npos);
  CHECK(c.error().describe().find("worker_count") != std::string::npos);
  CHECK_FALSE(load_run_config(data("no-such-file.toml")).ok());
}

TEST_CASE("run: a worker's result survives the JSON exchange field for field", "[run]") {
  const uint64_t seed = 8128;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    EngineResult r;
    r.worker = "worker-" + std::to_string(rng() % 8);
    r.requests = rng() % 1000;
    r.requests_total = rng() % 1000;
    r.prompt_tokens = rng();
    r.decode_tokens = rng() % 99999;
    r.prefill_rows_computed = rng() % 123456;
    r.prefill_rows_reused = rng() % 123456;
    r.decode_rows_computed = rng() % 5000;
    r.decode_kv_bytes_read = rng();
    r.forked_requests = rng() % 7;
    r.copy_on_write_rows = rng() % 70;
    r.requests_verified = rng() % 1000;
    r.token_mismatches = rng() % 3;
    r.rows_checked = rng() % 100000;
    r.reused_rows_checked = rng() % 100000;
    r.row_mismatches = rng() % 2;
    r.reused_row_mismatches = rng() % 2;
    r.first_mismatch = round % 2 ? "row 7 \"differs\"\n" : "";
    r.out_of_capacity_retries = rng() % 9;
    r.operation_errors = rng() % 4;
    r.first_error = round % 3 ? "" : "stale_generation: x [y]";
    for (auto& s : r.funnel.stage) s = rng() % 500;
    for (auto& b : r.rejections) b = rng() % 50;
    for (int i = 0; i < round; ++i) {
      r.allocator_us.push_back(static_cast<double>(rng() % 100000) / 7.0);
      r.prefix_us.push_back(static_cast<double>(rng() % 100000) / 3.0);
    }
    r.authorize_us = {123.5};
    r.executor_us = {7.25, 99.0};
    r.node_shared_ops = rng() % 400;
    r.node_shared_chunk_attention = rng() % 100;
    r.node_shared_max_levels = rng() % 4;
    r.node_shared_rows_read = rng() % 100000;
    r.staged_rows_loaded = rng() % 100000;
    r.staged_rows_stored = rng() % 100000;
    r.wall_s = 1.25 * round;
    Result<EngineResult> back = engine_result_from_json(engine_result_to_json(r), "round-trip");
    REQUIRE(back.ok());
    CHECK(engine_result_to_json(*back) == engine_result_to_json(r));
    CHECK(back->funnel == r.funnel);
    CHECK(back->allocator_us == r.allocator_us);
  }
  // A truncated or mistyped result is a typed error naming the field.
  CHECK(engine_result_from_json("{\"worker\": 1", "cut").error().code == ErrorCode::config_parse);
  nlohmann::json j = nlohmann::json::parse(engine_result_to_json(EngineResult{}));
  j["requests"] = "many";
  const Result<EngineResult> mistyped = engine_result_from_json(j.dump(), "mistyped");
  REQUIRE_FALSE(mistyped.ok());
  CHECK(mistyped.error().field == "requests");
}

TEST_CASE("kvrt run: every request shape served exactly by a node and two worker processes", "[run][process]") {
  test::ScratchDir dir("run");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-test.toml"), "--out", out}, dir);

  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["workers"] == 2);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  CHECK(s["tokens_requested"].get<uint64_t>() == w->requested_tokens());
  // Shared system prompts, earlier turns, few-shot prefixes and the document
  // are found again: some prompt rows are reused, and reuse plus computation
  // covers every prompt row.
  CHECK(s["prefill_rows_reused"].get<uint64_t>() > 0);
  // Every prompt row is computed, reused from the index, or held by a fork
  // branch from its parent.
  CHECK(s["prefill_rows_forked"].get<uint64_t>() > 0);
  CHECK(s["prefill_rows_computed"].get<uint64_t>() + s["prefill_rows_reused"].get<uint64_t>() +
            s["prefill_rows_forked"].get<uint64_t>() ==
        s["prompt_tokens"].get<uint64_t>());
  CHECK(s["requests_verified"].get<uint64_t>() == w->request_count());
  // Every cached row was compared; the questions over the document and the
  // fork branches decoded with shared-prefix execution, which read the shared
  // rows once per batch instead of once per request (0x0BC).
  CHECK(s["row_mismatches"] == 0);
  CHECK(s["rows_checked"].get<uint64_t>() >= s["prefill_rows_reused"].get<uint64_t>());
  CHECK(s["bounded_rows_checked"].get<uint64_t>() > 0);
  CHECK(s["bounded_row_max_difference"].get<double>() <= 1.0 / 512.0);
  CHECK(s["shared_prefix_rows_read_once"].get<uint64_t>() > 0);
  CHECK(s["shared_prefix_rows_per_request"].get<uint64_t>() >= 2 * s["shared_prefix_rows_read_once"].get<uint64_t>());
  CHECK(s["pool_utilisation"].get<double>() > 0.0);
  CHECK(s["pool_utilisation"].get<double>() <= 1.0);
  check_node_funnel_agrees(s);

  for (const char* f : {"report.md", "report.json", "utilisation.svg", "funnel.svg", "latency.svg"})
    CHECK(std::filesystem::exists(out + "/" + f));
  const nlohmann::json report = nlohmann::json::parse(read_file(out + "/report.json"));
  CHECK(report["exact"] == true);
  // The node shut down cleanly: its descriptor is gone with its segments.
  CHECK_FALSE(std::filesystem::exists(out + "/node/node.json"));
}

TEST_CASE("kvrt run: a bad workload file names file, line and field, and starts nothing", "[run][process]") {
  test::ScratchDir dir("run-bad");
  const std::string out = dir.file("report");
  test::KvrtProcess run({"run", "--config", data("bad-workload-run.toml"), "--out", out, "--quiet"},
                        dir.file("run.log"));
  REQUIRE(run.wait(std::chrono::seconds(60)) == 2);
  const std::string log = run.output();
  INFO(log);
  CHECK(log.find("bad-workload.toml") != std::string::npos);
  CHECK(log.find("user_tokens") != std::string::npos);
  CHECK(log.find(":14") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out + "/node"));
  CHECK_FALSE(std::filesystem::exists(out + "/report.md"));
}

TEST_CASE("kvrt run: under pool pressure refused allocations are retried and the run stays exact", "[run][process]") {
  // 16 blocks per group for two workers with four requests in flight each:
  // admissions and appends are refused for capacity and retried once other
  // requests release (cached blocks are evicted on demand). Nothing is lost.
  test::ScratchDir dir("run-pressure");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-pressure.toml"), "--out", out}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  uint64_t retries = 0;
  for (const EngineResult& r : worker_results(out, 2)) {
    retries += r.out_of_capacity_retries;
  }
  CHECK(retries > 0);
}

TEST_CASE("kvrt run: chat turns resume their history from the session tier and stay exact", "[run][process][tier]") {
  // A small pool evicts the prefix cache between turns: each later turn
  // loads the rows its hit misses from the node's session tier ([run]
  // session_tier), and the no-reuse replay checks every loaded row.
  test::ScratchDir dir("run-session-tier");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-session-tier.toml"), "--out", out}, dir);
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  uint64_t saves = 0, resumed = 0, loaded = 0, refused = 0, verified = 0, prompt = 0, computed = 0, reused = 0;
  for (const EngineResult& r : worker_results(out, 2)) {
    CHECK(r.row_mismatches == 0);
    saves += r.tier_saves;
    resumed += r.tier_turns_resumed;
    loaded += r.tier_rows_loaded;
    refused += r.tier_resume_refusals;
    verified += r.requests_verified;
    prompt += r.prompt_tokens;
    computed += r.prefill_rows_computed;
    reused += r.prefill_rows_reused;
  }
  // 8 conversations of 4 turns: every turn but the last saves.
  CHECK(saves == 8 * 3);
  CHECK(resumed > 0);
  CHECK(loaded > 0);
  CHECK(refused == 0);
  CHECK(verified == 32);
  // Every prompt row was computed, reused from the index or loaded from the tier.
  CHECK(computed + reused + loaded == prompt);
  const nlohmann::json report = nlohmann::json::parse(read_file(out + "/report.json"));
  CHECK(report["session_tier"]["turns_resumed"].get<uint64_t>() == resumed);
  CHECK(report["session_tier"]["rows_loaded"].get<uint64_t>() == loaded);
}

TEST_CASE("kvrt run: templated prompts reuse declared modules through the node and stay exact",
          "[run][process][prompt]") {
  // 48 prompts over one schema: a system module, one of 2 toolsets and one
  // of 4 documents, with free text in the gaps (config/workloads/templated.toml).
  // A module is computed alone when first needed and reused by the rest;
  // the last 12 prompts are written against generation 2, which moves the
  // document, so their first assemblies find generation 1's modules
  // (incompatible misses) and replace them. The replay recomputes each whole
  // prompt under the same contract and checks every reused module row bitwise.
  test::ScratchDir dir("run-templated");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-templated.toml"), "--out", out}, dir);
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["validate_ok"] == true);
  uint64_t requests = 0, reused = 0, computed = 0, published = 0, rows_reused = 0, rows_checked_reused = 0;
  uint64_t not_computed = 0, incompatible = 0, prompt = 0, prefill_computed = 0, prefill_reused = 0;
  for (const EngineResult& r : worker_results(out, 2)) {
    CHECK(r.row_mismatches == 0);
    requests += r.prompt_requests;
    reused += r.prompt_modules_reused;
    computed += r.prompt_modules_computed;
    published += r.prompt_modules_published;
    rows_reused += r.prompt_module_rows_reused;
    rows_checked_reused += r.reused_rows_checked;
    not_computed += r.prompt_misses_not_computed;
    incompatible += r.prompt_misses_incompatible;
    prompt += r.prompt_tokens;
    prefill_computed += r.prefill_rows_computed;
    prefill_reused += r.prefill_rows_reused;
  }
  CHECK(requests == 48);
  // Three modules per prompt, each reused or computed; every miss was
  // computed, and at least the 3 modules of a first prompt were.
  CHECK(reused + computed == 3 * 48);
  CHECK(computed >= 3);
  CHECK(not_computed >= 3);
  CHECK(published <= computed);
  CHECK(not_computed + incompatible <= computed);
  // A worker turns to its generation-2 prompts after serving its
  // generation-1 ones, so the first generation-2 assembly of the run finds
  // modules published under generation 1 and refuses them: at least one
  // incompatible miss (module_position_mismatch: S, or Pi for the document).
  CHECK(incompatible >= 1);
  // Every reused module row was checked bitwise, and every prompt row was
  // computed or reused.
  CHECK(rows_checked_reused == rows_reused);
  CHECK(prefill_reused == rows_reused);
  CHECK(prefill_computed + prefill_reused == prompt);
  const nlohmann::json report = nlohmann::json::parse(read_file(out + "/report.json"));
  CHECK(report["prompt_cache"]["modules_reused"].get<uint64_t>() == reused);
  CHECK(report["prompt_cache"]["module_rows_reused"].get<uint64_t>() == rows_reused);
  // The node's own count of the misses agrees with the workers'.
  const nlohmann::json node_misses = report["prompt_cache"]["node_misses"];
  uint64_t node_total = 0;
  for (const auto& [reason, n] : node_misses.items()) node_total += n.get<uint64_t>();
  CHECK(node_total == not_computed + incompatible);
  CHECK(node_misses["no_candidate"].get<uint64_t>() == not_computed);
  CHECK(node_misses["module_position_mismatch"].get<uint64_t>() == incompatible);
}

TEST_CASE("kvrt run: a tenant over its block quota is refused, preempted and served again, exactly",
          "[run][process][quota]") {
  // test/alpha's requests outgrow its 8-block quota while they decode
  // (tests/data/run/quota-mix.toml): the node refuses their admissions and
  // appends for quota, an engine whose live requests all wait preempts one
  // and serves it again from its prompt, and every request ends exact.
  // (That another namespace is not held back by alpha's quota is shown on a
  // node directly: tests/node/node_quota_test.cpp.)
  test::ScratchDir dir("run-quota");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-quota.toml"), "--out", out}, dir);
  Result<workload::Workload> w = workload::load_workload(data("quota-mix.toml"));
  REQUIRE(w.ok());
  INFO(s.dump(2));
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  CHECK(s["row_mismatches"] == 0);
  uint64_t quota_retries = 0, preempted = 0;
  for (const EngineResult& r : worker_results(out, 2)) {
    quota_retries += r.quota_exceeded_retries;
    preempted += r.requests_preempted;
    CHECK(r.out_of_capacity_retries == 0);  // the pool is large: every wait is alpha's quota
  }
  CHECK(quota_retries > 0);
  CHECK(preempted > 0);
  CHECK(s["quota_exceeded"].get<uint64_t>() >= quota_retries);
  // The quota reached the run's node through the workload's [[tenant]].
  const std::string node_config = read_file(out + "/node/node.toml");
  CHECK(node_config.find("quota_blocks = 8") != std::string::npos);
}

TEST_CASE("kvrt run: identical prompts in two namespaces never share K/V", "[run][process]") {
  // Two tenants declare the same chat table, so their prompts are identical
  // token for token. Served one request at a time by one worker (pools large
  // enough that nothing is evicted), a tenant's reuse depends only on what it
  // published itself: with isolation (0x0CE) the two-tenant run reuses
  // exactly twice what the one-tenant run reuses. A cross-namespace hit would
  // add the second tenant's first system prompt on top.
  auto run = [&](const std::string& workload) {
    test::ScratchDir dir("run-isolation");
    return run_to_json({"--config", data("run-serial.toml"), "--workload", data(workload), "--out", dir.file("report")},
                       dir);
  };
  const nlohmann::json one = run("isolation-one-tenant.toml");
  const nlohmann::json two = run("isolation-two-tenants.toml");
  CHECK(one["exact"] == true);
  CHECK(two["exact"] == true);
  REQUIRE(one["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(two["requests"].get<uint64_t>() == 2 * one["requests"].get<uint64_t>());
  CHECK(two["prefill_rows_reused"].get<uint64_t>() == 2 * one["prefill_rows_reused"].get<uint64_t>());
  CHECK(two["prefill_rows_computed"].get<uint64_t>() == 2 * one["prefill_rows_computed"].get<uint64_t>());
}

TEST_CASE("kvrt run: unnamed pool segments serve the same serial run exactly", "[run][process][isolation]") {
  // The worker maps the pools from descriptors the node handed to its
  // session; nothing else changes, so the serial run's figures are equal.
  auto run = [&](const std::string& config) {
    test::ScratchDir dir("run-unnamed");
    const std::string out = dir.file("report");
    nlohmann::json s = run_to_json({"--config", data(config), "--out", out}, dir);
    CHECK(read_file(out + "/node/node.toml")
              .find("pool_segments = \"" + std::string(config == "run-serial.toml" ? "named" : "unnamed") + "\"") !=
          std::string::npos);
    return s;
  };
  const nlohmann::json named = run("run-serial.toml");
  const nlohmann::json unnamed = run("run-serial-unnamed.toml");
  CHECK(unnamed["exact"] == true);
  CHECK(unnamed["leaked_blocks"] == 0);
  REQUIRE(named["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(unnamed["requests"] == named["requests"]);
  CHECK(unnamed["prefill_rows_reused"] == named["prefill_rows_reused"]);
  CHECK(unnamed["prefill_rows_computed"] == named["prefill_rows_computed"]);
}

TEST_CASE("kvrt run: workers computing over host copies of the pools (staged) serve every path exactly",
          "[run][process][staged]") {
  // The moves GPU pools need (engine/staged_model_kv_cache.hpp), run over
  // shared memory: a hit row the worker failed to load, or a computed row
  // it failed to store, would make the verdict's replay disagree.
  auto run = [&](const std::string& config, std::vector<std::string> extra, const std::string& name) {
    test::ScratchDir dir("run-staged");
    std::vector<std::string> args{"--config", data(config), "--out", dir.file(name)};
    args.insert(args.end(), extra.begin(), extra.end());
    nlohmann::json s = run_to_json(args, dir);
    INFO(config << " " << name);
    CHECK(s["exact"] == true);
    CHECK(s["leaked_blocks"] == 0);
    CHECK(s["row_mismatches"] == 0);
    CHECK(s["requests_verified"] == s["requests"]);
    return s;
  };
  // Serial: the same requests, hits and computation as the run in place;
  // every computed prompt row and decode row stored once (a request's last
  // token has no row), every hit row loaded.
  const nlohmann::json in_place = run("run-serial.toml", {}, "in-place");
  const nlohmann::json staged = run("run-serial.toml", {"--staged-pools"}, "staged");
  CHECK(in_place["pools"]["staged"] == false);
  CHECK(in_place["pools"]["rows_loaded"] == 0);
  CHECK(staged["pools"]["staged"] == true);
  CHECK(staged["pools"]["backend"] == "shm");
  REQUIRE(in_place["prefill_rows_reused"].get<uint64_t>() > 0);
  for (const char* f : {"requests", "prefill_rows_reused", "prefill_rows_computed", "decode_tokens"})
    CHECK(staged[f] == in_place[f]);
  CHECK(staged["pools"]["rows_stored"].get<uint64_t>() == staged["prefill_rows_computed"].get<uint64_t>() +
                                                              staged["decode_tokens"].get<uint64_t>() -
                                                              staged["requests"].get<uint64_t>());
  CHECK(staged["pools"]["rows_loaded"].get<uint64_t>() >= staged["prefill_rows_reused"].get<uint64_t>());

  // Two workers, forks (copy-on-write copies the node makes), shared-prefix
  // decode in the worker and on the node, resumed chat histories, and
  // templated modules copied from other workers' blocks.
  const nlohmann::json mix = run("run-test.toml", {"--staged-pools"}, "mix");
  CHECK(mix["prefill_rows_forked"].get<uint64_t>() > 0);
  CHECK(mix["shared_prefix_rows_read_once"].get<uint64_t>() > 0);
  const nlohmann::json node_site =
      run("run-test.toml",
          {"--staged-pools", "--workload", data("tiny-tree.toml"), "--workers", "1", "--shared-prefix-site", "node"},
          "node-site");
  CHECK(node_site["shared_prefix_execution"]["ops"].get<uint64_t>() > 0);
  CHECK(node_site["shared_prefix_execution"]["refusals"] == 0);
  const nlohmann::json tier = run("run-session-tier.toml", {"--staged-pools"}, "tier");
  CHECK(tier["session_tier"]["turns_resumed"].get<uint64_t>() > 0);
  // Resumed rows are written into the copy, then stored with the computed
  // ones (at least once each: a request preempted under this small pool
  // computes and stores its rows again).
  CHECK(tier["pools"]["rows_stored"].get<uint64_t>() >=
        tier["prefill_rows_computed"].get<uint64_t>() + tier["session_tier"]["rows_loaded"].get<uint64_t>() +
            tier["decode_tokens"].get<uint64_t>() - tier["requests"].get<uint64_t>());
  const nlohmann::json templated = run("run-templated.toml", {"--staged-pools"}, "templated");
  CHECK(templated["prompt_cache"]["modules_reused"].get<uint64_t>() > 0);
}

TEST_CASE("kvrt run: GPU pools on a machine without a GPU stop at the node's start with a typed error",
          "[run][process][staged]") {
  if (probe_cuda_device().available) {
    WARN("a GPU is present: gpu/check-gpu-run.sh serves this configuration instead");
    return;
  }
  test::ScratchDir dir("run-cuda");
  const std::string config = dir.file("run-cuda.toml");
  std::ofstream(config) << "[run]\nworkers = 1\nworkload = \"" << data("tiny-mix.toml") << "\"\nlayout = \""
                        << KVRT_SOURCE_DIR << "/config/layouts/small-two-group.toml\"\nblocks_per_group = 256\n"
                        << "pool_backend = \"cuda\"\n[model]\nseed = 3\nvocab = 256\n";
  const std::string out = dir.file("report");
  test::KvrtProcess run({"run", "--config", config, "--out", out, "--quiet"}, dir.file("run.log"));
  REQUIRE(run.wait(std::chrono::seconds(60)) == 2);
  const std::string log = run.output();
  INFO(log);
  CHECK(log.find("io: ") != std::string::npos);
  CHECK(log.find("pool_backend = \"cuda\"") != std::string::npos);
  CHECK(log.find("[pool_backend]") != std::string::npos);
  // The derived node config asked for GPU pools; no worker started.
  CHECK(read_file(out + "/node/node.toml").find("pool_backend = \"cuda\"") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out + "/report.md"));
}

TEST_CASE("kvrt run: pools per trust domain, one tenant per worker, exactly", "[run][process][isolation]") {
  // Each tenant is a trust domain with pools of its own, and its worker maps
  // only those: every tenant reuses what it alone published, so the two
  // tenants together reuse exactly twice what one tenant does serially.
  test::ScratchDir dir("run-domains");
  const std::string out = dir.file("report");
  const nlohmann::json two = run_to_json({"--config", data("run-serial-domains.toml"), "--out", out}, dir);
  test::ScratchDir one_dir("run-domains-one");
  const nlohmann::json one =
      run_to_json({"--config", data("run-serial.toml"), "--out", one_dir.file("report")}, one_dir);
  CHECK(two["exact"] == true);
  CHECK(two["leaked_blocks"] == 0);
  CHECK(two["workers"] == 2);
  REQUIRE(one["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(two["requests"].get<uint64_t>() == 2 * one["requests"].get<uint64_t>());
  CHECK(two["prefill_rows_reused"].get<uint64_t>() == 2 * one["prefill_rows_reused"].get<uint64_t>());
  const std::string node_config = read_file(out + "/node/node.toml");
  CHECK(node_config.find("domain_pools = true") != std::string::npos);
  CHECK(node_config.find("[[domain]]") != std::string::npos);
}

TEST_CASE("run config: domain_pools needs unnamed segments and a worker per tenant", "[run]") {
  test::ScratchDir dir("run-domains-config");
  const std::string path = dir.file("run.toml");
  std::ofstream(path) << "[run]\nworkers = 1\ndomain_pools = true\n";
  Result<RunConfig> named = load_run_config(path);
  REQUIRE_FALSE(named.ok());
  CHECK(named.error().field == "run.domain_pools");
}

TEST_CASE("run config: pool_backend and staged_pools are read, checked and reach the node config", "[run]") {
  test::ScratchDir dir("run-pools-config");
  auto load = [&](const std::string& run) { return load_run_lines(dir, run); };
  Result<RunConfig> plain = load("");
  REQUIRE(plain.ok());
  CHECK(plain->pool_backend == PoolBackend::shm);
  CHECK_FALSE(plain->staged_pools);
  Result<RunConfig> gpu = load("pool_backend = \"cuda\"\n");
  REQUIRE(gpu.ok());
  CHECK(gpu->pool_backend == PoolBackend::cuda);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(node_config_for_run(*gpu, *w, PrefixIndexKind::hash_chain).find("pool_backend = \"cuda\"") !=
        std::string::npos);
  CHECK(node_config_for_run(*plain, *w, PrefixIndexKind::hash_chain).find("pool_backend = \"shm\"") !=
        std::string::npos);
  Result<RunConfig> staged = load("staged_pools = true\n");
  REQUIRE(staged.ok());
  CHECK(staged->staged_pools);

  Result<RunConfig> word = load("pool_backend = \"gpu\"\n");
  REQUIRE_FALSE(word.ok());
  CHECK(word.error().field == "run.pool_backend");
  // GPU pools travel as CUDA IPC handles, never as unnamed segments.
  Result<RunConfig> unnamed = load("pool_backend = \"cuda\"\npool_segments = \"unnamed\"\n");
  REQUIRE_FALSE(unnamed.ok());
  CHECK(unnamed.error().field == "run.pool_backend");
  Result<RunConfig> not_bool = load("staged_pools = \"yes\"\n");
  REQUIRE_FALSE(not_bool.ok());
  CHECK(not_bool.error().field == "run.staged_pools");
}

TEST_CASE("run config: shared_prefix_site and shared_prefix_design are words the loader knows", "[run]") {
  test::ScratchDir dir("run-shared-site-config");
  auto load = [&](const std::string& run) { return load_run_lines(dir, run); };
  Result<RunConfig> plain = load("");
  REQUIRE(plain.ok());
  CHECK(plain->shared_prefix_site == SharedPrefixSite::worker);
  CHECK(plain->shared_prefix_design == SharedPrefixDesign::auto_);
  Result<RunConfig> node = load("shared_prefix_site = \"node\"\nshared_prefix_design = \"chunk_attention\"\n");
  REQUIRE(node.ok());
  CHECK(node->shared_prefix_site == SharedPrefixSite::node);
  CHECK(node->shared_prefix_design == SharedPrefixDesign::chunk_attention);
  // The node's argument of `kvrt run-worker` is the config's word.
  CHECK(to_string(node->shared_prefix_design) == "chunk_attention");
  Result<RunConfig> gpu = load("shared_prefix_site = \"gpu\"\n");
  REQUIRE_FALSE(gpu.ok());
  CHECK(gpu.error().field == "run.shared_prefix_site");
  CHECK(gpu.error().describe().find("\"worker\", \"node\"") != std::string::npos);
  Result<RunConfig> flash = load("shared_prefix_site = \"node\"\nshared_prefix_design = \"flash\"\n");
  REQUIRE_FALSE(flash.ok());
  CHECK(flash.error().field == "run.shared_prefix_design");
  // A design is the node's: asking for one with the worker site is a mistake.
  Result<RunConfig> worker_design = load("shared_prefix_design = \"hydragen\"\n");
  REQUIRE_FALSE(worker_design.ok());
  CHECK(worker_design.error().field == "run.shared_prefix_design");
}

TEST_CASE("kvrt run: shared-prefix decode on the node's executor, multi-level trees, within the bound",
          "[run][process]") {
  test::ScratchDir dir("run-node-shared");
  Result<workload::Workload> w = workload::load_workload(data("tiny-tree.toml"));
  REQUIRE(w.ok());
  // Every document opens with the same system prompt: two shared levels.
  REQUIRE(w->jobs.size() == 3);
  CHECK(std::equal(w->jobs[0].prefix.begin(), w->jobs[0].prefix.begin() + 32, w->jobs[1].prefix.begin()));
  CHECK_FALSE(std::equal(w->jobs[0].prefix.begin() + 32, w->jobs[0].prefix.end(), w->jobs[1].prefix.begin() + 32));
  struct Case {
    std::string design;
    std::string ran;  // the design every shareable op must have run
  };
  for (const Case& c : {Case{"auto", ""}, Case{"hydragen", "hydragen"}, Case{"per_request", "per_request"}}) {
    INFO("design " << c.design);
    const nlohmann::json s = run_to_json(
        {"--config", data("run-test.toml"), "--workload", data("tiny-tree.toml"), "--workers", "1", "--out",
         dir.file("report-" + c.design), "--shared-prefix-site", "node", "--shared-prefix-design", c.design},
        dir);
    CHECK(s["exact"] == true);
    CHECK(s["leaked_blocks"] == 0);
    CHECK(s["requests"].get<uint64_t>() == w->request_count());
    CHECK(s["requests_verified"].get<uint64_t>() == w->request_count());
    CHECK(s["row_mismatches"] == 0);
    // The merged decode rows: within the bound, never bitwise-claimed.
    CHECK(s["bounded_rows_checked"].get<uint64_t>() > 0);
    CHECK(s["bounded_row_max_difference"].get<double>() <= 1.0 / 512.0);
    const nlohmann::json& x = s["shared_prefix_execution"];
    CHECK(x["site"] == "node");
    CHECK(x["design"] == c.design);
    CHECK(x["refusals"] == 0);
    const uint64_t ops = x["ops"].get<uint64_t>();
    CHECK(ops > 0);
    CHECK(ops % 4 == 0);  // one op per layer of the 4-layer model, per batch
    CHECK(ops == x["batches"].get<uint64_t>() * 4);
    CHECK(x["hydragen"].get<uint64_t>() + x["chunk_attention"].get<uint64_t>() + x["per_request"].get<uint64_t>() ==
          ops);
    // The documents' questions share the system prompt and their document:
    // some batch's tree has two shared levels.
    CHECK(x["max_levels"].get<uint64_t>() >= 2);
    CHECK(x["multi_level_ops"].get<uint64_t>() > 0);
    if (c.design == "auto") {
      // ChunkAttention for the multi-level trees, Hydragen for one level.
      CHECK(x["chunk_attention"].get<uint64_t>() >= x["multi_level_ops"].get<uint64_t>());
      CHECK(x["per_request"] == 0);
    } else {
      CHECK(x[c.ran].get<uint64_t>() == ops);
    }
    if (c.design == "per_request") {
      CHECK(x["rows_read"] == x["rows_per_request"]);
    } else {
      CHECK(x["rows_read"].get<uint64_t>() < x["rows_per_request"].get<uint64_t>());
    }
  }
}

TEST_CASE("kvrt run: the radix index owner serves the same workload exactly", "[run][process]") {
  test::ScratchDir dir("run-radix");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-radix.toml"), "--out", out}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  CHECK(s["requests_verified"].get<uint64_t>() == w->request_count());
  CHECK(s["row_mismatches"] == 0);
  // Every reused row was found by the radix tree.
  CHECK(s["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(s["reused_by_radix"] == s["prefill_rows_reused"]);
  CHECK(s["reused_by_hash_chain"] == 0);
  check_node_funnel_agrees(s);
  CHECK(s["prefill_rows_computed"].get<uint64_t>() + s["prefill_rows_reused"].get<uint64_t>() +
            s["prefill_rows_forked"].get<uint64_t>() ==
        s["prompt_tokens"].get<uint64_t>());
}

TEST_CASE("kvrt run: one request at a time, the radix and the hash chain reuse the same rows", "[run][process]") {
  // Pages of P_a tokens are the radix tree's unit and the hash chain's full
  // blocks: with nothing evicted, both find every earlier page, so a serial
  // run reuses exactly the same rows under either owner; and the radix keeps
  // identical tenants apart as the chain does (twice one tenant's reuse).
  auto run = [&](const std::string& config, const std::string& workload) {
    test::ScratchDir dir("run-radix-serial");
    return run_to_json({"--config", data(config), "--workload", data(workload), "--out", dir.file("report")}, dir);
  };
  const nlohmann::json chain = run("run-serial.toml", "isolation-one-tenant.toml");
  const nlohmann::json radix = run("run-serial-radix.toml", "isolation-one-tenant.toml");
  const nlohmann::json radix_two = run("run-serial-radix.toml", "isolation-two-tenants.toml");
  CHECK(chain["exact"] == true);
  CHECK(radix["exact"] == true);
  CHECK(radix_two["exact"] == true);
  REQUIRE(chain["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(radix["prefill_rows_reused"] == chain["prefill_rows_reused"]);
  CHECK(radix["prefill_rows_computed"] == chain["prefill_rows_computed"]);
  CHECK(radix_two["prefill_rows_reused"].get<uint64_t>() == 2 * radix["prefill_rows_reused"].get<uint64_t>());
}

TEST_CASE("kvrt run: under the partial-tail policy a chat's next turn reuses its whole history, exactly",
          "[run][process]") {
  // The serial chat run of run-serial.toml, once with full blocks and once
  // with immutable partial tails (0x07D), under each index: each finished
  // turn then also publishes its last, partly filled block, so the next
  // turn's hit ends at the history's last cached row instead of the block
  // boundary before it.
  // The same prompts are served; more rows are reused, at most P - 1 more per
  // request, and every reused row is still bitwise the recomputed one.
  auto run = [&](const std::string& config) {
    test::ScratchDir dir("run-partial-tail");
    return run_to_json({"--config", data(config), "--out", dir.file("report")}, dir);
  };
  const nlohmann::json full = run("run-serial.toml");
  const nlohmann::json tails = run("run-serial-partial.toml");
  // The radix owner under the same policy, token by token over the same
  // pages: with nothing evicted, it finds exactly the rows the chain finds.
  const nlohmann::json radix_tails = run("run-serial-radix-partial.toml");
  CHECK(radix_tails["exact"] == true);
  CHECK(radix_tails["prefill_rows_reused"] == tails["prefill_rows_reused"]);
  CHECK(radix_tails["prefill_rows_computed"] == tails["prefill_rows_computed"]);
  INFO(tails.dump(2));
  CHECK(full["exact"] == true);
  CHECK(tails["exact"] == true);
  CHECK(tails["row_mismatches"] == 0);
  CHECK(tails["leaked_blocks"] == 0);
  REQUIRE(tails["requests"] == full["requests"]);
  CHECK(tails["prompt_tokens"] == full["prompt_tokens"]);
  const uint64_t more = tails["prefill_rows_reused"].get<uint64_t>() - full["prefill_rows_reused"].get<uint64_t>();
  CHECK(tails["prefill_rows_reused"].get<uint64_t>() > full["prefill_rows_reused"].get<uint64_t>());
  CHECK(more <= tails["requests"].get<uint64_t>() * 15);
  CHECK(tails["prefill_rows_computed"].get<uint64_t>() + tails["prefill_rows_reused"].get<uint64_t>() +
            tails["prefill_rows_forked"].get<uint64_t>() ==
        tails["prompt_tokens"].get<uint64_t>());
}

TEST_CASE("kvrt run: a radix cache holding most of the pool gives pages back when requests are stuck",
          "[run][process]") {
  // 16 blocks per group, 14 of them leasable by the radix cache, one worker:
  // once the cache is full, prompts no longer fit, and nothing a request
  // holds will be released while it waits. The allocator sees refusals pile
  // up with no release and tells the index; the tree evicts leaf first
  // (0x08E) and the run finishes exactly (without it: run_stalled).
  test::ScratchDir dir("run-radix-starved");
  const nlohmann::json s = run_to_json({"--config", data("run-radix-starved.toml"), "--out", dir.file("report")}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["reused_by_radix"].get<uint64_t>() > 0);
}

TEST_CASE("run config: [updates] is read, checked, and adds the driver's admin principal", "[run]") {
  Result<RunConfig> c = load_run_config(data("run-updates.toml"));
  REQUIRE(c.ok());
  CHECK(c->updates.enabled());
  CHECK(c->updates.weights_every_ms == 15);
  CHECK(c->updates.adapters == std::vector<std::string>{"lora-a", "lora-b"});
  CHECK(c->updates.purge_deadline_ms == 5);
  Result<workload::Workload> w = workload::load_workload(c->workload_path);
  REQUIRE(w.ok());
  Result<NodeConfig> node = parse_node_config(node_config_for_run(*c, *w, c->prefix_index, true), "derived");
  REQUIRE(node.ok());
  REQUIRE(node->authorization.principals.size() == 3);
  // Without updates (the baseline pass) the node has worker principals only.
  Result<NodeConfig> still = parse_node_config(node_config_for_run(*c, *w, c->prefix_index, false), "derived");
  REQUIRE(still.ok());
  CHECK(still->authorization.principals.size() == 2);
  // A run config without [updates] has them off.
  CHECK_FALSE(load_run_config(data("run-test.toml"))->updates.enabled());

  Result<RunConfig> bad = load_run_config(data("bad-updates.toml"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::config_field);
  CHECK(bad.error().describe().find("bad-updates.toml") != std::string::npos);
  CHECK(bad.error().describe().find("at least two") != std::string::npos);
}

// Weights updates, adapter swaps and tenant purges every few milliseconds
// while two workers serve: every request is replayed under the weights of
// the generation it was admitted with, so a reused row of another generation
// (computed with other weights) would fail the verdict as a stale hit.
TEST_CASE("kvrt run: weights updates, adapter swaps and purges under load stay exact", "[run][process]") {
  test::ScratchDir dir("run-updates");
  const std::string out = dir.file("report");
  const nlohmann::json s = run_to_json({"--config", data("run-updates.toml"), "--out", out}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  INFO(s.dump(2));
  CHECK(s["exact"] == true);
  CHECK(s["leaked_blocks"] == 0);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  CHECK(s["row_mismatches"] == 0);
  const nlohmann::json& u = s["updates"];
  CHECK(u["failed"] == 0);
  CHECK(u["weights_updates"].get<uint64_t>() > 0);
  CHECK(u["adapter_swaps"].get<uint64_t>() > 0);
  CHECK(u["purges"].get<uint64_t>() > 0);
  CHECK(u["stale_checked"] == true);
  CHECK(u["foreign_generation_hits"] == 0);
  CHECK(u["stale_hits"] == 0);
  CHECK(u["stale_bytes_read"] == 0);
  // Requests ran on weights other than the configured ones, and the workers
  // learnt of each change through refusals and new grants.
  CHECK(u["requests_on_successor_weights"].get<uint64_t>() > 0);
  CHECK(u["weight_variants"].get<uint64_t>() > 0);
  CHECK(u["stale_generation_refusals"].get<uint64_t>() > 0);
  CHECK(u["reauthorizations"].get<uint64_t>() > 0);
  // Every receipt a purge revoked was answered as revoked to its holder.
  CHECK(u["workers_receipts_revoked"] == u["receipts_revoked"]);
  CHECK(u["purge_p50_us"].get<double>() > 0);
  CHECK(u["purge_p99_us"].get<double>() >= u["purge_p50_us"].get<double>());
  CHECK(u["baseline_requests_per_s"].get<double>() > 0);
  CHECK(u["throughput_ratio"].get<double>() > 0);
  const std::string md = read_file(out + "/report.md");
  CHECK(md.find("## Updates on the live node") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out + "/no-updates/node.json"));
}
