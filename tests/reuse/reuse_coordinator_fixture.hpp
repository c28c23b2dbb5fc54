#pragma once
// Scripted owner answers for ReuseBatchRun (services/reuse/reuse_batch_run.hpp),
// built from the [reuse] fixture's happy scenario (a 32-token request whose
// first 16 tokens are cached as one bundle of two groups, pools 1 and 2 at
// generation 3): the [reuse][coordinator] tests and their property tests.
#include <catch2/catch.hpp>

#include "services/reuse/reuse_batch_run.hpp"
#include "tests/reuse/reuse_fixture.hpp"

namespace kvrt::test {

// The run's next request, which must be a T: the stage the test expects
// next (ReuseBatchRun::next() skips a stage with no op left at it).
template <class T>
T expect_next(ReuseBatchRun& run) {
  std::optional<ReuseBatchRun::Request> request = run.next();
  REQUIRE(request.has_value());
  INFO("the run asked for stage " << request->index());
  REQUIRE(std::holds_alternative<T>(*request));
  return std::get<T>(std::move(*request));
}
// The run has nothing more to ask.
inline void expect_done(ReuseBatchRun& run) {
  std::optional<ReuseBatchRun::Request> request = run.next();
  INFO("the run asked for stage " << (request ? static_cast<int>(request->index()) : -1));
  CHECK_FALSE(request.has_value());
}

// Walks a run stage by stage for a test that decides per stage whether it
// expects an op there: take<T>() answers the run's request when it is a T,
// and otherwise keeps it for the stage it belongs to.
struct StageCursor {
  ReuseBatchRun& run;
  std::optional<ReuseBatchRun::Request> held{};
  bool done = false;
  template <class T>
  std::optional<T> take() {
    if (!held && !done) {
      held = run.next();
      done = !held.has_value();
    }
    if (!held || !std::holds_alternative<T>(*held)) return std::nullopt;
    T t = std::get<T>(std::move(*held));
    held.reset();
    return t;
  }
  // Every request was taken and the run has none left.
  bool finished() {
    if (!held && !done) {
      held = run.next();
      done = !held.has_value();
    }
    return done && !held;
  }
};

inline const std::vector<PoolGenerationRef> kPools{{PoolId{1}, PoolGeneration{3}}, {PoolId{2}, PoolGeneration{3}}};
inline constexpr uint32_t kBlockTokens = 16;
inline constexpr uint32_t kGroups = 2;

struct ScriptedOwners {
  AuthorityFixture f = AuthorityFixture::make();
  AuthorizedLookup grant = f.grant("worker-a", kTenantA);
  ReuseScenario happy = happy_scenario(f.authority, grant);

  ReuseAcquireOp op() const {
    const auto& tokens = happy.key.manifest.covered_token_ids;
    return ReuseAcquireOp{kTenantA,
                          RequestId{77},
                          RequestGeneration{1},
                          std::vector<TokenId>(tokens.begin(), tokens.end()),
                          LogitsPath::logits_required,
                          true};
  }
  ReuseKeyAnswer key() const { return ReuseKeyAnswer{happy.authorization, happy.key}; }
  CandidateReply candidate() const { return CandidateReply(happy.candidate); }
  ReuseLeaseAnswer leases(std::vector<LeaseId> ids) const {
    LeaseGrant g{std::move(ids), std::get<ReuseCandidate>(happy.candidate).physical_handles, {}};
    return ReuseLeaseAnswer{LeaseAnswer(g), kPools, 16};
  }
  // What the executor freezes for a request: the handles and interval as
  // asked, this executor's ABI (the consumer's unless `abi` says otherwise).
  static std::vector<SnapshotAnswer> freeze(const std::vector<ReuseSnapshotRequest>& reqs, uint64_t first_version,
                                            std::string abi = "") {
    std::vector<SnapshotAnswer> out;
    for (const ReuseSnapshotRequest& r : reqs) {
      const ExecutionSnapshotVersion v{first_version++};
      out.push_back(SnapshotAnswer{v, v, abi.empty() ? r.planned_kernel_abi_id : abi, r.planned_kernel_abi_id,
                                   r.handles, r.interval});
    }
    return out;
  }
};

// The happy scenario's candidate as the radix owner names it: a path.
inline ReuseCandidate radix_candidate(const ScriptedOwners& x) {
  ReuseCandidate c = std::get<ReuseCandidate>(x.happy.candidate);
  c.source = ReuseSource::radix_index;
  c.path_node_ids = {RadixNodeId{2}, RadixNodeId{9}};
  return c;
}

// Runs one op of `x` to its receipt (radix when `radix`) and holds the
// attempt open for session 1; returns the receipt.
inline ExecutableReuseReceipt hold_one(const ScriptedOwners& x, OpenReuseAttempts& open, bool radix,
                                       uint64_t snapshot) {
  ReuseBatchRun run(ReuseBatch{{}, {x.op()}}, kPools, kBlockTokens, kGroups);
  run.bind(open, SessionId{1});
  (void)expect_next<KeyLookup>(run);
  run.answer(std::vector<ReuseKeyAnswer>{x.key()});
  (void)expect_next<CandidateLookup>(run);
  run.answer(std::vector<CandidateReply>{
      CandidateReply(CandidateAnswer(radix ? radix_candidate(x) : std::get<ReuseCandidate>(x.happy.candidate)))});
  (void)expect_next<BlockLeaseAcquire>(run);
  run.answer(std::vector<ReuseLeaseAnswer>{x.leases({LeaseId{snapshot * 10 + 1}, LeaseId{snapshot * 10 + 2}})});
  if (radix) {
    REQUIRE(expect_next<PathLeaseAcquire>(run).requests.size() == 1);
    run.answer(std::vector<ReusePathLeaseAnswer>{ReusePathLeaseAnswer{OwnerLeaseId::path_lease(snapshot).id(), ""}});
  }
  (void)expect_next<IndexVersionRead>(run);
  run.answer(ReuseIndexVersion{7, TreeVersion{0}});
  run.answer(ScriptedOwners::freeze(expect_next<SnapshotFreeze>(run).requests, snapshot));
  const ReuseBatchReceipt r = run.receipt();
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(r.outcomes.at(0)));
  for (ReuseAttempt& a : run.take_receipt_attempts()) REQUIRE(open.hold(SessionId{1}, std::move(a)).ok());
  return std::get<ExecutableReuseReceipt>(r.outcomes[0]);
}

}  // namespace kvrt::test
