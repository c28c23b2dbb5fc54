// Multi-process tests of the node runtime: a `kvrt node` and
// `kvrt worker` processes on loopback. Every test ends by reading the node's
// live statistics and requiring the reconciliation every owner must show
// once no worker holds anything: validate() holds everywhere, no leaked
// block, refcount delta 0, no live request or lease.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

std::vector<std::string> worker_args(const NodeProcess& node, int index, double seconds, int seed) {
  return {"worker",
          "--node",
          node.descriptor_path(),
          "--principal",
          "worker-" + std::to_string(index),
          "--duration",
          std::to_string(seconds),
          "--seed",
          std::to_string(seed),
          "--json"};
}

nlohmann::json summary_of(const KvrtProcess& p) {
  const std::string out = p.output();
  const size_t line = out.rfind("{\"worker\"");
  INFO(out);
  REQUIRE(line != std::string::npos);
  return nlohmann::json::parse(out.substr(line, out.find('\n', line) - line));
}

}  // namespace

TEST_CASE("a node and four worker processes share prefixes exactly and leak nothing", "[node][process]") {
  ScratchDir dir("node-four");
  NodeProcess node(dir);
  std::vector<std::unique_ptr<KvrtProcess>> workers;
  for (int i = 0; i < 4; ++i)
    workers.push_back(std::make_unique<KvrtProcess>(worker_args(node, i, 2.0, 11 + i),
                                                    dir.file("worker" + std::to_string(i) + ".log")));
  uint64_t hits = 0, requests = 0, successors = 0;
  for (auto& w : workers) {
    INFO(w->output());
    REQUIRE(w->wait() == 0);
    const nlohmann::json s = summary_of(*w);
    CHECK(s["requests"].get<uint64_t>() > 0);
    CHECK(s["reuse_mismatches"].get<uint64_t>() == 0);
    CHECK(s["operation_errors"].get<uint64_t>() == 0);
    CHECK(s["reused_rows_checked"].get<uint64_t>() >= s["hit_tokens"].get<uint64_t>());
    hits += s["hit_tokens"].get<uint64_t>();
    requests += s["requests"].get<uint64_t>();
    successors += s["successors_published"].get<uint64_t>();
  }
  // The workload shares four system prompts: reuse must happen.
  CHECK(hits > 0);
  const NodeStats s = await_quiescent(node);
  require_quiescent(s);
  // A request that reused a receipt publishes its new prompt blocks as that
  // attempt's successor (0x0CD step 10): the node counts exactly what the
  // workers saw, and refuses none (each is named after its rows commit).
  CHECK(successors > 0);
  CHECK(s.value("node", "reuse_successors_published") == static_cast<int64_t>(successors));
  CHECK(s.value("node", "reuse_successors_refused") == 0);
  CHECK(s.value("node", "sessions_opened") == 4);
  // Every worker closed its session: none was reclaimed as lost (a client
  // waits for its anchor's exit to leave before its connection closes).
  CHECK(s.value("node", "sessions_lost") == 0);
  CHECK(s.value("node", "pools_in_shared_memory") == static_cast<int64_t>(node.descriptor().pools.size()));
  CHECK(s.value("node", "pools_on_gpu") == 0);
  CHECK(s.value("prefix_index", "publications") > 0);
  CHECK(s.value("allocator", "pool0_evictable_blocks") > 0);  // published prefixes stay cached
  // A clean shutdown removes the descriptor and every pool segment.
  const std::vector<PoolAttachment> pools = node.descriptor().pools;
  CHECK(node.stop() == 0);
  CHECK_FALSE(std::filesystem::exists(node.descriptor_path()));
  for (const PoolAttachment& p : pools) CHECK_FALSE(std::filesystem::exists("/dev/shm/" + p.segment_name));
  (void)requests;
}

TEST_CASE("worker processes over virtual reservations: slots, retained pages and pool hits, all exact",
          "[node][process][mapper]") {
  ScratchDir dir("node-virtual-workers");
  NodeProcess node(dir, {}, "config/node-virtual.toml");
  REQUIRE(node.descriptor().mapper.has_value());
  std::vector<std::unique_ptr<KvrtProcess>> workers;
  for (int i = 0; i < 2; ++i)
    workers.push_back(std::make_unique<KvrtProcess>(worker_args(node, i, 1.5, 21 + i),
                                                    dir.file("worker" + std::to_string(i) + ".log")));
  uint64_t hits = 0, pages = 0, retained = 0, successors = 0;
  for (auto& w : workers) {
    INFO(w->output());
    REQUIRE(w->wait() == 0);
    const nlohmann::json s = summary_of(*w);
    CHECK(s["physical_mode"] == "virtual_pages");
    CHECK(s["requests"].get<uint64_t>() > 0);
    CHECK(s["operation_errors"] == 0);
    // Hits were read in the block pools, checked there, and copied into
    // the slot; every row of every finished request read back from its slot
    // is the row written (a page shown at the wrong place, or one another
    // slot's owner wrote, would differ).
    CHECK(s["reuse_mismatches"] == 0);
    CHECK(s["reused_rows_checked"].get<uint64_t>() >= s["hit_tokens"].get<uint64_t>());
    CHECK(s["slot_row_mismatches"] == 0);
    // Each finished request's prompt and decoded rows: at least its prompt.
    CHECK(s["slot_rows_checked"].get<uint64_t>() >= s["prompt_tokens"].get<uint64_t>());
    // One step per request over its prompt, one per decoded token.
    CHECK(s["mapper_steps"].get<uint64_t>() >= s["requests"].get<uint64_t>());
    hits += s["hit_tokens"].get<uint64_t>();
    pages += s["pages_mapped"].get<uint64_t>();
    retained += s["retained_slot_reuses"].get<uint64_t>();
    successors += s["successors_published"].get<uint64_t>();
  }
  CHECK(hits > 0);
  CHECK(successors > 0);
  // Far more requests than the node's 16 slots: bindings find the previous
  // owner's pages kept (0x06E), possibly another worker's.
  CHECK(retained > 0);
  const NodeStats s = await_quiescent(node);
  require_quiescent(s);
  // What the workers' receipts say was mapped is what the node mapped:
  // whole bundles of one page of each of 2L = 8 tensors.
  CHECK(pages > 0);
  CHECK(s.value("mapper", "bundle_maps") == static_cast<int64_t>(pages / 8));
  CHECK(pages % 8 == 0);
  CHECK(s.value("mapper", "active_slots") == 0);
  CHECK(s.value("node", "reuse_successors_published") == static_cast<int64_t>(successors));
  // A workload whose requests cannot fit a slot's T_max (96 + 40 prompt and
  // 200 decoded tokens > 256) is refused before any request, naming why.
  std::vector<std::string> too_long = worker_args(node, 0, 1.0, 3);
  too_long.insert(too_long.end(), {"--decode-tokens", "200"});
  KvrtProcess refused(too_long, dir.file("refused.log"));
  CHECK(refused.wait() != 0);
  CHECK(refused.output().find("does not fit the node's request slots of 256 tokens") != std::string::npos);
  CHECK(node.stop() == 0);
}

TEST_CASE("a worker killed with SIGKILL mid-transaction is reclaimed while the others finish", "[node][process]") {
  ScratchDir dir("node-kill");
  NodeProcess node(dir);
  // Several kill points: early (first iterations), middle, late.
  const int delays_ms[] = {150, 600, 1100};
  int round = 0;
  for (const int delay : delays_ms) {
    INFO("kill after " << delay << " ms");
    // The victim is connected and working before the clock starts, however
    // loaded the machine is.
    KvrtProcess victim(worker_args(node, 1, 5.0, 200 + round), dir.file("victim.log"));
    await_stats(
        node, [&](const NodeStats& x) { return x.value("node", "sessions_opened") == 2 * round + 1; },
        std::chrono::seconds(30));
    KvrtProcess survivor(worker_args(node, 0, 1.5, 100 + round), dir.file("survivor.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    // Freeze the victim mid-work, let the survivor finish (it releases all
    // it holds), and what is still live is exactly the victim's: the node
    // must reclaim precisely that after the kill.
    victim.signal(SIGSTOP);
    INFO(survivor.output());
    REQUIRE(survivor.wait() == 0);
    const nlohmann::json s = summary_of(survivor);
    CHECK(s["reuse_mismatches"].get<uint64_t>() == 0);
    CHECK(s["operation_errors"].get<uint64_t>() == 0);
    const NodeStats frozen =
        await_stats(node, [](const NodeStats& x) { return x.value("node", "workers_connected") == 1; });
    const int64_t victim_held = frozen.value("allocator", "live_requests").value_or(-1);
    const int64_t reclaimed_before = frozen.value("allocator", "requests_reclaimed").value_or(-1);
    victim.signal(SIGKILL);
    CHECK(victim.wait() == 128 + SIGKILL);
    const NodeStats after = await_quiescent(node);
    require_quiescent(after);
    CHECK(after.value("allocator", "requests_reclaimed").value_or(-1) - reclaimed_before == victim_held);
    ++round;
  }
  const NodeStats s = node.stats();
  CHECK(s.value("node", "sessions_reclaimed") == 2 * round);
  INFO(node.log());
  CHECK(node.log().find("remote_link_unreachable") != std::string::npos);
}

TEST_CASE("a hung worker (SIGSTOP) is detected by heartbeats and reclaimed", "[node][process]") {
  ScratchDir dir("node-hung");
  NodeProcess node(dir);
  KvrtProcess hung(worker_args(node, 2, 30.0, 7), dir.file("hung.log"));
  // Stop the worker while it holds requests: a stopped process releases
  // nothing, so the count read after SIGSTOP is what the node must reclaim.
  int64_t held = 0;
  for (int attempt = 0; attempt < 50 && held == 0; ++attempt) {
    await_stats(node, [](const NodeStats& x) { return x.value("allocator", "live_requests") > 0; });
    hung.signal(SIGSTOP);
    held = node.stats().value("allocator", "live_requests").value_or(0);
    if (held == 0) hung.signal(SIGCONT);  // caught between two iterations; try again
  }
  REQUIRE(held > 0);
  // connection_timeout_ms = 2500 in the test configuration.
  const NodeStats s = await_quiescent(node, std::chrono::seconds(15));
  require_quiescent(s);
  CHECK(s.value("allocator", "requests_reclaimed") == held);
  hung.signal(SIGKILL);
  hung.wait();
}

TEST_CASE("a node refuses a bad configuration, naming file and field, and starts nothing", "[node][process]") {
  ScratchDir dir("node-badconfig");
  const std::string config = dir.file("bad.toml");
  {
    std::ofstream out(config);
    out << "[node]\nlayout = \"missing-layout.toml\"\nblocks_per_group = 0\n";
  }
  KvrtProcess node({"node", "--config", config, "--descriptor", dir.file("node.json")}, dir.file("node.log"));
  CHECK(node.wait() == 2);
  INFO(node.output());
  CHECK(node.output().find("bad.toml") != std::string::npos);
  CHECK(node.output().find("blocks_per_group") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("node.json")));
}

}  // namespace kvrt::test

namespace kvrt::test {

TEST_CASE(
    "tracing: node and worker --trace files hold Chrome trace events with flows from a worker's call to the owner's "
    "slice",
    "[node][process][trace]") {
  ScratchDir dir("node-trace");
  NodeProcess node(dir, {"--trace", dir.file("node-trace.json")});
  std::vector<std::string> args = {"worker",      "--node",   node.descriptor_path(),
                                   "--principal", "worker-0", "--requests",
                                   "6",           "--trace",  dir.file("worker-trace.json")};
  KvrtProcess worker(args, dir.file("worker.log"));
  INFO(worker.output());
  REQUIRE(worker.wait() == 0);
  REQUIRE(node.stop() == 0);
  KvrtProcess merge(
      {"trace-merge", "--out", dir.file("merged.json"), dir.file("node-trace.json"), dir.file("worker-trace.json")},
      dir.file("merge.log"));
  REQUIRE(merge.wait() == 0);
  std::ifstream in(dir.file("merged.json"));
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::string, int> slices_by_name;
  std::set<uint64_t> flow_starts, flow_finishes;
  std::set<std::string> track_names;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") ++slices_by_name[e["name"].get<std::string>()];
    if (ph == "s") flow_starts.insert(e["id"].get<uint64_t>());
    if (ph == "f") flow_finishes.insert(e["id"].get<uint64_t>());
    if (ph == "M" && e["name"] == "thread_name") track_names.insert(e["args"]["name"].get<std::string>());
  }
  CHECK(slices_by_name["allocator.batch"] > 0);
  CHECK(slices_by_name["prefix.batch"] > 0);
  CHECK(slices_by_name["allocator.call"] == slices_by_name["allocator.batch"]);
  CHECK(track_names.count("allocator") == 1);
  CHECK(track_names.count("worker-0") == 1);
  // Every request the worker sent arrived at an owner: each flow has both ends.
  CHECK_FALSE(flow_starts.empty());
  CHECK(flow_starts == flow_finishes);
}

}  // namespace kvrt::test

namespace kvrt::test {

// spdlog lines carry the trace id of the message they are about:
// at debug level every answered batch names its owner, session, trace and
// span, and how many of its operations ended in a typed error.
TEST_CASE("node --log-level debug: each answered batch logs its session, trace and span ids",
          "[node][process][trace]") {
  ScratchDir dir("node-debug-log");
  NodeProcess node(dir, {}, "tests/data/node/node-test.toml", {"--log-level", "debug"});
  uint64_t session = 0;
  {
    Result<std::unique_ptr<Client>> c =
        Client::connect(node.descriptor(), read_token_file(node.descriptor().token_path("worker-0")).value());
    INFO((c.ok() ? std::string("ok") : c.error().describe()));
    REQUIRE(c.ok());
    session = (*c)->session().session.value;
    const TraceContext trace{0x1234abcd5678ef01ULL, 0x77, 0};
    const RequestFence unknown{RequestId{4000}, RequestGeneration{1}, TableVersion{1}};
    Result<AllocatorBatchReceipt> r = (*c)->call(
        AllocatorBatch{trace, {AllocateOp{16, {}, std::nullopt}, ReleaseOp{unknown, ReleaseReason::finished}}});
    REQUIRE(r.ok());
    REQUIRE(r->outcomes.size() == 2);
    const auto* a = std::get_if<AllocationReceipt>(&r->outcomes[0]);
    REQUIRE(a != nullptr);
    CHECK(std::holds_alternative<Error>(r->outcomes[1]));
    const RequestFence fence{a->request_id, a->request_generation, a->table_version_after};
    REQUIRE((*c)->call(AllocatorBatch{{}, {ReleaseOp{fence, ReleaseReason::finished}}}).ok());
  }
  const NodeStats s = await_quiescent(node);
  require_quiescent(s);
  REQUIRE(node.stop() == 0);
  const std::string log = node.log();
  INFO(log);
  CHECK(log.find("actor=allocator session=" + std::to_string(session) +
                 " trace=1234abcd5678ef01 span=0000000000000077 answered ops=2 typed_errors=1") != std::string::npos);
  // The untraced release: trace 0, one operation, no error.
  CHECK(log.find("actor=allocator session=" + std::to_string(session) +
                 " trace=0000000000000000 span=0000000000000000 answered ops=1 typed_errors=0") != std::string::npos);
}

}  // namespace kvrt::test
