// [reuse][coordinator] ReuseBatchRun (services/reuse/reuse_batch_run.hpp):
// the node's sequencing of the executable-reuse transaction (0x0CD) over a
// batch, driven here with scripted owner answers built from the [reuse]
// fixture's happy scenario (a 32-token request whose first 16 tokens are
// cached as one bundle of two groups, pools 1 and 2 at generation 3). Each
// case changes one owner's answer and checks which ops reach which step, the
// rejection's bucket, and which leases the run hands back for release.
#include <catch2/catch.hpp>

#include "tests/reuse/reuse_coordinator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

const ReuseRejectionReceipt& rejection_of(const ReuseBatchReceipt& r, size_t i) {
  REQUIRE(std::holds_alternative<ReuseRejectionReceipt>(r.outcomes.at(i)));
  return std::get<ReuseRejectionReceipt>(r.outcomes[i]);
}

}  // namespace

TEST_CASE("reuse coordinator: three ops, one per outcome, each owner asked once per stage", "[reuse][coordinator]") {
  ScriptedOwners x;
  ReuseAcquireOp miss = x.op();
  ReuseAcquireOp empty = x.op();
  empty.tokens.clear();
  ReuseBatchRun run(ReuseBatch{{}, {x.op(), miss, empty}}, kPools, kBlockTokens, kGroups);

  // The empty op never reaches an owner; the other two are asked for keys.
  REQUIRE(expect_next<KeyLookup>(run).requests.size() == 2);
  run.answer(std::vector<ReuseKeyAnswer>{x.key(), x.key()});
  REQUIRE(expect_next<CandidateLookup>(run).lookups.size() == 2);
  run.answer(std::vector<CandidateReply>{x.candidate(), CandidateReply(CandidateAnswer(IndexMiss{}))});
  // Only the hit goes on to the allocator, with its handles bundle-major.
  const std::vector<ReuseLeaseRequest> lease_reqs = expect_next<BlockLeaseAcquire>(run).requests;
  REQUIRE(lease_reqs.size() == 1);
  CHECK(lease_reqs[0].handles == x.happy.hit().physical_handles);
  CHECK(lease_reqs[0].bundles == 1);
  run.answer(std::vector<ReuseLeaseAnswer>{x.leases({LeaseId{5}, LeaseId{6}})});
  (void)expect_next<IndexVersionRead>(run);
  run.answer(ReuseIndexVersion{7, TreeVersion{0}});
  const std::vector<ReuseSnapshotRequest> snap_reqs = expect_next<SnapshotFreeze>(run).requests;
  REQUIRE(snap_reqs.size() == 1);
  CHECK(snap_reqs[0].planned_kernel_abi_id == x.happy.key.manifest.cache_abi_sha256);
  run.answer(ScriptedOwners::freeze(snap_reqs, 41));

  const ReuseBatchReceipt r = run.receipt();
  REQUIRE(r.outcomes.size() == 3);
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes[0]));
  const auto& receipt = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  CHECK(receipt.covered_interval == TokenInterval{0, 16});
  CHECK(receipt.leases == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
  CHECK(receipt.pool_generations == kPools);
  CHECK(receipt.ready_frontier_tokens == 16);  // one leased bundle of P = 16 resident rows
  CHECK(receipt.required_frontier_tokens == 16);
  CHECK(receipt.execution_snapshot_version == ExecutionSnapshotVersion{41});
  CHECK(receipt.collision_witness_verified);
  CHECK(rejection_of(r, 1).reason == RejectionReason::no_candidate);
  CHECK(bucket_of(rejection_of(r, 1).reason) == ReuseBucket::index_miss);
  CHECK(rejection_of(r, 1).step == ReuseStep::lookup_candidate);
  REQUIRE(std::holds_alternative<Error>(r.outcomes[2]));
  CHECK(std::get<Error>(r.outcomes[2]).code == ErrorCode::invalid_argument);
  // The receipt's leases are the worker's to release; nothing else was taken.
  CHECK(run.leases_to_release().empty());
  // The miss ended its attempt; the receipt's attempt ends when released.
  const std::vector<FunnelOutcome> funnel = run.funnel_outcomes();
  REQUIRE(funnel.size() == 1);
  CHECK(funnel[0].reason == RejectionReason::no_candidate);
  CHECK(run.take_receipt_attempts().size() == 1);
}

TEST_CASE("reuse coordinator: a rejection after the leases hands them back for release", "[reuse][coordinator]") {
  ScriptedOwners x;
  struct Case {
    const char* what;
    RejectionReason reason;
    ReuseStep step;
  };
  const Case c =
      GENERATE(Case{"index version moved", RejectionReason::stale_index_version, ReuseStep::validate_versions},
               Case{"pool generation moved", RejectionReason::stale_pool_generation, ReuseStep::validate_versions},
               Case{"rows not valid", RejectionReason::frontier_not_valid, ReuseStep::validate_versions},
               Case{"kernel ABI drift", RejectionReason::snapshot_evidence_drift, ReuseStep::freeze_snapshot});
  INFO(c.what);
  ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
  (void)expect_next<KeyLookup>(run);
  run.answer(std::vector<ReuseKeyAnswer>{x.key()});
  (void)expect_next<CandidateLookup>(run);
  run.answer(std::vector<CandidateReply>{x.candidate()});
  (void)expect_next<BlockLeaseAcquire>(run);
  ReuseLeaseAnswer leased = x.leases({LeaseId{5}, LeaseId{6}});
  if (c.reason == RejectionReason::stale_pool_generation) leased.pool_generations[1].generation = PoolGeneration{4};
  if (c.reason == RejectionReason::frontier_not_valid) leased.valid_frontier_tokens = 15;
  run.answer(std::vector<ReuseLeaseAnswer>{leased});
  (void)expect_next<IndexVersionRead>(run);
  run.answer(ReuseIndexVersion{c.reason == RejectionReason::stale_index_version ? 8u : 7u, TreeVersion{0}});
  if (c.step == ReuseStep::freeze_snapshot) {
    const std::vector<ReuseSnapshotRequest> snaps = expect_next<SnapshotFreeze>(run).requests;
    REQUIRE(snaps.size() == 1);
    run.answer(ScriptedOwners::freeze(snaps, 41, "another_kernel_abi"));
  } else {
    expect_done(run);  // rejected at the versions: no snapshot is asked
  }
  const ReuseBatchReceipt r = run.receipt();
  const ReuseRejectionReceipt& rej = rejection_of(r, 0);
  CHECK(rej.reason == c.reason);
  CHECK(rej.step == c.step);
  CHECK(bucket_of(rej.reason) == bucket_of(c.reason));
  CHECK(rej.leases_released == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
  CHECK(run.leases_to_release().blocks == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
}

TEST_CASE("reuse coordinator: refusals before the leases take nothing", "[reuse][coordinator]") {
  ScriptedOwners x;
  SECTION("authorization denied") {
    ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
    (void)expect_next<KeyLookup>(run);
    run.answer(std::vector<ReuseKeyAnswer>{ReuseKeyAnswer{
        AuthorizationDenied{make_error(ErrorCode::authorization_namespace_denied, "no")}, std::nullopt}});
    expect_done(run);
    const ReuseBatchReceipt r = run.receipt();
    CHECK(bucket_of(rejection_of(r, 0).reason) == ReuseBucket::authorization);
    CHECK(rejection_of(r, 0).step == ReuseStep::authorize);
    CHECK(run.leases_to_release().empty());
  }
  SECTION("the index refuses the lookup for authorization") {
    ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
    (void)expect_next<KeyLookup>(run);
    run.answer(std::vector<ReuseKeyAnswer>{x.key()});
    (void)expect_next<CandidateLookup>(run);
    run.answer(
        std::vector<CandidateReply>{CandidateReply(make_error(ErrorCode::authorization_stale_generation, "moved on"))});
    expect_done(run);
    const ReuseBatchReceipt r = run.receipt();
    CHECK(rejection_of(r, 0).reason == RejectionReason::stale_namespace_generation);
    CHECK(rejection_of(r, 0).step == ReuseStep::lookup_candidate);
  }
  SECTION("the allocator refuses a lease") {
    ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
    (void)expect_next<KeyLookup>(run);
    run.answer(std::vector<ReuseKeyAnswer>{x.key()});
    (void)expect_next<CandidateLookup>(run);
    run.answer(std::vector<CandidateReply>{x.candidate()});
    (void)expect_next<BlockLeaseAcquire>(run);
    run.answer(std::vector<ReuseLeaseAnswer>{ReuseLeaseAnswer{LeaseAnswer(LeaseRefused{"stale_physical"}), {}, 0}});
    expect_done(run);  // VERSION0
    const ReuseBatchReceipt r = run.receipt();
    CHECK(rejection_of(r, 0).reason == RejectionReason::lease_unavailable);
    CHECK(bucket_of(rejection_of(r, 0).reason) == ReuseBucket::lease);
    CHECK(run.leases_to_release().empty());
  }
  SECTION("a candidate from another namespace") {
    ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
    (void)expect_next<KeyLookup>(run);
    run.answer(std::vector<ReuseKeyAnswer>{x.key()});
    (void)expect_next<CandidateLookup>(run);
    ReuseCandidate other = x.happy.hit();
    other.namespace_name = kTenantB;
    run.answer(std::vector<CandidateReply>{CandidateReply(CandidateAnswer(other))});
    const ReuseBatchReceipt r = run.receipt();
    CHECK(rejection_of(r, 0).reason == RejectionReason::isolation_mismatch);
    CHECK(bucket_of(rejection_of(r, 0).reason) == ReuseBucket::incompatible);
  }
}

TEST_CASE("reuse coordinator: an owner that does not answer ends its ops with a typed error", "[reuse][coordinator]") {
  ScriptedOwners x;
  ReuseBatchRun run(ReuseBatch{{}, {x.op(), x.op()}}, kPools, kBlockTokens, kGroups);
  (void)expect_next<KeyLookup>(run);
  run.answer(std::vector<ReuseKeyAnswer>{x.key(), x.key()});
  (void)expect_next<CandidateLookup>(run);
  run.answer(std::vector<CandidateReply>{x.candidate(), x.candidate()});
  (void)expect_next<BlockLeaseAcquire>(run);
  run.answer(std::vector<ReuseLeaseAnswer>{x.leases({LeaseId{5}, LeaseId{6}}), x.leases({LeaseId{7}, LeaseId{8}})});
  (void)expect_next<IndexVersionRead>(run);
  run.failed(make_error(ErrorCode::rpc_failed, "prefix_index: down"));
  expect_done(run);
  const ReuseBatchReceipt r = run.receipt();
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(std::holds_alternative<Error>(r.outcomes[i]));
    CHECK(std::get<Error>(r.outcomes[i]).code == ErrorCode::rpc_failed);
  }
  // Both ops held leases: all four go back.
  CHECK(run.leases_to_release().blocks == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}, LeaseId{7}, LeaseId{8}});
  CHECK(run.funnel_outcomes().empty());
}

TEST_CASE("reuse coordinator: an owner answering fewer ops than asked is a typed error, not a crash",
          "[reuse][coordinator]") {
  ScriptedOwners x;
  ReuseBatchRun run(ReuseBatch{{}, {x.op(), x.op()}}, kPools, kBlockTokens, kGroups);
  (void)expect_next<KeyLookup>(run);
  run.answer(std::vector<ReuseKeyAnswer>{x.key()});
  const ReuseBatchReceipt r = run.receipt();
  REQUIRE(std::holds_alternative<Error>(r.outcomes.at(1)));
  CHECK(std::get<Error>(r.outcomes[1]).code == ErrorCode::invariant_violated);
  // The first op is still open: the receipt says the sequence stopped early.
  REQUIRE(std::holds_alternative<Error>(r.outcomes.at(0)));
}

namespace {

// Runs one radix op to its path stage; the blocks are leased as 5 and 6.
ReuseBatchRun radix_run_at_paths(const ScriptedOwners& x) {
  ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
  (void)expect_next<KeyLookup>(run);
  run.answer(std::vector<ReuseKeyAnswer>{x.key()});
  (void)expect_next<CandidateLookup>(run);
  run.answer(std::vector<CandidateReply>{CandidateReply(CandidateAnswer(radix_candidate(x)))});
  (void)expect_next<BlockLeaseAcquire>(run);
  run.answer(std::vector<ReuseLeaseAnswer>{x.leases({LeaseId{5}, LeaseId{6}})});
  return run;
}

}  // namespace

TEST_CASE("reuse coordinator: a radix candidate's grant covers its blocks and its path", "[reuse][coordinator]") {
  ScriptedOwners x;
  ReuseBatchRun run = radix_run_at_paths(x);
  // The blocks alone do not complete step 4: the path lease is asked next.
  const std::vector<ReusePathLeaseRequest> paths = expect_next<PathLeaseAcquire>(run).requests;
  REQUIRE(paths.size() == 1);
  CHECK(paths[0].path == radix_candidate(x).path_node_ids);
  const LeaseId path = OwnerLeaseId::path_lease(1).id();
  run.answer(std::vector<ReusePathLeaseAnswer>{ReusePathLeaseAnswer{path, ""}});
  (void)expect_next<IndexVersionRead>(run);
  run.answer(ReuseIndexVersion{7, TreeVersion{0}});
  run.answer(ScriptedOwners::freeze(expect_next<SnapshotFreeze>(run).requests, 41));
  const ReuseBatchReceipt r = run.receipt();
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(0)));
  const auto& receipt = std::get<ExecutableReuseReceipt>(r.outcomes[0]);
  CHECK(receipt.leases == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}, path});
  CHECK(receipt.path_node_ids == radix_candidate(x).path_node_ids);
  CHECK(run.leases_to_release().empty());
}

TEST_CASE("reuse coordinator: a path refused after the blocks were leased hands the blocks back",
          "[reuse][coordinator]") {
  ScriptedOwners x;
  ReuseBatchRun run = radix_run_at_paths(x);
  REQUIRE(expect_next<PathLeaseAcquire>(run).requests.size() == 1);
  SECTION("refused by the owner") {
    run.answer(
        std::vector<ReusePathLeaseAnswer>{ReusePathLeaseAnswer{std::nullopt, "node 9 left the tree since the lookup"}});
    const ReuseBatchReceipt r = run.receipt();
    const ReuseRejectionReceipt& rej = rejection_of(r, 0);
    CHECK(rej.reason == RejectionReason::lease_unavailable);
    CHECK(rej.step == ReuseStep::acquire_leases);
    CHECK(rej.leases_released == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
  }
  SECTION("the owner did not answer") {
    run.failed(make_error(ErrorCode::rpc_failed, "radix: down"));
    REQUIRE(std::holds_alternative<Error>(run.receipt().outcomes.at(0)));
  }
  CHECK(run.leases_to_release().blocks == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
  CHECK(run.leases_to_release().paths.empty());
}

TEST_CASE("reuse coordinator: release ops end their attempts at steps 9 and 10", "[reuse][coordinator]") {
  ScriptedOwners x;
  OpenReuseAttempts open;
  const ExecutableReuseReceipt chain = hold_one(x, open, false, 41);
  const ExecutableReuseReceipt radix = hold_one(x, open, true, 42);
  const ExecutableReuseReceipt unused = hold_one(x, open, false, 43);
  REQUIRE(open.size() == 3);
  REQUIRE(open.validate().ok());

  // Executed, executed, not executed, and one no session holds.
  ReuseBatchRun run(ReuseBatch{{},
                               {ReuseReleaseOp{ExecutionSnapshotVersion{41}, true}, x.op(),
                                ReuseReleaseOp{ExecutionSnapshotVersion{42}, true},
                                ReuseReleaseOp{ExecutionSnapshotVersion{43}, false},
                                ReuseReleaseOp{ExecutionSnapshotVersion{99}, true}}},
                    kPools, kBlockTokens, kGroups);
  run.bind(open, SessionId{1});
  CHECK(open.size() == 0);  // taken: a second release of any of them is refused
  // Block leases to the allocator, then path leases to the radix index.
  CHECK(expect_next<BlockLeaseReturn>(run).leases ==
        std::vector<LeaseId>{LeaseId{411}, LeaseId{412}, LeaseId{421}, LeaseId{422}, LeaseId{431}, LeaseId{432}});
  // The allocator had lost lease 412 (say, reclaimed); everything else was held.
  run.answer(std::vector<uint8_t>{1, 0, 1, 1, 1, 1});
  CHECK(expect_next<PathLeaseReturn>(run).leases == std::vector<LeaseId>{OwnerLeaseId::path_lease(42).id()});
  run.answer(std::vector<uint8_t>{1});
  // The acquire op between them still runs its own sequence.
  CHECK(expect_next<KeyLookup>(run).requests.size() == 1);

  const ReuseBatchReceipt r = run.receipt();
  const auto& first = std::get<ReuseReleaseReceipt>(r.outcomes.at(0));
  CHECK(first.snapshot == ExecutionSnapshotVersion{41});
  CHECK(first.released == std::vector<LeaseId>{LeaseId{411}});
  CHECK(first.refused == std::vector<LeaseId>{LeaseId{412}});
  CHECK_FALSE(first.completed);  // executed, but step 10 could not account for every lease
  const auto& second = std::get<ReuseReleaseReceipt>(r.outcomes.at(2));
  CHECK(second.released == radix.leases);
  CHECK(second.completed);
  const auto& third = std::get<ReuseReleaseReceipt>(r.outcomes.at(3));
  CHECK(third.released == unused.leases);
  CHECK_FALSE(third.completed);
  REQUIRE(std::holds_alternative<Error>(r.outcomes.at(4)));
  CHECK(std::get<Error>(r.outcomes[4]).code == ErrorCode::reuse_attempt_closed);
  (void)chain;

  // Funnel: 41 and 42 executed (hits), 43 failed at step 9.
  const std::vector<FunnelOutcome> f = run.funnel_outcomes();
  REQUIRE(f.size() == 3);
  CHECK(f[0].executed);
  CHECK(f[1].executed);
  CHECK_FALSE(f[2].executed);
  CHECK(f[2].reason == RejectionReason::execution_failed);
  CHECK(run.leases_to_release().empty());
}

TEST_CASE("reuse coordinator: a session at its open-attempt limit gets a typed error per acquire",
          "[reuse][coordinator]") {
  ScriptedOwners x;
  OpenReuseAttempts open;
  for (uint64_t v = 1; v <= OpenReuseAttempts::kPerSession; ++v) (void)hold_one(x, open, false, v);
  CHECK(open.room(SessionId{1}) == 0);
  CHECK(open.room(SessionId{2}) == OpenReuseAttempts::kPerSession);
  ReuseBatchRun full(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
  full.bind(open, SessionId{1});
  expect_done(full);  // refused before any owner is asked
  REQUIRE(std::holds_alternative<Error>(full.receipt().outcomes.at(0)));
  CHECK(open.end_session(SessionId{1}) == OpenReuseAttempts::kPerSession);
  CHECK(open.size() == 0);
  REQUIRE(open.validate().ok());
}

TEST_CASE("reuse coordinator: a named successor is published before the leases go back", "[reuse][coordinator]") {
  ScriptedOwners x;
  OpenReuseAttempts open;
  const ExecutableReuseReceipt a = hold_one(x, open, false, 51);
  const ExecutableReuseReceipt b = hold_one(x, open, true, 52);
  const ExecutableReuseReceipt c = hold_one(x, open, false, 53);
  const ExecutableReuseReceipt d = hold_one(x, open, false, 54);
  REQUIRE(a.covered_interval == TokenInterval{0, 16});
  const std::vector<TokenId> tokens(48, 7);
  auto named = [&](const ExecutableReuseReceipt& r, bool executed, uint32_t end_block) {
    return ReuseReleaseOp{r.execution_snapshot_version, executed, ReuseSuccessor{RequestId{900}, tokens, end_block}};
  };

  SECTION("malformed successors: typed errors, and their attempts stay open") {
    ReuseBatchRun run(ReuseBatch{{}, {named(a, false, 3), named(b, true, 0), named(c, true, 4)}}, kPools, kBlockTokens,
                      kGroups);
    run.bind(open, SessionId{1});
    expect_done(run);  // no successor to publish, no lease to release
    const ReuseBatchReceipt r = run.receipt();
    for (const ReuseOutcome& o : r.outcomes) {
      REQUIRE(std::holds_alternative<Error>(o));
      CHECK(std::get<Error>(o).field == "successor");
    }
    CHECK(open.size() == 4);  // nothing was taken
    CHECK(open.validate().ok());
  }
  SECTION("published, nothing new, refused by the index, and a plain release in one batch") {
    ReuseBatchRun run(ReuseBatch{{},
                                 {named(a, true, 3), named(b, true, 2), named(c, true, 3),
                                  ReuseReleaseOp{d.execution_snapshot_version, true}}},
                      kPools, kBlockTokens, kGroups);
    run.bind(open, SessionId{1});
    CHECK(open.size() == 0);
    // One publish op per named successor, in the attempt's own namespace, from block 0.
    const std::vector<PrefixOp> pubs = expect_next<SuccessorPublish>(run).batch.ops;
    REQUIRE(pubs.size() == 3);
    for (const PrefixOp& p : pubs) {
      REQUIRE(std::holds_alternative<PrefixPublishOp>(p));
      CHECK(std::get<PrefixPublishOp>(p).namespace_name == kTenantA);
      CHECK(std::get<PrefixPublishOp>(p).first_block == 0);
      CHECK(std::get<PrefixPublishOp>(p).request == RequestId{900});
    }
    CHECK(std::get<PrefixPublishOp>(pubs[0]).end_block == 3);
    PrefixBatchReceipt answered;
    answered.outcomes.push_back(PrefixPublishReceipt{RequestId{900}, 4, 0, 2, 9});  // after the generation read (0)
    answered.outcomes.push_back(PrefixPublishReceipt{RequestId{900}, 0, 0, 4, 0});  // nothing new became visible
    answered.outcomes.push_back(make_error(ErrorCode::row_not_valid, "rows 16..48 are not committed", "rows"));
    run.answer(Result<PrefixBatchReceipt>(answered));
    CHECK(expect_next<BlockLeaseReturn>(run).leases.size() == 8);
    run.answer(std::vector<uint8_t>(8, 1));
    CHECK(expect_next<PathLeaseReturn>(run).leases.size() == 1);
    run.answer(std::vector<uint8_t>(1, 1));
    const ReuseBatchReceipt r = run.receipt();
    REQUIRE(r.outcomes.size() == 4);
    for (const ReuseOutcome& o : r.outcomes) REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(o));
    const auto& published = std::get<ReuseReleaseReceipt>(r.outcomes[0]);
    CHECK(published.published_successor);
    CHECK(published.completed);
    CHECK(published.successor == PrefixPublishReceipt{RequestId{900}, 4, 0, 2, 9});
    CHECK(published.released == a.leases);
    const auto& unchanged = std::get<ReuseReleaseReceipt>(r.outcomes[1]);
    CHECK_FALSE(unchanged.published_successor);
    CHECK(unchanged.completed);
    CHECK(unchanged.released == b.leases);
    const auto& refused = std::get<ReuseReleaseReceipt>(r.outcomes[2]);
    REQUIRE(refused.successor_refused.has_value());
    CHECK(refused.successor_refused->code == ErrorCode::row_not_valid);
    CHECK_FALSE(refused.successor.has_value());
    CHECK(refused.completed);
    CHECK(refused.released == c.leases);
    const auto& plain = std::get<ReuseReleaseReceipt>(r.outcomes[3]);
    CHECK_FALSE(plain.successor.has_value());
    CHECK_FALSE(plain.successor_refused.has_value());
    CHECK(plain.completed);
    // Every attempt ended as an executed hit (0x0CF).
    CHECK(run.funnel_outcomes().size() == 4);
  }
  SECTION("the index owner did not answer: every successor is refused, the leases still go back") {
    ReuseBatchRun run(ReuseBatch{{}, {named(a, true, 3)}}, kPools, kBlockTokens, kGroups);
    run.bind(open, SessionId{1});
    REQUIRE(expect_next<SuccessorPublish>(run).batch.ops.size() == 1);
    run.answer(Result<PrefixBatchReceipt>(make_error(ErrorCode::rpc_failed, "prefix_index: down")));
    const std::vector<LeaseId> blocks = expect_next<BlockLeaseReturn>(run).leases;
    run.answer(std::vector<uint8_t>(blocks.size(), 1));
    const ReuseBatchReceipt r = run.receipt();
    const auto& done = std::get<ReuseReleaseReceipt>(r.outcomes.at(0));
    REQUIRE(done.successor_refused.has_value());
    CHECK(done.successor_refused->code == ErrorCode::rpc_failed);
    CHECK(done.released == a.leases);
    CHECK(done.completed);
  }
}

TEST_CASE("reuse coordinator: an op whose rows land in a request slot waits for the slot's mapped frontier (step 7)",
          "[reuse][coordinator]") {
  ScriptedOwners x;
  // The happy scenario's hit: one bundle of 16 tokens, read from request 5's slot.
  ReuseAcquireOp slot_op = x.op();
  slot_op.await_slot_mapping = true;
  slot_op.slot_request = RequestId{5};
  const uint32_t hit_end = std::get<ReuseCandidate>(x.happy.candidate).covered_interval.end;
  REQUIRE(hit_end == kBlockTokens);
  // Runs the two ops (the slot op first, a paged op second) to the mapping stage.
  const auto run_to_mapping = [&](ReuseBatchRun& run) {
    (void)expect_next<KeyLookup>(run);
    run.answer(std::vector<ReuseKeyAnswer>{x.key(), x.key()});
    (void)expect_next<CandidateLookup>(run);
    run.answer(std::vector<CandidateReply>{x.candidate(), x.candidate()});
    (void)expect_next<BlockLeaseAcquire>(run);
    run.answer(std::vector<ReuseLeaseAnswer>{x.leases({LeaseId{5}, LeaseId{6}}), x.leases({LeaseId{7}, LeaseId{8}})});
    (void)expect_next<IndexVersionRead>(run);
    run.answer(ReuseIndexVersion{7, TreeVersion{0}});
    const SlotFrontierRead read = expect_next<SlotFrontierRead>(run);
    // Only the slot op asks the mapper, for its own slot and the hit's end.
    REQUIRE(read.requests.size() == 1);
    CHECK(read.requests[0].request == RequestId{5});
    CHECK(read.requests[0].required_tokens == hit_end);
  };
  // The mapper's reply for the slot op, then the snapshots of the `open` ops
  // still open after it; the batch's receipt.
  const auto finish = [](ReuseBatchRun& run, SlotFrontierReply reply, size_t open) {
    run.answer(std::vector<SlotFrontierReply>{std::move(reply)});
    const std::vector<ReuseSnapshotRequest> snaps = expect_next<SnapshotFreeze>(run).requests;
    REQUIRE(snaps.size() == open);
    run.answer(ScriptedOwners::freeze(snaps, 41));
    return run.receipt();
  };
  SECTION("a frontier that covers the hit: both ops are executable") {
    const uint32_t ready = GENERATE(16u, 17u, 64u);
    ReuseBatchRun run(ReuseBatch{{}, {slot_op, x.op()}}, kPools, kBlockTokens, kGroups);
    run_to_mapping(run);
    const ReuseBatchReceipt r = finish(run, SlotFrontierReply(ready), 2);
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(0)));
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(1)));
    CHECK(run.leases_to_release().empty());
  }
  SECTION("a frontier short of the hit: mapping_lag, its leases back, the paged op unaffected") {
    const uint32_t ready = GENERATE(0u, 1u, 15u);
    ReuseBatchRun run(ReuseBatch{{}, {slot_op, x.op()}}, kPools, kBlockTokens, kGroups);
    run_to_mapping(run);
    const ReuseBatchReceipt r = finish(run, SlotFrontierReply(ready), 1);
    const ReuseRejectionReceipt& rej = rejection_of(r, 0);
    CHECK(rej.reason == RejectionReason::mapping_frontier_lag);
    CHECK(rej.step == ReuseStep::await_mapping);
    CHECK(bucket_of(rej.reason) == ReuseBucket::mapping_lag);
    CHECK(rej.leases_released == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
    CHECK(run.leases_to_release().blocks == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
    CHECK(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(1)));
  }
  SECTION("the mapper refuses the slot (not the session's request): the op's error, its leases back") {
    ReuseBatchRun run(ReuseBatch{{}, {slot_op, x.op()}}, kPools, kBlockTokens, kGroups);
    run_to_mapping(run);
    const ReuseBatchReceipt r = finish(run, SlotFrontierReply(make_error(ErrorCode::not_owner, "no", "slot")), 1);
    REQUIRE(std::holds_alternative<Error>(r.outcomes.at(0)));
    CHECK(std::get<Error>(r.outcomes[0]).code == ErrorCode::not_owner);
    CHECK(run.leases_to_release().blocks == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
    CHECK(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(1)));
  }
  SECTION("a mapper answering nothing ends the slot op with a typed error") {
    ReuseBatchRun run(ReuseBatch{{}, {slot_op, x.op()}}, kPools, kBlockTokens, kGroups);
    run_to_mapping(run);
    run.answer(std::vector<SlotFrontierReply>{});
    run.answer(ScriptedOwners::freeze(expect_next<SnapshotFreeze>(run).requests, 41));
    const ReuseBatchReceipt r = run.receipt();
    REQUIRE(std::holds_alternative<Error>(r.outcomes.at(0)));
    CHECK(std::get<Error>(r.outcomes[0]).code == ErrorCode::invariant_violated);
    CHECK(run.leases_to_release().blocks == std::vector<LeaseId>{LeaseId{5}, LeaseId{6}});
  }
}
