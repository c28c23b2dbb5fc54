// [node][reuse_tx] The executable-reuse transaction (0x0CD) served by a node
//: a worker's ReuseBatch goes through the node's owners as one
// message per owner per step and comes back as a receipt whose leases the
// session holds, or as a rejection naming its step and bucket. The expected
// values are read independently: the hit's handles from the prefix route,
// the pools from the session receipt, the leases from the allocator's stats.
#include <chrono>
#include <thread>

#include "schema/codecs.hpp"
#include "services/authorization/authorization_service.hpp"
#include "services/prefix/prefix_batch_run.hpp"
#include "services/prefix/prefix_service.hpp"
#include "services/reuse/reuse_batch_run.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

ReuseAcquireOp acquire(const std::string& ns, const std::vector<TokenId>& prompt) {
  return ReuseAcquireOp{ns, RequestId{0}, RequestGeneration{0}, prompt, LogitsPath::logits_required, false};
}

ReuseBatchReceipt reuse(Client& c, std::vector<ReuseOp> ops) {
  Result<ReuseBatchReceipt> r = c.call(ReuseBatch{{}, std::move(ops)});
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("node reuse transaction: a receipt leases exactly the hit, and its leases end with release",
          "[node][reuse_tx]") {
  ScratchDir dir("node-reuse-tx");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(7, 40);  // two full blocks of 16, and 8 tokens
  (void)serve_and_publish(*a, prompt, nullptr);
  const PrefixMatchReceipt hit = match(*b, "test/shared", prompt);
  REQUIRE(hit.runtime_hit_tokens == 32);
  const int64_t leases_before = n.stat("allocator", "live_leases");

  ReuseAcquireOp witnessed = acquire("test/shared", prompt);
  witnessed.require_collision_witness = true;
  const ReuseBatchReceipt r = reuse(*b, {acquire("test/shared", prompt), witnessed});
  REQUIRE(r.outcomes.size() == 2);
  for (const ReuseOutcome& o : r.outcomes) {
    INFO((std::holds_alternative<Error>(o)                   ? std::get<Error>(o).describe()
          : std::holds_alternative<ReuseRejectionReceipt>(o) ? std::get<ReuseRejectionReceipt>(o).detail
                                                             : std::string("receipt")));
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(o));
  }
  const auto& receipt = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  CHECK(receipt.source == ReuseSource::prefix_index);
  CHECK(receipt.namespace_id == "test/shared");
  CHECK(receipt.covered_interval == TokenInterval{0, 32});
  CHECK(receipt.physical_handles == hit_handles(hit));
  CHECK(receipt.leases.size() == receipt.physical_handles.size());
  CHECK(receipt.required_frontier_tokens == 32);
  CHECK(receipt.ready_frontier_tokens == 32);  // two resident bundles of P = 16
  std::vector<PoolGenerationRef> pools;
  for (const PoolAttachment& p : b->session().pools) pools.push_back(PoolGenerationRef{p.pool, p.generation});
  CHECK(receipt.pool_generations == pools);
  CHECK_FALSE(receipt.kernel_abi_id.empty());
  CHECK(receipt.collision_witness_verified);  // the node's index keeps its witness on
  const auto& second = std::get<ExecutableReuseReceipt>(r.outcomes[1]);
  CHECK(second.semantic_digest == receipt.semantic_digest);
  CHECK(second.layout_digest == receipt.layout_digest);
  CHECK(second.execution_snapshot_version.value > receipt.execution_snapshot_version.value);
  CHECK(n.stat("allocator", "live_leases") == leases_before + int64_t(receipt.leases.size() + second.leases.size()));

  // The worker takes the hit into its own request, then lets the leases go
  // (step 10 for a reuse that publishes nothing new).
  CHECK(allocation(*b, AllocateOp{40, receipt.physical_handles, std::nullopt}).outcome == AllocationOutcome::committed);
  // Steps 9-10: the first receipt's rows were used, the second's not.
  const ReuseBatchReceipt released = reuse(*b, {ReuseReleaseOp{receipt.execution_snapshot_version, true},
                                                ReuseReleaseOp{second.execution_snapshot_version, false}});
  REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(released.outcomes.at(0)));
  REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(released.outcomes.at(1)));
  const auto& done = std::get<ReuseReleaseReceipt>(released.outcomes[0]);
  CHECK(done.released == receipt.leases);
  CHECK(done.refused.empty());
  CHECK(done.completed);
  const auto& unused = std::get<ReuseReleaseReceipt>(released.outcomes[1]);
  CHECK(unused.released == second.leases);
  CHECK_FALSE(unused.completed);
  CHECK(n.stat("allocator", "live_leases") == leases_before);
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
  CHECK(n.stat("node", "reuse_rejected_execution") == 1);
  // Released twice: a typed error, and nothing changes.
  const ReuseBatchReceipt again = reuse(*b, {ReuseReleaseOp{receipt.execution_snapshot_version, true}});
  REQUIRE(std::holds_alternative<Error>(again.outcomes.at(0)));
  CHECK(std::get<Error>(again.outcomes[0]).code == ErrorCode::reuse_attempt_closed);
  CHECK(n.stat("node", "reuse_receipts") == 2);
  CHECK(n.stat("executor", "reuse_snapshots_frozen") == 2);
}

TEST_CASE("node reuse transaction: refusals name their step and bucket, and take nothing", "[node][reuse_tx]") {
  ScratchDir dir("node-reuse-tx-refused");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  auto c = n.connect("worker-3");  // granted test/other only
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(c->call(AuthorizeRequest{{}, "test/other"}).ok());
  const std::vector<TokenId> prompt = prompt_of(9, 40);
  (void)serve_and_publish(*a, prompt, nullptr);
  const int64_t leases_before = n.stat("allocator", "live_leases");

  // C holds no grant for test/shared: refused before any index sees it.
  const ReuseBatchReceipt denied = reuse(*c, {acquire("test/shared", prompt)});
  REQUIRE(std::holds_alternative<ReuseRejectionReceipt>(denied.outcomes.at(0)));
  const auto& d = std::get<ReuseRejectionReceipt>(denied.outcomes[0]);
  CHECK(d.step == ReuseStep::authorize);
  CHECK(bucket_of(d.reason) == ReuseBucket::authorization);
  CHECK(d.leases_released.empty());

  // A prompt nothing was published for, and one shorter than a block: misses.
  const ReuseBatchReceipt missed = reuse(
      *a, {acquire("test/shared", prompt_of(11, 40)), acquire("test/shared", prompt_of(9, 10)),
           ReuseAcquireOp{"test/shared", RequestId{0}, RequestGeneration{0}, {}, LogitsPath::logits_required, false}});
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(std::holds_alternative<ReuseRejectionReceipt>(missed.outcomes.at(i)));
    CHECK(bucket_of(std::get<ReuseRejectionReceipt>(missed.outcomes[i]).reason) == ReuseBucket::index_miss);
  }
  // An op without tokens is malformed: a typed error, and the batch went on.
  REQUIRE(std::holds_alternative<Error>(missed.outcomes.at(2)));
  CHECK(std::get<Error>(missed.outcomes[2]).code == ErrorCode::invalid_argument);

  CHECK(n.stat("allocator", "live_leases") == leases_before);
  CHECK(n.stat("node", "reuse_rejected_authorization") == 1);
  // The node's funnel counts the refusal that never reached the index, and
  // the two misses and the later hit that did.
  {
    Result<NodeStats> stats = read_node_stats(n.descriptor, /*validate=*/true);
    REQUIRE(stats.ok());
    const NodeReuseFunnel f = node_reuse_funnel(stats->owners);
    CHECK(f.requests == 3);
    CHECK(f.authorized == 2);
    CHECK(f.rejections[static_cast<size_t>(d.reason)] == 1);
    CHECK(f.rejections[static_cast<size_t>(RejectionReason::no_candidate)] == 2);
  }
  CHECK(n.stat("node", "reuse_rejected_index_miss") == 2);
  CHECK(n.stat("node", "reuse_errors") == 1);

  // Malformed bytes on the reuse route: a typed error, and the node serves on.
  Result<std::vector<uint8_t>> garbage = a->raw(ReuseRoute::id, std::vector<uint8_t>{1, 2, 3, 4, 5});
  REQUIRE(garbage.ok());
  CHECK_FALSE(codec::decode<ReuseBatchReceipt>(*garbage).ok());
  CHECK(std::holds_alternative<ExecutableReuseReceipt>(reuse(*a, {acquire("test/shared", prompt)}).outcomes.at(0)));
}

TEST_CASE("node reuse transaction: a session that ends holding receipt leases gives them back", "[node][reuse_tx]") {
  ScratchDir dir("node-reuse-tx-end");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(13, 48);
  RequestFence fence;
  (void)serve_and_publish(*a, prompt, &fence);
  {
    auto b = n.connect("worker-1");
    REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
    const ReuseBatchReceipt r = reuse(*b, {acquire("test/shared", prompt)});
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(0)));
    CHECK(n.stat("allocator", "live_leases") > 0);
  }  // b disconnects without releasing
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("allocator", "live_leases") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(n.stat("allocator", "live_leases") == 0);
  CHECK(n.stat("node", "reuse_open_attempts") == 0);  // the ended session's attempt was dropped
  Result<AllocatorBatchReceipt> done = a->call(AllocatorBatch{{}, {ReleaseOp{fence}}});
  REQUIRE(done.ok());
}

TEST_CASE("node reuse transaction: a radix candidate leases its blocks and locks its path", "[node][reuse_tx]") {
  ScratchDir dir("node-reuse-tx-radix");
  InProcessNode n(dir, "tests/data/node/node-radix-test.toml");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(3, 40);
  (void)serve_and_publish(*a, prompt, nullptr);
  const PrefixMatchReceipt hit = match(*b, "test/shared", prompt);
  REQUIRE(hit.runtime_hit_tokens == 32);
  const int64_t node_leases = n.stat("allocator", "live_leases");  // the tree's own, one per cached block

  const ReuseBatchReceipt r = reuse(*b, {acquire("test/shared", prompt)});
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(0)));
  const auto& receipt = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  CHECK(receipt.source == ReuseSource::radix_index);
  CHECK(receipt.physical_handles == hit_handles(hit));
  CHECK_FALSE(receipt.path_node_ids.empty());
  // One lease per block and one on the path.
  REQUIRE(receipt.leases.size() == receipt.physical_handles.size() + 1);
  CHECK(std::count_if(receipt.leases.begin(), receipt.leases.end(),
                      [](LeaseId l) { return lease_owner(l) == LeaseOwner::radix_index; }) == 1);
  CHECK(receipt.collision_witness_verified);  // the tree compared every token of its walk
  CHECK(n.stat("prefix_index", "path_leases") == 1);
  CHECK(n.stat("allocator", "live_leases") == node_leases + int64_t(receipt.physical_handles.size()));

  const ReuseBatchReceipt released = reuse(*b, {ReuseReleaseOp{receipt.execution_snapshot_version, true}});
  REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(released.outcomes.at(0)));
  CHECK(std::get<ReuseReleaseReceipt>(released.outcomes[0]).released == receipt.leases);
  CHECK(std::get<ReuseReleaseReceipt>(released.outcomes[0]).completed);
  CHECK(n.stat("prefix_index", "path_leases") == 0);
  CHECK(n.stat("allocator", "live_leases") == node_leases);

  // A session that ends holding a receipt gives its path lock back too.
  {
    auto c = n.connect("worker-2");
    REQUIRE(c->call(AuthorizeRequest{{}, "test/shared"}).ok());
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(reuse(*c, {acquire("test/shared", prompt)}).outcomes.at(0)));
    CHECK(n.stat("prefix_index", "path_leases") == 1);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("prefix_index", "path_leases") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(n.stat("prefix_index", "path_leases") == 0);
  CHECK(n.stat("allocator", "live_leases") == node_leases);
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
}

namespace kvrt::test {
namespace {

// Step 10's second ending against a node with either index owner: a worker
// reuses 32 tokens, serves a longer prompt behind them, and releases the
// attempt naming its request as the successor. The successor is then what
// the next lookup finds, the leases are gone, and the funnel counts a hit.
void successor_round(const std::string& config) {
  ScratchDir dir("node-reuse-successor");
  InProcessNode n(dir, config);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(5, 40);
  (void)serve_and_publish(*a, prompt, nullptr);
  const int64_t leases_before = n.stat("allocator", "live_leases");

  // B's request: the 40-token prompt and 24 tokens more, 64 in all (4 full blocks).
  std::vector<TokenId> longer = prompt;
  for (TokenId t = 0; t < 24; ++t) longer.push_back(90000 + t);
  const ReuseBatchReceipt r = reuse(*b, {acquire("test/shared", longer)});
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(0)));
  const auto receipt = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  REQUIRE(receipt.covered_interval == TokenInterval{0, 32});
  const AllocationReceipt served = allocation(*b, AllocateOp{64, receipt.physical_handles, std::nullopt});
  REQUIRE(served.outcome == AllocationOutcome::committed);
  RequestFence fence{served.request_id, served.request_generation, served.table_version_after};

  // Named before its rows are committed: the index refuses, nothing is
  // published, and the attempt still ends (its leases go back).
  SECTION("a successor whose rows are not committed is refused, and the leases still go back") {
    const ReuseBatchReceipt early =
        reuse(*b, {ReuseReleaseOp{receipt.execution_snapshot_version, true, ReuseSuccessor{fence.request, longer, 4}}});
    REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(early.outcomes.at(0)));
    const auto& done = std::get<ReuseReleaseReceipt>(early.outcomes[0]);
    INFO((done.successor_refused ? done.successor_refused->describe() : "no refusal"));
    CHECK(done.successor_refused.has_value());
    CHECK_FALSE(done.successor.has_value());
    CHECK_FALSE(done.published_successor);
    CHECK(done.completed);
    CHECK(done.released == receipt.leases);
    std::vector<TokenId> next = longer;
    next.push_back(77);
    CHECK(match(*a, "test/shared", next).runtime_hit_tokens == 32);
    CHECK(n.stat("node", "reuse_successors_refused") == 1);
    CHECK(n.stat("node", "reuse_successors_published") == 0);
  }
  SECTION("a committed successor is published, then the leases go back") {
    // Malformed successors first: typed errors, and the attempt stays open.
    const ReuseBatchReceipt bad =
        reuse(*b, {ReuseReleaseOp{receipt.execution_snapshot_version, false, ReuseSuccessor{fence.request, longer, 4}},
                   ReuseReleaseOp{receipt.execution_snapshot_version, true, ReuseSuccessor{fence.request, longer, 1}},
                   ReuseReleaseOp{receipt.execution_snapshot_version, true, ReuseSuccessor{fence.request, prompt, 4}}});
    for (const ReuseOutcome& o : bad.outcomes) {
      REQUIRE(std::holds_alternative<Error>(o));
      CHECK(std::get<Error>(o).code == ErrorCode::invalid_argument);
      CHECK(std::get<Error>(o).field == "successor");
    }
    CHECK(n.stat("node", "reuse_open_attempts") == 1);

    const AllocationReceipt committed = allocation(*b, CommitRowsOp{fence, 64});
    REQUIRE(committed.outcome == AllocationOutcome::committed);
    const ReuseBatchReceipt done_batch =
        reuse(*b, {ReuseReleaseOp{receipt.execution_snapshot_version, true, ReuseSuccessor{fence.request, longer, 4}}});
    REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(done_batch.outcomes.at(0)));
    const auto& done = std::get<ReuseReleaseReceipt>(done_batch.outcomes[0]);
    INFO((done.successor_refused ? done.successor_refused->describe() : "published"));
    REQUIRE(done.successor.has_value());
    CHECK(done.successor->request == fence.request);
    CHECK(done.published_successor);
    CHECK(done.completed);
    CHECK(done.released == receipt.leases);
    // The successor is what a lookup finds now: all four blocks for a
    // prompt that goes on (the same 64 tokens alone hit 48: a
    // logits-producing request recomputes its last block, 0x07E).
    std::vector<TokenId> next = longer;
    next.push_back(77);
    CHECK(match(*a, "test/shared", next).runtime_hit_tokens == 64);
    CHECK(match(*a, "test/shared", longer).runtime_hit_tokens == 48);
    CHECK(n.stat("node", "reuse_successors_published") == 1);
    CHECK(n.stat("node", "reuse_successors_refused") == 0);
  }
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
  // Only the tree's own leases may remain (the radix index holds one per
  // page it caches, the successor's new pages included); none is the attempt's.
  if (config.find("radix") == std::string::npos) CHECK(n.stat("allocator", "live_leases") == leases_before);
  CHECK(n.stat("node", "reuse_rejected_execution") == 0);
}

}  // namespace

TEST_CASE("node reuse transaction: step 10 publishes one complete successor (hash chain)", "[node][reuse_tx]") {
  successor_round("tests/data/node/node-test.toml");
}

TEST_CASE("node reuse transaction: step 10 publishes one complete successor (radix)", "[node][reuse_tx]") {
  successor_round("tests/data/node/node-radix-test.toml");
}

}  // namespace kvrt::test

TEST_CASE("node reuse transaction: a reuse fault point armed by an admin ends one attempt and returns its leases",
          "[node][reuse_tx][faults]") {
  ScratchDir dir("node-reuse-tx-fault");
  InProcessNode n(dir, test_node_config(dir, "fault_injection = true\n"));
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(13, 40);
  (void)serve_and_publish(*a, prompt, nullptr);
  const int64_t leases_before = n.stat("allocator", "live_leases");

  // Every owner's points are named <owner>.<point>: the allocator's (one
  // per cache group, and its reclaim's), the reuse coordinator's (after each
  // of steps 1-9), the purge's (after steps 2-6), then the index's
  // publication points.
  const Result<FaultArmReceipt> known = admin->call(FaultArmRequest{{}, true, {}});
  REQUIRE(known.ok());
  std::vector<std::string> expected;
  for (size_t g = 0; g < n.descriptor.pools.size(); ++g)
    expected.push_back("allocator.after_reserve_group_" + std::to_string(g));
  expected.push_back("allocator.after_reclaim_leases");
  for (const std::string& p : ReuseBatchRun::fault_point_names()) expected.push_back("reuse." + p);
  for (const std::string& p : AuthorizationService::purge_fault_point_names()) expected.push_back("purge." + p);
  for (const std::string& p : PrefixBatchRun<PrefixService>::fault_point_names()) expected.push_back("prefix." + p);
  CHECK(known->registered == expected);

  // The second op to finish step 5 (its leases taken and checked) fails there.
  REQUIRE(admin->call(FaultArmRequest{{}, false, {{"reuse.after_validate_versions", 2}}}).ok());
  const ReuseBatchReceipt r = reuse(*b, {acquire("test/shared", prompt), acquire("test/shared", prompt)});
  REQUIRE(r.outcomes.size() == 2);
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes[0]));
  REQUIRE(std::holds_alternative<Error>(r.outcomes[1]));
  CHECK(std::get<Error>(r.outcomes[1]).code == ErrorCode::fault_injected);
  CHECK(std::get<Error>(r.outcomes[1]).field == "validate_versions");
  // Only the receipt's leases are held: the failed attempt's went back.
  const auto& receipt = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  CHECK(n.stat("allocator", "live_leases") == leases_before + int64_t(receipt.leases.size()));
  CHECK(n.stat("node", "reuse_open_attempts") == 1);
  const Result<FaultArmReceipt> after = admin->call(FaultArmRequest{{}, false, {}});
  REQUIRE(after.ok());
  CHECK(after->armed.empty());
  CHECK(after->fired == std::vector<FaultPointFired>{{"reuse.after_validate_versions", 1}});
  // The same prompt again, nothing armed: a receipt, as if the fault never was.
  const ReuseBatchReceipt again = reuse(*b, {acquire("test/shared", prompt)});
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(again.outcomes.at(0)));
  const ReuseBatchReceipt released = reuse(
      *b, {ReuseReleaseOp{receipt.execution_snapshot_version, false},
           ReuseReleaseOp{std::get<ExecutableReuseReceipt>(again.outcomes[0]).execution_snapshot_version, false}});
  for (const ReuseOutcome& o : released.outcomes) CHECK(std::holds_alternative<ReuseReleaseReceipt>(o));
  CHECK(n.stat("allocator", "live_leases") == leases_before);  // stat() also validates every owner
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
}

TEST_CASE("node faults: a faulted publication is withdrawn, an interrupted reclaim resumes until nothing is held",
          "[node][faults]") {
  ScratchDir dir("node-publish-reclaim-fault");
  InProcessNode n(dir, test_node_config(dir, "fault_injection = true\n"));
  auto admin = n.connect("operator");
  const std::vector<TokenId> prompt = prompt_of(17, 40);
  {
    auto a = n.connect("worker-0");
    REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
    // The index decided the publication, then failed: nothing of it stays
    // visible, and the same publication afterwards succeeds.
    REQUIRE(admin->call(FaultArmRequest{{}, true, {{"prefix.after_decide", 1}}}).ok());
    const AllocationReceipt r = allocation(*a, AllocateOp{40, {}, std::nullopt});
    const RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
    (void)allocation(*a, CommitRowsOp{fence, 40});
    const PrefixBatch publish{{}, {PrefixPublishOp{"test/shared", fence.request, prompt, 0, 2}}};
    Result<PrefixBatchReceipt> faulted = a->call(publish);
    REQUIRE(faulted.ok());
    REQUIRE(std::holds_alternative<Error>(faulted->outcomes.at(0)));
    CHECK(std::get<Error>(faulted->outcomes[0]).code == ErrorCode::fault_injected);
    CHECK(match(*a, "test/shared", prompt).runtime_hit_tokens == 0);
    Result<PrefixBatchReceipt> again = a->call(publish);
    REQUIRE(again.ok());
    REQUIRE(std::holds_alternative<PrefixPublishReceipt>(again->outcomes.at(0)));
    CHECK(std::get<PrefixPublishReceipt>(again->outcomes[0]).published == 2 * n.descriptor.pools.size());
    CHECK(match(*a, "test/shared", prompt).runtime_hit_tokens == 32);
    // The session ends holding two requests; its reclaim stops after the
    // leases, then resumes by itself.
    (void)allocation(*a, AllocateOp{24, {}, std::nullopt});
    REQUIRE(admin->call(FaultArmRequest{{}, true, {{"allocator.after_reclaim_leases", 1}}}).ok());
    CHECK(n.stat("allocator", "live_requests") == 2);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("allocator", "live_requests") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(n.stat("allocator", "live_requests") == 0);  // stat() also validates every owner
  CHECK(n.stat("allocator", "reclaim_resumptions") == 1);
  CHECK(n.stat("allocator", "reclaims_pending") == 0);
  const Result<FaultArmReceipt> after = admin->call(FaultArmRequest{{}, false, {}});
  REQUIRE(after.ok());
  CHECK(after->fired ==
        std::vector<FaultPointFired>{{"allocator.after_reclaim_leases", 1}, {"prefix.after_decide", 1}});
}

}  // namespace kvrt::test

namespace kvrt::test {

// Virtual reservations (0x06): a reused prefix copied into a request slot is
// executable only once the mapper owner has published that slot's frontier
// over the hit (0x0CD step 7); short of it the attempt ends as mapping_lag
// with its leases back. The frontiers are set by this test's own steps.
TEST_CASE("node reuse transaction: a hit read from a request slot waits for the slot's mapped frontier",
          "[node][reuse_tx][mapper]") {
  ScratchDir dir("node-reuse-tx-slot");
  InProcessNode n(dir, "tests/data/node/node-mapper-test.toml");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(21, 40);  // a hit of two blocks: rows [0, 32)
  (void)serve_and_publish(*a, prompt, nullptr);
  const int64_t leases_before = n.stat("allocator", "live_leases");

  // B binds requests 1 and 2 to slots and steps only request 1, over its
  // whole prompt (one 64-token page per tensor); A binds request 3.
  const auto mapper = [](Client& c, std::vector<MapperOp> ops) {
    Result<MapperBatchReceipt> r = c.call(MapperBatch{{}, std::move(ops)});
    REQUIRE(r.ok());
    for (const MapperOutcome& o : r->outcomes) REQUIRE_FALSE(std::holds_alternative<Error>(o));
  };
  mapper(*b, {MapperAllocOp{RequestId{1}, RequestGeneration{1}, 40},
              MapperAllocOp{RequestId{2}, RequestGeneration{1}, 40}, MapperStepOp{{StepRequest{RequestId{1}, 40}}}});
  mapper(*a, {MapperAllocOp{RequestId{3}, RequestGeneration{1}, 40}});
  const auto slot_op = [&](uint64_t slot_request) {
    ReuseAcquireOp op = acquire("test/shared", prompt);
    op.await_slot_mapping = true;
    op.slot_request = RequestId{slot_request};
    return op;
  };
  // A paged op in the same batch reads no mapper and is served as before.
  const ReuseBatchReceipt r =
      reuse(*b, {slot_op(1), slot_op(2), slot_op(3), slot_op(9), acquire("test/shared", prompt)});
  REQUIRE(r.outcomes.size() == 5);
  {
    INFO((std::holds_alternative<Error>(r.outcomes[0]) ? std::get<Error>(r.outcomes[0]).describe() : ""));
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes[0]));
  }
  const auto& ready = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  CHECK(ready.covered_interval == TokenInterval{0, 32});
  CHECK(ready.required_frontier_tokens == 32);
  CHECK(ready.ready_frontier_tokens == 40);  // the slot's step target, inside its one mapped page
  // Bound, never stepped: nothing mapped, L_map = 32.
  REQUIRE(std::holds_alternative<ReuseRejectionReceipt>(r.outcomes[1]));
  const auto& lag = std::get<ReuseRejectionReceipt>(r.outcomes[1]);
  CHECK(lag.reason == RejectionReason::mapping_frontier_lag);
  CHECK(lag.step == ReuseStep::await_mapping);
  CHECK(bucket_of(lag.reason) == ReuseBucket::mapping_lag);
  CHECK(lag.leases_released.size() == ready.leases.size());
  // Another session's request, and a request nobody bound: typed errors.
  REQUIRE(std::holds_alternative<Error>(r.outcomes[2]));
  CHECK(std::get<Error>(r.outcomes[2]).code == ErrorCode::not_owner);
  REQUIRE(std::holds_alternative<Error>(r.outcomes[3]));
  CHECK(std::get<Error>(r.outcomes[3]).code == ErrorCode::unknown_request);
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes[4]));
  CHECK(std::get<ExecutableReuseReceipt>(r.outcomes[4]).ready_frontier_tokens == 32);
  // Only the two receipts hold leases; the refused ops' went back.
  const auto& paged = std::get<ExecutableReuseReceipt>(r.outcomes[4]);
  CHECK(n.stat("allocator", "live_leases") == leases_before + int64_t(ready.leases.size() + paged.leases.size()));
  CHECK(n.stat("node", "reuse_rejected_mapping_lag") == 1);

  // Stepped now, request 2's slot is ready for the same hit.
  mapper(*b, {MapperStepOp{{StepRequest{RequestId{2}, 32}}}});
  const ReuseBatchReceipt again = reuse(*b, {slot_op(2)});
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(again.outcomes.at(0)));
  CHECK(std::get<ExecutableReuseReceipt>(again.outcomes[0]).ready_frontier_tokens == 32);

  const ReuseBatchReceipt released =
      reuse(*b, {ReuseReleaseOp{ready.execution_snapshot_version, true},
                 ReuseReleaseOp{paged.execution_snapshot_version, false},
                 ReuseReleaseOp{std::get<ExecutableReuseReceipt>(again.outcomes[0]).execution_snapshot_version, true}});
  for (const ReuseOutcome& o : released.outcomes) REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(o));
  CHECK(n.stat("allocator", "live_leases") == leases_before);
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
}

TEST_CASE("node reuse transaction: a node without [mapper] refuses an op that awaits a slot, leases back",
          "[node][reuse_tx]") {
  ScratchDir dir("node-reuse-tx-no-mapper");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(23, 40);
  (void)serve_and_publish(*a, prompt, nullptr);
  const int64_t leases_before = n.stat("allocator", "live_leases");
  ReuseAcquireOp op = acquire("test/shared", prompt);
  op.await_slot_mapping = true;
  op.slot_request = RequestId{1};
  const ReuseBatchReceipt r = reuse(*a, {op});
  REQUIRE(std::holds_alternative<Error>(r.outcomes.at(0)));
  CHECK(std::get<Error>(r.outcomes[0]).code == ErrorCode::invalid_argument);
  CHECK(std::get<Error>(r.outcomes[0]).field == "await_slot_mapping");
  CHECK(n.stat("allocator", "live_leases") == leases_before);
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
}

}  // namespace kvrt::test
