// `kvrt run` over virtual reservations (a layout with physical_mode =
// "virtual_pages", vAttention 0x06): the node's [mapper] the run derives,
// every request shape served exactly from request slots, page pressure that
// reclaims retained pages, and --compare-physical against paged blocks.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "node/node_config.hpp"
#include "services/identity/layout_loader.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/run_fixture.hpp"
#include "tools/run/run_config.hpp"
#include "tools/workload/workload.hpp"

using namespace kvrt;
using namespace kvrt::test;

TEST_CASE("run config: the node's [mapper] for virtual pages covers every request in flight", "[run]") {
  Result<RunConfig> c = load_run_config(data("run-virtual.toml"));
  REQUIRE(c.ok());
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  Result<CacheLayoutManifest> layout = load_layout_manifest(c->layout_path);
  REQUIRE(layout.ok());
  Result<NodeMapperConfig> m = mapper_for_run(*c, *w, *layout);
  REQUIRE(m.ok());
  // 64-byte rows in 4 KiB pages: 64 tokens per page, a multiple of P_a = 16.
  CHECK(m->page_group_bytes == 4096);
  CHECK(m->request_slots == 2 * 4);
  CHECK(m->max_tokens % 64 == 0);
  CHECK(m->max_tokens >= w->max_context_tokens());
  CHECK(m->max_tokens < w->max_context_tokens() + 64);
  // Every slot can map to T_max in all 2 L = 8 tensors.
  CHECK(m->handle_count == 8u * m->request_slots * (m->max_tokens / 64));
  const std::string node = node_config_for_run(*c, *w, PrefixIndexKind::hash_chain, false, &*m);
  CHECK(node.find("[mapper]\nrequest_slots = 8\n") != std::string::npos);
  // Map-ahead (0x06D) is on unless the run turns it off.
  CHECK(node.find("\nmap_ahead = true\n") != std::string::npos);
  RunConfig off = *c;
  off.mapper_map_ahead = false;
  Result<NodeMapperConfig> sync = mapper_for_run(off, *w, *layout);
  REQUIRE(sync.ok());
  CHECK(node_config_for_run(off, *w, PrefixIndexKind::hash_chain, false, &*sync).find("\nmap_ahead = false\n") !=
        std::string::npos);
  // A layout of two groups cannot be one mapper's tensors.
  Result<CacheLayoutManifest> two =
      load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/small-two-group.toml");
  REQUIRE(two.ok());
  Result<NodeMapperConfig> refused = mapper_for_run(*c, *w, *two);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().field == "layout");
}

TEST_CASE("kvrt run: virtual reservations serve every request shape exactly, slots retained for their next owner",
          "[run][process]") {
  test::ScratchDir dir("run-virtual");
  const nlohmann::json s = run_to_json({"--config", data("run-virtual.toml"), "--out", dir.file("report")}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  CHECK(s["requests"].get<uint64_t>() == w->request_count());
  CHECK(s["requests_verified"].get<uint64_t>() == w->request_count());
  CHECK(s["row_mismatches"] == 0);
  // Prefix reuse through the node's block pools (0x0CD step 7 awaits the
  // slot's mapping): hits are copied into the slot, and every reused row was
  // compared with a no-reuse run's. No fork sharing: each prompt row is
  // either reused or computed, never both.
  CHECK(s["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(s["reused_rows_checked"] == s["prefill_rows_reused"]);
  CHECK(s["reused_row_mismatches"] == 0);
  CHECK(s["prefill_rows_computed"].get<uint64_t>() + s["prefill_rows_reused"].get<uint64_t>() ==
        s["prompt_tokens"].get<uint64_t>());
  CHECK(s["rows_checked"].get<uint64_t>() > 0);
  // Every leased hit passed the mapping stage and was executed.
  const auto stage = [&](const std::string& name) {
    for (const nlohmann::json& st : s["funnel"]["stages"])
      if (st["name"] == name) return st["count"].get<uint64_t>();
    FAIL("no funnel stage " << name);
    return uint64_t{0};
  };
  CHECK(stage("executed") > 0);
  CHECK(stage("mapping_ready") == stage("leased"));
  CHECK(stage("executed") == stage("mapping_ready"));
  const nlohmann::json& v = s["virtual_pages"];
  CHECK(v["steps"].get<uint64_t>() > 0);
  CHECK(v["steps_infeasible"] == 0);
  CHECK(v["pages_mapped"].get<uint64_t>() > 0);
  CHECK(v["pages_mapped"].get<uint64_t>() % 8 == 0);  // whole bundles: one page of each of 2 L = 8 tensors
  // The workers' receipts and the node's own counter tell the same story.
  CHECK(v["pages_mapped"].get<uint64_t>() == 8 * v["node_bundle_maps"].get<uint64_t>());
  // More requests than slots: later requests bind slots whose pages were
  // kept (0x06E), and they stay exact (the new owner writes its own rows).
  CHECK(v["retained_slot_reuses"].get<uint64_t>() > 0);
  CHECK(v["mapped_peak_bytes"].get<uint64_t>() <= v["pool_bytes"].get<uint64_t>());
  CHECK(v["active_valid_at_peak_bytes"].get<uint64_t>() <= v["mapped_peak_bytes"].get<uint64_t>());
  CHECK(v["reserved_bytes"].get<uint64_t>() > 0);
  // New requests' pages and decode's next page are mapped into the workers'
  // views ahead of use, on a background thread (0x06D).
  CHECK(v["pages_mapped_ahead"].get<uint64_t>() > 0);
  CHECK(v["view_map_work_us"].get<double>() >= 0.0);
  CHECK(v["view_map_visible_us"].get<double>() >= 0.0);
  CHECK(v["view_map_hidden_fraction"].get<double>() >= 0.0);
  CHECK(v["view_map_hidden_fraction"].get<double>() <= 1.0);
  const bool hidden_some = v["view_map_hidden_fraction"].get<double>() > 0.0;
  CHECK((!hidden_some || v["view_map_visible_us"].get<double>() < v["view_map_work_us"].get<double>()));
  CHECK(s["leaked_blocks"] == 0);
}

TEST_CASE("kvrt run: virtual reservations under page pressure reclaim retained pages and stay exact",
          "[run][process]") {
  test::ScratchDir dir("run-virtual-pressure");
  const nlohmann::json s =
      run_to_json({"--config", data("run-virtual-pressure.toml"), "--out", dir.file("report")}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  CHECK(s["requests_verified"].get<uint64_t>() == w->request_count());
  const nlohmann::json& v = s["virtual_pages"];
  // A quarter of the full pool: mapped bytes never exceed it, steps come up
  // short and wait, and inactive slots' retained bundles move to active
  // frontiers (0x06E) without any row going wrong.
  CHECK(v["mapped_peak_bytes"].get<uint64_t>() <= v["pool_bytes"].get<uint64_t>());
  CHECK(v["pool_bytes"].get<uint64_t>() * 3 <= v["reserved_bytes"].get<uint64_t>());
  CHECK(v["bundles_reclaimed"].get<uint64_t>() > 0);
  CHECK(v["steps_infeasible"].get<uint64_t>() > 0);
  // Reclaimed bundles are unmapped by the node first (and preempted slots' too).
  CHECK(v["node_bundle_unmaps"].get<uint64_t>() >= v["bundles_reclaimed"].get<uint64_t>());
  CHECK(v["pages_mapped"].get<uint64_t>() == 8 * v["node_bundle_maps"].get<uint64_t>());
}

TEST_CASE("kvrt run --compare-physical: paged blocks against virtual pages on one workload, both verified",
          "[run][process]") {
  test::ScratchDir dir("run-compare-physical");
  const std::string virtual_layout = std::string(KVRT_SOURCE_DIR) + "/config/layouts/small-virtual.toml";
  const nlohmann::json s = run_to_json(
      {"--config", data("run-test.toml"), "--compare-physical", virtual_layout, "--out", dir.file("report")}, dir);
  Result<workload::Workload> w = workload::load_workload(data("tiny-mix.toml"));
  REQUIRE(w.ok());
  CHECK(s["exact"] == true);
  const nlohmann::json& modes = s["physical_modes"];
  REQUIRE(modes.size() == 2);
  const nlohmann::json &paged = modes[0], &virt = modes[1];
  CHECK(paged["physical_mode"] == "paged_blocks");
  CHECK(virt["physical_mode"] == "virtual_pages");
  CHECK(paged["exact"] == true);
  CHECK(virt["exact"] == true);
  // Both reuse prompt rows; paged also shares fork branches' rows, which
  // virtual slots compute each for themselves.
  CHECK(paged["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(virt["prefill_rows_reused"].get<uint64_t>() > 0);
  CHECK(virt["prefill_rows_computed"].get<uint64_t>() + virt["prefill_rows_reused"].get<uint64_t>() ==
        s["prompt_tokens"].get<uint64_t>());
  CHECK(virt["pages_mapped"].get<uint64_t>() > 0);
  CHECK(virt["map_step_p50_us"].get<double>() > 0.0);
  CHECK(virt["map_step_p99_us"].get<double>() >= virt["map_step_p50_us"].get<double>());
  CHECK(paged["pages_mapped"] == 0);
  // (peak_unique_physical_bytes comes from periodic samples, which a run
  // this short may miss; not checked.)
  CHECK(paged["rows_checked"].get<uint64_t>() > 0);
  CHECK(virt["rows_checked"].get<uint64_t>() > 0);
  CHECK(read_file(dir.file("report") + "/report.md").find("## Physical modes") != std::string::npos);
}

TEST_CASE("kvrt run --compare-physical: a layout that does not load starts nothing", "[run][process]") {
  test::ScratchDir dir("run-compare-physical-bad");
  test::KvrtProcess run({"run", "--config", data("run-test.toml"), "--compare-physical", dir.file("missing.toml"),
                         "--out", dir.file("report"), "--quiet"},
                        dir.file("run.log"));
  CHECK(run.wait(std::chrono::seconds(120)) == 2);
  CHECK(run.output().find("missing.toml") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("report") + "/node"));
}

TEST_CASE("kvrt run: staged pools over virtual pages are refused before anything starts", "[run][process][staged]") {
  test::ScratchDir dir("run-virtual-staged");
  test::KvrtProcess run(
      {"run", "--config", data("run-virtual.toml"), "--staged-pools", "--out", dir.file("report"), "--quiet"},
      dir.file("run.log"));
  CHECK(run.wait(std::chrono::seconds(60)) == 2);
  const std::string log = run.output();
  INFO(log);
  CHECK(log.find("config_field") != std::string::npos);
  CHECK(log.find("[staged_pools]") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("report") + "/node"));
}
