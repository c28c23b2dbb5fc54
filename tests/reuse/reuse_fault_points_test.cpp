// The reuse coordinator's fault points (ReuseBatchRun::fault_point_names):
// one after each of steps 1-9 of 0x0CD. A point of steps 1-8 that fires ends
// its op right there with fault_injected and lists every lease the op had
// taken for release, so the owners end as if the attempt had never started
// (0x04F); the stages after it never see the op, and a point armed for its
// nth reach spares the ops before. After step 9 nothing is published yet: the
// release op's successor is dropped and its leases still go back.
#include <algorithm>
#include <set>

#include "tests/reuse/reuse_coordinator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct ScriptedRun {
  std::vector<size_t> stages;  // the Request alternatives asked for, in order
  ReuseBatchReceipt receipt;
  ReuseBatchRun::LeaseReturn released;
  std::vector<ReuseAttempt> held;
};

// Answers every stage of an acquire-only batch as the happy scenario's owners
// would: op k's block leases are 10k+1 and 10k+2, its path lease k.
ScriptedRun drive(const ScriptedOwners& x, size_t ops, bool radix, FaultPoints* faults) {
  ReuseBatch batch{{}, {}};
  for (size_t k = 0; k < ops; ++k) batch.ops.push_back(x.op());
  OpenReuseAttempts open;
  ReuseBatchRun run(std::move(batch), kPools, kBlockTokens, kGroups, faults);
  run.bind(open, SessionId{1});
  ScriptedRun out;
  while (std::optional<ReuseBatchRun::Request> request = run.next()) {
    out.stages.push_back(request->index());
    if (auto* keys = std::get_if<KeyLookup>(&*request)) {
      run.answer(std::vector<ReuseKeyAnswer>(keys->requests.size(), x.key()));
    } else if (auto* lookups = std::get_if<CandidateLookup>(&*request)) {
      const ReuseCandidate c = radix ? radix_candidate(x) : std::get<ReuseCandidate>(x.happy.candidate);
      run.answer(std::vector<CandidateReply>(lookups->lookups.size(), CandidateReply(CandidateAnswer(c))));
    } else if (auto* leases = std::get_if<BlockLeaseAcquire>(&*request)) {
      std::vector<ReuseLeaseAnswer> answers;
      for (uint64_t k = 0; k < leases->requests.size(); ++k)
        answers.push_back(x.leases({LeaseId{10 * k + 1}, LeaseId{10 * k + 2}}));
      run.answer(answers);
    } else if (auto* paths = std::get_if<PathLeaseAcquire>(&*request)) {
      std::vector<ReusePathLeaseAnswer> answers;
      for (uint64_t k = 0; k < paths->requests.size(); ++k)
        answers.push_back(ReusePathLeaseAnswer{OwnerLeaseId::path_lease(k + 1).id(), ""});
      run.answer(answers);
    } else if (std::holds_alternative<IndexVersionRead>(*request)) {
      run.answer(ReuseIndexVersion{7, TreeVersion{0}});
    } else if (auto* freeze = std::get_if<SnapshotFreeze>(&*request)) {
      run.answer(ScriptedOwners::freeze(freeze->requests, 100));
    } else {
      FAIL("an acquire-only batch asked for stage " << request->index());
    }
  }
  out.receipt = run.receipt();
  out.released = run.leases_to_release();
  out.held = run.take_receipt_attempts();
  return out;
}

size_t stage_index(const ReuseBatchRun::Request& r) { return r.index(); }
template <class T>
size_t stage() {
  return stage_index(ReuseBatchRun::Request(T{}));
}

}  // namespace

TEST_CASE("the reuse coordinator names one fault point after each of steps 1-9", "[reuse][coordinator][fault]") {
  const std::vector<std::string> names = ReuseBatchRun::fault_point_names();
  REQUIRE(names.size() == 9);
  for (uint8_t s = 1; s <= 9; ++s) CHECK(names[s - 1] == "after_" + std::string(to_string(static_cast<ReuseStep>(s))));
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
}

TEST_CASE("a fired reuse fault point ends the op after its step and hands back every lease it took",
          "[reuse][coordinator][fault]") {
  const ScriptedOwners x;
  for (bool radix : {false, true}) {
    // Without faults the op ends in a receipt holding every lease.
    const ScriptedRun clean = drive(x, 1, radix, nullptr);
    REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(clean.receipt.outcomes.at(0)));
    REQUIRE(clean.held.size() == 1);
    CHECK(clean.released.empty());
    const std::vector<LeaseId> all_leases = clean.held[0].acquired_leases();
    CHECK(all_leases.size() == (radix ? 3u : 2u));

    for (uint8_t s = 1; s <= 8; ++s) {
      const ReuseStep step = static_cast<ReuseStep>(s);
      INFO((radix ? "radix" : "hash chain") << " candidate, fault after step " << int(s) << " " << to_string(step));
      FaultPoints faults;
      faults.arm("after_" + std::string(to_string(step)));
      const ScriptedRun r = drive(x, 1, radix, &faults);
      CHECK(faults.fired().at("after_" + std::string(to_string(step))) == 1);
      REQUIRE(std::holds_alternative<Error>(r.receipt.outcomes.at(0)));
      const Error& e = std::get<Error>(r.receipt.outcomes[0]);
      CHECK(e.code == ErrorCode::fault_injected);
      CHECK(e.field == to_string(step));
      CHECK(r.held.empty());  // no attempt stays open for a release op
      // Leases exist from step 4 on; every one taken goes back, none twice.
      std::vector<LeaseId> released = r.released.blocks;
      released.insert(released.end(), r.released.paths.begin(), r.released.paths.end());
      std::sort(released.begin(), released.end());
      std::vector<LeaseId> expected = step >= ReuseStep::acquire_leases ? all_leases : std::vector<LeaseId>{};
      std::sort(expected.begin(), expected.end());
      CHECK(released == expected);
      // The stages after the fault never see the op.
      const auto asked = [&](size_t stage_id) {
        return std::find(r.stages.begin(), r.stages.end(), stage_id) != r.stages.end();
      };
      CHECK(asked(stage<CandidateLookup>()) == (step >= ReuseStep::lookup_candidate));
      CHECK(asked(stage<BlockLeaseAcquire>()) == (step >= ReuseStep::acquire_leases));
      CHECK(asked(stage<IndexVersionRead>()) == (step >= ReuseStep::validate_versions));
      CHECK(asked(stage<SnapshotFreeze>()) == (step >= ReuseStep::freeze_snapshot));
    }
  }
}

TEST_CASE("a reuse fault point armed for its nth reach spares the ops before it", "[reuse][coordinator][fault]") {
  const ScriptedOwners x;
  FaultPoints faults;
  faults.arm("after_acquire_leases", 2);
  const ScriptedRun r = drive(x, 3, /*radix=*/false, &faults);
  REQUIRE(r.receipt.outcomes.size() == 3);
  CHECK(std::holds_alternative<ExecutableReuseReceipt>(r.receipt.outcomes[0]));
  REQUIRE(std::holds_alternative<Error>(r.receipt.outcomes[1]));
  CHECK(std::get<Error>(r.receipt.outcomes[1]).code == ErrorCode::fault_injected);
  CHECK(std::holds_alternative<ExecutableReuseReceipt>(r.receipt.outcomes[2]));
  CHECK(r.held.size() == 2);
  // Exactly op 1's two block leases go back.
  CHECK(r.released.blocks == std::vector<LeaseId>{LeaseId{11}, LeaseId{12}});
  CHECK(r.released.paths.empty());
  CHECK_FALSE(faults.any_armed());
}

TEST_CASE("a reuse fault point after step 9 drops the successor and still releases every lease",
          "[reuse][coordinator][fault]") {
  ScriptedOwners x;
  OpenReuseAttempts open;
  const ExecutableReuseReceipt a = hold_one(x, open, false, 61);
  const ExecutableReuseReceipt b = hold_one(x, open, false, 62);
  const std::vector<TokenId> tokens(48, 7);
  auto named = [&](const ExecutableReuseReceipt& r) {
    return ReuseReleaseOp{r.execution_snapshot_version, true, ReuseSuccessor{RequestId{900}, tokens, 3}};
  };
  FaultPoints faults;
  faults.arm("after_execute", 2);  // the second release op's
  ReuseBatchRun run(ReuseBatch{{}, {named(a), named(b)}}, kPools, kBlockTokens, kGroups, &faults);
  run.bind(open, SessionId{1});
  // Only the first op's successor reaches the index.
  const std::vector<PrefixOp> pubs = expect_next<SuccessorPublish>(run).batch.ops;
  REQUIRE(pubs.size() == 1);
  CHECK(faults.fired().at("after_execute") == 1);
  PrefixBatchReceipt answered;
  answered.outcomes.push_back(PrefixPublishReceipt{RequestId{900}, 4, 0, 2, 9});
  run.answer(Result<PrefixBatchReceipt>(answered));
  const std::vector<LeaseId> blocks = expect_next<BlockLeaseReturn>(run).leases;
  CHECK(blocks.size() == a.leases.size() + b.leases.size());
  run.answer(std::vector<uint8_t>(blocks.size(), 1));
  expect_done(run);
  const ReuseBatchReceipt r = run.receipt();
  REQUIRE(r.outcomes.size() == 2);
  const auto& published = std::get<ReuseReleaseReceipt>(r.outcomes[0]);
  CHECK(published.published_successor);
  const auto& dropped = std::get<ReuseReleaseReceipt>(r.outcomes[1]);
  CHECK_FALSE(dropped.published_successor);
  CHECK_FALSE(dropped.successor.has_value());
  REQUIRE(dropped.successor_refused.has_value());
  CHECK(dropped.successor_refused->code == ErrorCode::fault_injected);
  CHECK(dropped.completed);  // a plain release: step 10 without the successor
  CHECK(dropped.released == b.leases);
  CHECK(open.size() == 0);
  CHECK(run.leases_to_release().empty());
}
