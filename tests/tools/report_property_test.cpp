// Seeded property test of the run report (docs/conventions.md habit 7): random
// reports with hostile strings (markup, control characters, malformed UTF-8)
// and extreme or non-finite figures always give parseable JSON, well-formed
// SVG and printable text. The seed is printed with every failure.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/tools/report_fixture.hpp"
#include "tools/report/report_format.hpp"
#include "tools/report/report_latency.hpp"
#include "tools/report/report_render.hpp"
#include "tools/report/svg_canvas.hpp"

using namespace kvrt;
using namespace kvrt::report;
using namespace kvrt::report_test;

namespace {
std::string random_text(std::mt19937_64& rng) {
  static const std::vector<std::string> kPieces = {"a",
                                                   "Z",
                                                   "0",
                                                   " ",
                                                   "-",
                                                   "_",
                                                   "<",
                                                   ">",
                                                   "&",
                                                   "\"",
                                                   "'",
                                                   "|",
                                                   "*",
                                                   "#",
                                                   "\\",
                                                   "`",
                                                   "]]>",
                                                   "&amp;",
                                                   "\n",
                                                   "\t",
                                                   "\x01",
                                                   "\x1b",
                                                   "\x7f",
                                                   "\xff",
                                                   "\xc3",
                                                   "\xed\xa0\x80",
                                                   "\xc3\xa9",
                                                   "\xc2\xb5",
                                                   "\xe2\x80\x94",
                                                   "\xf0\x9f\x98\x80",
                                                   "\xef\xbf\xbe"};
  std::string out;
  const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
  for (size_t i = 0; i < n; ++i) out += kPieces[std::uniform_int_distribution<size_t>(0, kPieces.size() - 1)(rng)];
  return out;
}
uint64_t random_count(std::mt19937_64& rng) {
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0:
      return 0;
    case 1:
      return std::uniform_int_distribution<uint64_t>(0, 100)(rng);
    case 2:
      return std::uniform_int_distribution<uint64_t>(0, 1ull << 40)(rng);
    default:
      return std::uniform_int_distribution<uint64_t>(0, 1ull << 62)(rng);
  }
}
double random_real(std::mt19937_64& rng) {
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0:
      return std::nan("");
    case 1:
      return INFINITY;
    case 2:
      return -1;
    case 3:
      return 0;
    default:
      return std::uniform_real_distribution<double>(0, 1e4)(rng);
  }
}
RunReport random_report(std::mt19937_64& rng) {
  RunReport r;
  r.workload_name = random_text(rng), r.workload_origin = random_text(rng), r.layout_id = random_text(rng);
  r.started_at = random_text(rng), r.first_mismatch = random_text(rng), r.trace_path = random_text(rng);
  r.prefix_index = random_text(rng), r.reuse_policy = random_text(rng);
  r.partial_tail_rows_copied = random_count(rng);
  r.workers = static_cast<uint32_t>(random_count(rng));
  r.wall_s = random_real(rng);
  r.requests = random_count(rng), r.prefill_rows_computed = random_count(rng),
  r.prefill_rows_reused = random_count(rng);
  r.reused_by_hash_chain = random_count(rng), r.reused_by_radix = random_count(rng);
  r.shared_prefix_rows_read_once = random_count(rng), r.shared_prefix_rows_per_request = random_count(rng);
  const auto small = [&](size_t max) { return std::uniform_int_distribution<size_t>(0, max)(rng); };
  for (size_t i = small(10); i > 0; --i) r.funnel_stages.emplace_back(random_text(rng), random_count(rng));
  for (size_t i = small(10); i > 0; --i) r.rejection_buckets.emplace_back(random_text(rng), random_count(rng));
  r.peak_ledger = {random_count(rng), random_count(rng), random_count(rng), random_count(rng), random_count(rng)};
  r.pool_utilisation = random_real(rng);
  for (size_t i = small(60); i > 0; --i) {
    UtilisationSample s;
    s.t_s = random_real(rng), s.used_blocks = random_count(rng), s.evictable_blocks = random_count(rng);
    s.capacity_blocks = random_count(rng), s.live_requests = random_count(rng);
    r.timeline.push_back(s);
  }
  for (size_t i = small(6); i > 0; --i) {
    OwnerLatency o{random_text(rng), {}};
    for (size_t k = small(300); k > 0; --k)
      o.samples_us.push_back(small(20) == 0 ? random_real(rng) : std::pow(10.0, random_real(rng) / 1e3 - 2));
    r.latencies.push_back(std::move(o));
  }
  for (size_t i = small(4); i > 0; --i)
    r.worker_rows.push_back({random_text(rng), random_count(rng), random_count(rng), random_count(rng),
                             random_count(rng), random_real(rng)});
  for (size_t i = small(5); i > 0; --i)
    r.comparison.push_back(
        {random_text(rng), random_count(rng), random_count(rng), random_count(rng), random_real(rng), small(1) == 1});
  r.exact = small(1) == 1;
  r.leaked_blocks = static_cast<int64_t>(random_count(rng)) - (1ll << 20);
  if (small(1) == 1) {
    UpdatesSummary& u = r.updates;
    u.enabled = true;
    for (uint64_t* c :
         {&u.weights_updates, &u.adapter_swaps, &u.purges, &u.failed, &u.receipts_drained, &u.receipts_revoked,
          &u.blocks_marked_for_overwrite, &u.requests_on_successor_weights, &u.weight_variants,
          &u.stale_generation_refusals, &u.namespace_closed_refusals, &u.reauthorizations, &u.workers_receipts_revoked,
          &u.stale_hits, &u.stale_bytes_read, &u.foreign_generation_hits})
      *c = random_count(rng);
    for (double* x : {&u.invalidate_p50_us, &u.invalidate_p99_us, &u.purge_p50_us, &u.purge_p99_us, &u.requests_per_s,
                      &u.baseline_requests_per_s, &u.throughput_ratio, &u.longest_gap_s, &u.baseline_longest_gap_s})
      *x = random_real(rng);
    u.first_failure = random_text(rng);
    u.stale_checked = small(1) == 1;
  }
  return r;
}
}  // namespace

TEST_CASE("random reports always give parseable JSON and well-formed SVG", "[report]") {
  const uint64_t seed = 20240501;
  std::mt19937_64 rng(seed);
  const fs::path base = fresh_dir("random");
  for (int iteration = 0; iteration < 120; ++iteration) {
    INFO("seed " << seed << ", iteration " << iteration);
    const RunReport r = random_report(rng);
    CHECK_NOTHROW(summary_json(r).dump());
    const std::string text = summary_text(r);
    CHECK(text.rfind("exact: ", 0) == 0);
    CHECK(parse_xml(as_xml_text(text)).root.has_value());  // valid UTF-8, no control character but newline
    const fs::path dir = base / std::to_string(iteration);
    const Status s = write_report(r, dir.string());
    REQUIRE(s.ok());
    nlohmann::json doc;
    REQUIRE_NOTHROW(doc = nlohmann::json::parse(slurp(dir / "report.json")));
    CHECK(doc["requests"] == r.requests);
    CHECK(doc["timeline"].size() == r.timeline.size());
    CHECK(doc.contains("updates") == r.updates.enabled);
    if (r.updates.enabled) {
      CHECK(doc["updates"]["purges"] == r.updates.purges);
      CHECK(text.find("updates on the live node") != std::string::npos);
    }
    for (const char* name : {"utilisation.svg", "funnel.svg", "latency.svg"}) {
      CAPTURE(name);
      auto parsed = parse_xml(slurp(dir / name));
      INFO(parsed.error);
      CHECK(parsed.root.has_value());
    }
    CHECK(parse_xml(as_xml_text(slurp(dir / "report.md"))).root.has_value());
    fs::remove_all(dir);
  }
  fs::remove_all(base.parent_path());
}
