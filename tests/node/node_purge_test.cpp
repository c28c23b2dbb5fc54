// [node][purge] A namespace purge on a live node (0x0CE), through the admin
// route as `kvrt admin purge` sends it, for either prefix index, while a
// worker holds an executable-reuse receipt of the purged generation: the
// seven steps come back in order; a receipt its holder releases within the
// deadline is drained, one it keeps is revoked at the deadline (its leases
// go back, its release answers reuse_receipt_revoked); the holders' next
// lookup is refused as stale; the successor starts with an empty cache; the
// other namespace keeps its hits; with overwrite every block is zeroed
// before its next owner. Expected values come from the test's own calls
// (leases it took, the pools' capacity, the configured generation).
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/withdrawn_hit.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

ReuseAcquireOp acquire(const std::string& ns, const std::vector<TokenId>& prompt) {
  return ReuseAcquireOp{ns, RequestId{0}, RequestGeneration{0}, prompt, LogitsPath::logits_required, false};
}

ExecutableReuseReceipt open_receipt(Client& c, const std::string& ns, const std::vector<TokenId>& prompt) {
  Result<ReuseBatchReceipt> r = c.call(ReuseBatch{{}, {acquire(ns, prompt)}});
  REQUIRE(r.ok());
  const ReuseOutcome& o = r->outcomes.at(0);
  INFO((std::holds_alternative<ReuseRejectionReceipt>(o) ? std::get<ReuseRejectionReceipt>(o).detail
                                                         : std::string("not a rejection")));
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(o));
  return std::get<ExecutableReuseReceipt>(o);
}

ReuseOutcome release(Client& c, const ExecutableReuseReceipt& r) {
  Result<ReuseBatchReceipt> out = c.call(ReuseBatch{{}, {ReuseReleaseOp{r.execution_snapshot_version, false}}});
  REQUIRE(out.ok());
  return out->outcomes.at(0);
}

std::vector<std::string> step_names(const NamespacePurgeReceipt& r) {
  std::vector<std::string> out;
  for (const PurgeStepRecord& s : r.steps) out.push_back(s.step);
  return out;
}

const std::vector<std::string> kSevenSteps{"stop_admitting", "advance_generation", "invalidate_index",
                                           "drain_leases",   "release_physical",   "remove_external_copies",
                                           "complete"};

}  // namespace

TEST_CASE("node purge: a kept receipt is revoked at the deadline, a released one drains", "[node][purge]") {
  const std::string config =
      GENERATE(std::string("tests/data/node/node-test.toml"), std::string("tests/data/node/node-radix-test.toml"));
  const bool holder_releases = GENERATE(false, true);
  INFO(config << (holder_releases ? ", the holder releases within the deadline" : ", the holder keeps its receipt"));
  ScratchDir dir("node-purge");
  InProcessNode n(dir, config);
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  auto other = n.connect("worker-3");
  const uint64_t g = a->call(AuthorizeRequest{{}, "test/shared"}).value().generation.value;
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(other->call(AuthorizeRequest{{}, "test/other"}).ok());
  const std::vector<TokenId> prompt = prompt_of(3, 40);
  RequestFence shared_request;
  (void)serve_and_publish(*a, prompt, &shared_request, "test/shared");
  (void)serve_and_publish(*other, prompt, nullptr, "test/other");
  // The blocks test/shared's request took: all that may hold its rows.
  const uint64_t shared_blocks = 3 * static_cast<uint64_t>(a->session().pools.size());
  const int64_t leases_before = n.stat("allocator", "live_leases");
  const ExecutableReuseReceipt held = open_receipt(*b, "test/shared", prompt);
  REQUIRE(held.namespace_generation.value == g);
  REQUIRE(n.stat("allocator", "live_leases") > leases_before);

  // A worker cannot purge; asking changes nothing.
  const Result<NamespacePurgeReceipt> denied =
      b->call(NamespacePurgeRequest{{}, "test/shared", InvalidationCause::weights, "", 0, false});
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().code == ErrorCode::authorization_route_denied);

  uint64_t capacity = 0;
  for (int group = 0; group < 8; ++group) {
    const std::string name = "pool" + std::to_string(group) + "_capacity_blocks";
    if (n.has_stat("allocator", name)) capacity += static_cast<uint64_t>(n.stat("allocator", name));
  }
  REQUIRE(capacity > 0);

  const uint32_t deadline_ms = holder_releases ? 5000 : 60;
  std::thread holder;
  if (holder_releases)
    holder = std::thread([&] {
      // Released while the purge waits: the receipt drains, nothing is revoked.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      CHECK(std::holds_alternative<ReuseReleaseReceipt>(release(*b, held)));
    });
  const auto t0 = std::chrono::steady_clock::now();
  const Result<NamespacePurgeReceipt> purged = admin->call(
      NamespacePurgeRequest{TraceContext{5, 1, 0}, "test/shared", InvalidationCause::weights, "", deadline_ms, true});
  const auto waited_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  if (holder.joinable()) holder.join();
  INFO((purged.ok() ? std::string("ok") : purged.error().describe()));
  REQUIRE(purged.ok());
  const NamespacePurgeReceipt& r = *purged;
  CHECK(r.trace.trace_id == 5);
  CHECK(step_names(r) == kSevenSteps);
  CHECK(r.purged_generation.value == g);
  CHECK(r.successor_generation.value == g + 1);
  CHECK(r.ended_grants == 2);  // worker-0's and worker-1's
  CHECK(r.receipts_drained == (holder_releases ? 1u : 0u));
  CHECK(r.receipts_revoked == (holder_releases ? 0u : 1u));
  // Only test/shared's blocks are marked, not test/other's nor the
  // never-used rest of the pool (a purge of a pool's worth before).
  CHECK(r.blocks_marked_for_overwrite == shared_blocks);
  CHECK(r.external_copies == 0);
  if (holder_releases) {
    CHECK(waited_ms < deadline_ms);  // done when the receipt drained, not at the deadline
  } else {
    CHECK(r.steps.at(3).at_us >= uint64_t{deadline_ms} * 1000);
  }
  if (config.find("radix") != std::string::npos) {
    // The receipt locked test/shared's two pages at step 3; once it was
    // released or revoked, the purge's last step evicted them: only
    // test/other's two pages stay cached.
    CHECK(r.dropped_index_pages == 2);
    CHECK(static_cast<int64_t>(r.dropped_index_pages) == n.stat("prefix_index", "invalidated_pages"));
    CHECK(n.stat("prefix_index", "cached_pages") == 2);
  } else {
    CHECK(r.dropped_index_pages == 0);
  }

  // Every lease of the receipt went back, one way or the other.
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
  CHECK(n.stat("node", "reuse_receipts_revoked") == (holder_releases ? 0 : 1));
  CHECK(n.stat("authorization", "purges_completed") == 1);
  CHECK(n.stat("authorization", "last_purge_us") == static_cast<int64_t>(r.duration_us));
  if (!holder_releases) {
    // The holder hears of the revocation once, then the attempt is closed.
    const ReuseOutcome revoked = release(*b, held);
    REQUIRE(std::holds_alternative<Error>(revoked));
    CHECK(std::get<Error>(revoked).code == ErrorCode::reuse_receipt_revoked);
    const ReuseOutcome again = release(*b, held);
    REQUIRE(std::holds_alternative<Error>(again));
    CHECK(std::get<Error>(again).code == ErrorCode::reuse_attempt_closed);
  }

  // The holders' next lookup is refused as stale; authorized again, the
  // successor's cache starts empty.
  Result<PrefixBatchReceipt> stale =
      b->call(PrefixBatch{{}, {PrefixMatchOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(stale.ok());
  REQUIRE(std::holds_alternative<Error>(stale->outcomes.at(0)));
  CHECK(std::get<Error>(stale->outcomes[0]).code == ErrorCode::authorization_stale_generation);
  CHECK(b->call(AuthorizeRequest{{}, "test/shared"}).value().generation.value == g + 1);
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 0);
  // The other namespace is untouched.
  CHECK(match(*other, "test/other", prompt).runtime_hit_tokens == 32);

  // Overwrite: the marked blocks are zeroed before their next owner, each
  // once. test/shared's request still holds them; released, they are handed
  // out again only after every free block (the free queue comes first), so
  // the whole pool is asked for.
  CHECK(n.stat("allocator", "overwrite_pending_blocks") == static_cast<int64_t>(shared_blocks));
  REQUIRE(a->call(AllocatorBatch{{}, {ReleaseOp{shared_request, ReleaseReason::finished}}}).ok());
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const uint32_t per_group = static_cast<uint32_t>(capacity / a->session().pools.size());
  const AllocationReceipt all =
      allocation(*a, AllocateOp{(per_group - 3) * 16, {}, std::nullopt, "test/shared"});  // all but other's 3
  CHECK(all.outcome == AllocationOutcome::committed);
  CHECK(n.stat("allocator", "overwritten_blocks") == static_cast<int64_t>(shared_blocks));
  CHECK(n.stat("allocator", "overwrite_pending_blocks") == 0);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
}

TEST_CASE("node purge: a fault point stops it open, the namespace keeps serving, the next purge resumes it",
          "[node][purge][faults]") {
  ScratchDir dir("node-purge-fault");
  InProcessNode n(dir, test_node_config(dir, "fault_injection = true\n"));
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  const uint64_t g = a->call(AuthorizeRequest{{}, "test/shared"}).value().generation.value;
  REQUIRE(admin->call(FaultArmRequest{{}, false, {{"purge.after_drain_leases", 1}}}).ok());
  const Result<NamespacePurgeReceipt> stopped =
      admin->call(NamespacePurgeRequest{{}, "test/shared", InvalidationCause::weights, "", 0, true});
  REQUIRE_FALSE(stopped.ok());
  CHECK(stopped.error().code == ErrorCode::fault_injected);
  CHECK(n.stat("authorization", "purges_stopped") == 1);
  // Open, yet serving at the successor; an invalidation waits for the purge.
  const NamespaceStatusReceipt st = admin->call(NamespaceStatusRequest{{}, "test/shared"}).value();
  REQUIRE(st.namespaces.size() == 1);
  CHECK(st.namespaces[0].open_purge != 0);
  CHECK(st.namespaces[0].generation.value == g + 1);
  CHECK(a->call(AuthorizeRequest{{}, "test/shared"}).value().generation.value == g + 1);
  (void)serve_and_publish(*a, prompt_of(5, 40), nullptr);
  CHECK(admin->call(NamespaceInvalidateRequest{{}, "test/shared", InvalidationCause::weights, ""}).error().code ==
        ErrorCode::authorization_purge_pending);
  // Resumed: the remaining steps only, the purge's own overwrite mode, and
  // still one successor.
  const NamespacePurgeReceipt r =
      admin->call(NamespacePurgeRequest{{}, "test/shared", InvalidationCause::weights, "", 0, false}).value();
  CHECK(r.resumed_after == "drain_leases");
  CHECK(step_names(r) == std::vector<std::string>(kSevenSteps.begin() + 4, kSevenSteps.end()));
  CHECK(r.successor_generation.value == g + 1);
  CHECK(r.blocks_marked_for_overwrite > 0);
  CHECK(admin->call(NamespaceStatusRequest{{}, "test/shared"}).value().namespaces[0].open_purge == 0);
  CHECK(n.stat("authorization", "purges_completed") == 1);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
}

TEST_CASE("kvrt admin purge: the seven steps as JSON, and typed refusals", "[node][purge][cli]") {
  ScratchDir dir("admin-purge-cli");
  InProcessNode n(dir);
  auto run = [&](std::vector<std::string> args, int expect_rc) {
    return run_kvrt_against_node(dir, std::move(args), expect_rc);
  };
  const std::string out = run(
      {"admin", "purge", "--principal", "operator", "--namespace", "test/shared", "--deadline-ms", "0", "--json"}, 0);
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.find('{')));
  CHECK(j["namespace"] == "test/shared");
  CHECK(j["successor_generation"] == j["purged_generation"].get<uint64_t>() + 1);
  REQUIRE(j["steps"].size() == 7);
  for (size_t i = 0; i < kSevenSteps.size(); ++i) CHECK(j["steps"][i]["step"] == kSevenSteps[i]);
  CHECK(j["blocks_marked_for_overwrite"] == 0);  // release mode by default

  CHECK(run({"admin", "purge", "--principal", "worker-0", "--namespace", "test/shared"}, 2)
            .find("authorization_route_denied") != std::string::npos);
  CHECK(run({"admin", "purge", "--principal", "operator", "--namespace", "test/nope"}, 2)
            .find("authorization_unknown_namespace") != std::string::npos);
  CHECK(run({"admin", "purge", "--principal", "operator", "--namespace", "test/shared", "--cause", "shard"}, 2)
            .find("invalid_argument") != std::string::npos);
  CHECK(n.stat("authorization", "purges_completed") == 1);
  CHECK(n.stat("authorization", "purges_refused") == 2);  // the unknown namespace and the shard
}

}  // namespace kvrt::test

namespace kvrt::test {

// The race the workers handle: a purge revokes a receipt between the reuse
// message and the allocation that would take its blocks. Once the blocks are
// recycled, the allocation is refused by the bundle, which the engines treat
// as a withdrawn hit (served again without it, engine/withdrawn_hit.hpp), and
// the receipt's release answers reuse_receipt_revoked.
TEST_CASE("node purge: a hit whose receipt was revoked is refused by the bundle once its blocks are recycled",
          "[node][purge]") {
  ScratchDir dir("node-purge-withdrawn");
  InProcessNode n(dir);
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(5, 40);
  RequestFence fence;
  (void)serve_and_publish(*a, prompt, &fence);
  REQUIRE(a->call(AllocatorBatch{{}, {ReleaseOp{fence, ReleaseReason::finished}}}).ok());  // cached only
  const ExecutableReuseReceipt held = open_receipt(*b, "test/shared", prompt);
  REQUIRE_FALSE(held.physical_handles.empty());

  REQUIRE(admin->call(NamespacePurgeRequest{{}, "test/shared", InvalidationCause::weights, "", 0, true}).ok());
  // Another request takes the whole pool: every block the receipt named is
  // recycled (and zeroed, the purge having marked them).
  const int64_t capacity = n.stat("allocator", "pool0_capacity_blocks");
  const AllocationReceipt big = allocation(*a, AllocateOp{static_cast<uint32_t>(capacity * 16), {}, std::nullopt});
  REQUIRE(big.outcome == AllocationOutcome::committed);

  Result<AllocatorBatchReceipt> late =
      b->call(AllocatorBatch{{}, {AllocateOp{static_cast<uint32_t>(prompt.size()), held.physical_handles, {}}}});
  REQUIRE(late.ok());
  REQUIRE(std::holds_alternative<Error>(late->outcomes.at(0)));
  const Error& e = std::get<Error>(late->outcomes[0]);
  INFO(e.describe());
  CHECK(engine::is_withdrawn_hit(e));
  const ReuseOutcome revoked = release(*b, held);
  REQUIRE(std::holds_alternative<Error>(revoked));
  CHECK(std::get<Error>(revoked).code == ErrorCode::reuse_receipt_revoked);
  // A refusal of any other field is not a withdrawn hit.
  CHECK_FALSE(engine::is_withdrawn_hit(make_error(ErrorCode::unknown_physical, "x", "handle")));
  CHECK_FALSE(engine::is_withdrawn_hit(make_error(ErrorCode::invalid_argument, "x", "bundles[0]")));
}

}  // namespace kvrt::test
