// [reuse][coordinator][property] Seeded random batches through ReuseBatchRun
// (services/reuse/reuse_batch_run.hpp) against simulated owners. Each op
// is a hash-chain or radix candidate request, some of them read from a
// request slot (await_slot_mapping, virtual reservations); each owner answers
// at random: grant or deny, hit or miss, lease or refuse (blocks, then the
// path), a moved version, a slot frontier short of the hit or a slot the
// mapper refuses, a drifted kernel ABI, or no answer at all (a transport
// failure of the whole stage). The simulated owners record every lease they
// grant and which op it went to. After the run:
//   - every op has exactly one outcome, and it is the one the script chose
//     (receipt / the chosen rejection reason / a typed error);
//   - lease conservation: every granted lease is either in exactly one
//     receipt, or in leases_to_release(), never both, never lost; path
//     leases are LeaseOwner::radix_index ids and go to the path list, block leases to
//     the block list;
//   - a receipt's leases are exactly those granted to its op;
//   - funnel outcomes are one per rejection, and the receipts' attempts are
//     handed over for their release ops.
// The seed is printed on failure.
#include <catch2/catch.hpp>

// GCC 12 reports std::variant's move constructor as reading members it has
// not initialised once these scripts are inlined into one function (a known
// false positive of -Wmaybe-uninitialized with std::variant); every value
// here is fully constructed.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <map>
#include <random>
#include <set>

#include "tests/reuse/reuse_coordinator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// What the script decides for one op.
enum class Fate : uint8_t {
  receipt,
  denied,          // step 1
  miss,            // step 3
  blocks_refused,  // step 4, allocator
  path_refused,    // step 4, radix owner (radix ops only)
  version_moved,   // step 5
  mapping_lag,     // step 7, the slot's frontier short of the hit (slot ops only)
  slot_refused,    // step 7, the mapper refuses the slot: a typed error (slot ops only)
  abi_drift,       // step 8
};

struct ScriptedOp {
  bool radix = false;
  bool slot = false;  // the rows land in a request slot: step 7 asks the mapper
  Fate fate = Fate::receipt;
  uint32_t frontier = 0;  // the slot's published frontier the mapper answers [tokens]
};

}  // namespace

TEST_CASE("reuse coordinator property: every op ends once and no lease is lost or doubled",
          "[reuse][coordinator][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 41));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  AuthorityFixture f = AuthorityFixture::make();
  const AuthorizedLookup grant = f.grant("worker-a", kTenantA);
  const ReuseScenario happy = happy_scenario(f.authority, grant);
  const auto& manifest_tokens = happy.key.manifest.covered_token_ids;

  const size_t n = 1 + rng() % 12;
  std::vector<ScriptedOp> script(n);
  ReuseBatch batch;
  const uint32_t hit_end = std::get<ReuseCandidate>(happy.candidate).covered_interval.end;
  for (size_t i = 0; i < n; ++i) {
    ScriptedOp& s = script[i];
    s.radix = rng() % 2 == 0;
    s.slot = rng() % 3 == 0;
    const Fate fates[] = {Fate::receipt,       Fate::receipt,   Fate::denied,       Fate::miss,
                          Fate::blocks_refused, Fate::path_refused, Fate::version_moved, Fate::mapping_lag,
                          Fate::slot_refused,  Fate::abi_drift};
    s.fate = fates[rng() % 10];
    if ((s.fate == Fate::path_refused && !s.radix) ||
        ((s.fate == Fate::mapping_lag || s.fate == Fate::slot_refused) && !s.slot))
      s.fate = Fate::receipt;
    // A ready slot covers the hit (or more); a lagging one stops short of it.
    s.frontier = s.fate == Fate::mapping_lag ? static_cast<uint32_t>(rng() % hit_end)
                                             : hit_end + static_cast<uint32_t>(rng() % 64);
    ReuseAcquireOp op{kTenantA, RequestId{77}, RequestGeneration{1},
                      std::vector<TokenId>(manifest_tokens.begin(), manifest_tokens.end()),
                      LogitsPath::logits_required, false};
    op.await_slot_mapping = s.slot;
    op.slot_request = RequestId{s.slot ? 500 + i : 0};
    batch.ops.push_back(std::move(op));
  }
  // A whole stage may fail in transport: which one (0 = none).
  const int failing_stage = rng() % 4 == 0 ? static_cast<int>(1 + rng() % 7) : 0;
  INFO("ops " << n << ", failing stage " << failing_stage);

  ReuseBatchRun run(batch, kPools, 16, 2);
  std::map<uint64_t, size_t> granted_to;  // lease value -> op index
  uint64_t next_block_lease = 100, next_path_lease = 1;
  std::vector<size_t> at;  // the ops the current stage's requests are for, in order

  // Which ops are asked at a stage is the coordinator's business; the
  // simulated owners answer by the script of the op each request belongs
  // to, which they identify by order among the ops still expected to ask.
  auto expected = [&](auto pred) {
    std::vector<size_t> out;
    for (size_t i = 0; i < n; ++i)
      if (pred(i)) out.push_back(i);
    return out;
  };
  std::set<size_t> ended;  // ops the script (or a failed stage) has ended so far
  auto alive = [&](size_t i) { return !ended.contains(i); };
  // The run skips a stage no op is left at: each stage below takes the
  // run's request when it is that stage's, and otherwise expects no op there.
  StageCursor cursor{run};

  // Stage 1: keys.
  {
    const auto reqs = cursor.take<KeyLookup>().value_or(KeyLookup{}).requests;
    at = expected(alive);
    REQUIRE(reqs.size() == at.size());
    if (failing_stage == 1 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "authorization down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      std::vector<ReuseKeyAnswer> answers;
      for (size_t i : at) {
        if (script[i].fate == Fate::denied) {
          answers.push_back({AuthorizationDenied{make_error(ErrorCode::authorization_namespace_denied, "no")}, {}});
          ended.insert(i);
        } else {
          answers.push_back({happy.authorization, happy.key});
        }
      }
      run.answer(answers);
    }
  }
  // Stage 2: candidates.
  {
    const auto reqs = cursor.take<CandidateLookup>().value_or(CandidateLookup{}).lookups;
    at = expected(alive);
    REQUIRE(reqs.size() == at.size());
    if (failing_stage == 2 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "index down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      std::vector<CandidateReply> answers;
      for (size_t i : at) {
        if (script[i].fate == Fate::miss) {
          answers.push_back(CandidateReply(CandidateAnswer(IndexMiss{})));
          ended.insert(i);
          continue;
        }
        ReuseCandidate c = std::get<ReuseCandidate>(happy.candidate);
        if (script[i].radix) {
          c.source = ReuseSource::radix_index;
          c.path_node_ids = {RadixNodeId{3}, RadixNodeId{4 + i}};
        }
        answers.push_back(CandidateReply(CandidateAnswer(c)));
      }
      run.answer(answers);
    }
  }
  // Stage 3: block leases.
  {
    const auto reqs = cursor.take<BlockLeaseAcquire>().value_or(BlockLeaseAcquire{}).requests;
    at = expected(alive);
    REQUIRE(reqs.size() == at.size());
    if (failing_stage == 3 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "allocator down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      std::vector<ReuseLeaseAnswer> answers;
      for (size_t k = 0; k < at.size(); ++k) {
        const size_t i = at[k];
        if (script[i].fate == Fate::blocks_refused) {
          answers.push_back({LeaseAnswer(LeaseRefused{"stale"}), {}, 0});
          ended.insert(i);
          continue;
        }
        LeaseGrant g;
        for (const PhysicalBlockHandle& h : reqs[k].handles) {
          g.leases.push_back(LeaseId{next_block_lease});
          granted_to[next_block_lease++] = i;
          g.covered_handles.push_back(h);
        }
        answers.push_back({LeaseAnswer(g), kPools, 16});
      }
      run.answer(answers);
    }
  }
  // Stage 4: path leases (radix ops whose blocks were leased).
  {
    const auto reqs = cursor.take<PathLeaseAcquire>().value_or(PathLeaseAcquire{}).requests;
    at = expected([&](size_t i) { return alive(i) && script[i].radix; });
    REQUIRE(reqs.size() == at.size());
    if (failing_stage == 4 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "radix down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      std::vector<ReusePathLeaseAnswer> answers;
      for (size_t i : at) {
        if (script[i].fate == Fate::path_refused) {
          answers.push_back({std::nullopt, "evicted"});
          ended.insert(i);
          continue;
        }
        const LeaseId l = OwnerLeaseId::path_lease(next_path_lease++).id();
        granted_to[l.value] = i;
        answers.push_back({l, ""});
      }
      run.answer(answers);
    }
  }
  // Stage 5: versions, one answer for the batch; a moved version rejects
  // exactly the ops scripted for it, so each op reads its own answer here:
  // the batch answer is the candidate's version unless every waiting op is
  // scripted to see it moved (then it moved for all of them).
  {
    at = expected(alive);
    REQUIRE(cursor.take<IndexVersionRead>().has_value() == !at.empty());
    if (failing_stage == 5 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "index down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      const bool moved =
          std::all_of(at.begin(), at.end(), [&](size_t i) { return script[i].fate == Fate::version_moved; });
      run.answer(ReuseIndexVersion{moved ? 8u : 7u, TreeVersion{0}});
      for (size_t i : at)
        if (moved)
          ended.insert(i);
        else if (script[i].fate == Fate::version_moved)
          script[i].fate = Fate::receipt;  // the batch saw no move
    }
  }
  // Stage 6: the slots' frontiers (ops whose rows land in a slot).
  {
    const auto reqs = cursor.take<SlotFrontierRead>().value_or(SlotFrontierRead{}).requests;
    at = expected([&](size_t i) { return alive(i) && script[i].slot; });
    REQUIRE(reqs.size() == at.size());
    for (size_t k = 0; k < at.size(); ++k) {
      CHECK(reqs[k].request == RequestId{500 + at[k]});
      CHECK(reqs[k].required_tokens == hit_end);
    }
    if (failing_stage == 6 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "mapper down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      std::vector<SlotFrontierReply> answers;
      for (size_t i : at) {
        if (script[i].fate == Fate::slot_refused)
          answers.emplace_back(make_error(ErrorCode::not_owner, "another session's request", "slot_request"));
        else
          answers.emplace_back(script[i].frontier);
        if (script[i].fate == Fate::slot_refused || script[i].fate == Fate::mapping_lag) ended.insert(i);
      }
      run.answer(answers);
    }
  }
  // Stage 7: snapshots.
  {
    const auto reqs = cursor.take<SnapshotFreeze>().value_or(SnapshotFreeze{}).requests;
    at = expected(alive);
    REQUIRE(reqs.size() == at.size());
    if (failing_stage == 7 && !at.empty()) {
      run.failed(make_error(ErrorCode::rpc_failed, "executor down"));
      for (size_t i : at) ended.insert(i);
    } else if (!at.empty()) {
      std::vector<SnapshotAnswer> answers;
      for (size_t k = 0; k < at.size(); ++k) {
        const ExecutionSnapshotVersion v{41 + k};
        const std::string abi =
            script[at[k]].fate == Fate::abi_drift ? std::string("other_abi") : reqs[k].planned_kernel_abi_id;
        answers.push_back(SnapshotAnswer{v, v, abi, reqs[k].planned_kernel_abi_id, reqs[k].handles, reqs[k].interval});
      }
      run.answer(answers);
    }
  }

  REQUIRE(cursor.finished());

  // --- the outcomes agree with the script -----------------------------------------
  const ReuseBatchReceipt r = run.receipt();
  REQUIRE(r.outcomes.size() == n);
  size_t receipts = 0, rejections = 0;
  std::map<uint64_t, int> seen;  // lease -> appearances in receipts and the release lists
  for (size_t i = 0; i < n; ++i) {
    INFO("op " << i << " radix " << script[i].radix << " fate " << int(script[i].fate));
    const ReuseOutcome& o = r.outcomes[i];
    if (const auto* rc = std::get_if<ExecutableReuseReceipt>(&o)) {
      ++receipts;
      CHECK(script[i].fate == Fate::receipt);
      CHECK(rc->path_node_ids.empty() != script[i].radix);
      // A slot op's receipt states the frontier the mapper answered; a paged
      // op's is the leased bundles' rows.
      CHECK(rc->ready_frontier_tokens == (script[i].slot ? script[i].frontier : hit_end));
      for (LeaseId l : rc->leases) {
        ++seen[l.value];
        CHECK(granted_to.at(l.value) == i);
      }
      // Exactly the op's leases.
      size_t mine = 0;
      for (const auto& [l, op] : granted_to) mine += op == i;
      CHECK(rc->leases.size() == mine);
    } else if (const auto* rej = std::get_if<ReuseRejectionReceipt>(&o)) {
      ++rejections;
      switch (script[i].fate) {
        case Fate::denied:
          CHECK(rej->reason == RejectionReason::namespace_denied);
          break;
        case Fate::miss:
          CHECK(rej->reason == RejectionReason::no_candidate);
          break;
        case Fate::blocks_refused:
        case Fate::path_refused:
          CHECK(rej->reason == RejectionReason::lease_unavailable);
          break;
        case Fate::version_moved:
          CHECK(rej->reason == RejectionReason::stale_index_version);
          break;
        case Fate::mapping_lag:
          CHECK(rej->reason == RejectionReason::mapping_frontier_lag);
          CHECK(rej->step == ReuseStep::await_mapping);
          break;
        case Fate::slot_refused:
          FAIL("a refused slot is a typed error, not a rejection");
          break;
        case Fate::abi_drift:
          CHECK(rej->reason == RejectionReason::snapshot_evidence_drift);
          break;
        case Fate::receipt:
          FAIL("a receipt was scripted");
          break;
      }
      // It names exactly the leases its op was granted.
      std::set<uint64_t> named;
      for (LeaseId l : rej->leases_released) named.insert(l.value);
      std::set<uint64_t> mine;
      for (const auto& [l, op] : granted_to)
        if (op == i) mine.insert(l);
      CHECK(named == mine);
    } else {
      // Errors only from a failed stage, or the mapper refusing the op's slot.
      const Error& e = std::get<Error>(o);
      CHECK((failing_stage != 0 || script[i].fate == Fate::slot_refused));
      if (failing_stage == 0) CHECK(e.code == ErrorCode::not_owner);
    }
  }
  const ReuseBatchRun::LeaseReturn back = run.leases_to_release();
  for (LeaseId l : back.blocks) {
    CHECK(lease_owner(l) == LeaseOwner::allocator);
    ++seen[l.value];
  }
  for (LeaseId l : back.paths) {
    CHECK(lease_owner(l) == LeaseOwner::radix_index);
    ++seen[l.value];
  }
  // Conservation: every granted lease appears exactly once, and nothing else.
  for (const auto& [l, op] : granted_to) {
    INFO("lease " << l << " of op " << op);
    CHECK(seen[l] == 1);
  }
  CHECK(seen.size() == granted_to.size());
  // Receipts end their attempts when released; rejections end them here.
  CHECK(run.funnel_outcomes().size() == rejections);
  CHECK(run.take_receipt_attempts().size() == receipts);
  // all_leases() (a session that ended) is everything granted.
  const ReuseBatchRun::LeaseReturn all = run.all_leases();
  CHECK(all.blocks.size() + all.paths.size() == granted_to.size());
}

namespace {

// What the script decides for one release op.
enum class ReleaseFate : uint8_t {
  plain,             // no successor
  published,         // successor published after the generation read
  nothing_new,       // successor publication made nothing visible
  refused,           // the index refused the successor
  malformed,         // a successor that cannot be one (typed error, attempt stays open)
  unknown_snapshot,  // names no held attempt
};

}  // namespace

// Steps 9-10 under random batches: release ops with and without successors,
// random execution reports, owners that released or lost each lease, and an
// index that publishes, publishes nothing new, refuses, or does not answer.
// After every batch: each op has exactly one outcome; OpenReuseAttempts
// still validates and holds exactly the attempts no valid op ended; every
// lease of an ended attempt is in exactly one of released / refused; a
// published successor implies the attempt completed, executed, released
// every lease and saw a later publication generation.
TEST_CASE("reuse coordinator property: release ops end each held attempt once, a successor only when published",
          "[reuse][coordinator][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 41));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  ScriptedOwners x;
  OpenReuseAttempts open;
  std::map<uint64_t, ExecutableReuseReceipt> held;  // snapshot -> receipt
  uint64_t next_snapshot = 100;
  const std::vector<TokenId> tokens(64, 3);

  for (int round = 0; round < 6; ++round) {
    INFO("round " << round);
    const size_t acquire = rng() % 5;
    for (size_t k = 0; k < acquire; ++k) {
      const uint64_t v = next_snapshot++;
      held.emplace(v, hold_one(x, open, rng() % 2 == 0, v));
    }
    REQUIRE(open.size() == held.size());

    // A batch of release ops over distinct held attempts (and some unknown ones).
    std::vector<uint64_t> candidates;
    for (const auto& [v, r] : held) candidates.push_back(v);
    std::shuffle(candidates.begin(), candidates.end(), rng);
    candidates.resize(std::min<size_t>(candidates.size(), rng() % 6));
    ReuseBatch batch;
    std::vector<ReleaseFate> fates;
    std::vector<bool> executed;
    for (uint64_t v : candidates) {
      const ReleaseFate fate = static_cast<ReleaseFate>(rng() % 5);
      const bool ran = fate == ReleaseFate::malformed ? rng() % 2 == 0 : rng() % 4 != 0;
      ReuseReleaseOp op{ExecutionSnapshotVersion{v}, ran};
      if (fate != ReleaseFate::plain) {
        // Malformed: work that did not run, or fewer blocks than the reused one.
        const uint32_t end = fate == ReleaseFate::malformed && ran ? 0 : 3;
        op.successor = ReuseSuccessor{RequestId{v}, tokens, end};
      }
      // A successor of work that did not run is malformed whatever the script said.
      fates.push_back(op.successor && !ran ? ReleaseFate::malformed : fate);
      executed.push_back(ran);
      batch.ops.push_back(op);
    }
    if (rng() % 3 == 0) {
      batch.ops.push_back(ReuseReleaseOp{ExecutionSnapshotVersion{999999}, true});
      fates.push_back(ReleaseFate::unknown_snapshot);
      executed.push_back(true);
    }
    const bool index_down = rng() % 6 == 0;
    INFO("ops " << batch.ops.size() << (index_down ? ", index down" : ""));

    ReuseBatchRun run(batch, kPools, kBlockTokens, kGroups);
    run.bind(open, SessionId{1});
    // The successor stage: one publish op per well-formed successor, in op order.
    StageCursor cursor{run};
    const std::vector<PrefixOp> pubs = cursor.take<SuccessorPublish>().value_or(SuccessorPublish{}).batch.ops;
    std::vector<size_t> publishing;
    for (size_t i = 0; i < fates.size(); ++i)
      if (fates[i] == ReleaseFate::published || fates[i] == ReleaseFate::nothing_new ||
          fates[i] == ReleaseFate::refused)
        publishing.push_back(i);
    REQUIRE(pubs.size() == publishing.size());
    if (!pubs.empty()) {
      if (index_down) {
        run.answer(Result<PrefixBatchReceipt>(make_error(ErrorCode::rpc_failed, "prefix_index: down")));
      } else {
        PrefixBatchReceipt answers;
        for (size_t i : publishing) {
          if (fates[i] == ReleaseFate::published)
            answers.outcomes.emplace_back(std::in_place_type<PrefixPublishReceipt>, RequestId{1}, 2u, 0u, 1u, 8u);
          else if (fates[i] == ReleaseFate::nothing_new)
            answers.outcomes.emplace_back(std::in_place_type<PrefixPublishReceipt>, RequestId{1}, 0u, 0u, 3u, 0u);
          else
            answers.outcomes.emplace_back(std::in_place_type<Error>,
                                          make_error(ErrorCode::row_not_valid, "not committed", "rows"));
        }
        run.answer(Result<PrefixBatchReceipt>(answers));
      }
    }
    // The lease owners release each lease, or (rarely) no longer hold it.
    // The batch holds release ops only: the release stage is all that is
    // left, block leases to the allocator, then path leases to the radix owner.
    auto flags_for = [&](const std::vector<LeaseId>& leases) {
      std::vector<uint8_t> flags;
      for (size_t k = 0; k < leases.size(); ++k) flags.push_back(rng() % 10 != 0);
      return flags;
    };
    if (std::optional<BlockLeaseReturn> b = cursor.take<BlockLeaseReturn>()) run.answer(flags_for(b->leases));
    if (std::optional<PathLeaseReturn> p = cursor.take<PathLeaseReturn>()) run.answer(flags_for(p->leases));
    REQUIRE(cursor.finished());

    const ReuseBatchReceipt r = run.receipt();
    REQUIRE(r.outcomes.size() == batch.ops.size());
    for (size_t i = 0; i < fates.size(); ++i) {
      INFO("op " << i);
      const uint64_t v = std::get<ReuseReleaseOp>(batch.ops[i]).snapshot.value;
      if (fates[i] == ReleaseFate::malformed || fates[i] == ReleaseFate::unknown_snapshot) {
        REQUIRE(std::holds_alternative<Error>(r.outcomes[i]));
        continue;  // a malformed op's attempt is still held (checked below)
      }
      REQUIRE(std::holds_alternative<ReuseReleaseReceipt>(r.outcomes[i]));
      const auto& done = std::get<ReuseReleaseReceipt>(r.outcomes[i]);
      const ExecutableReuseReceipt& receipt = held.at(v);
      // Every lease of the attempt, exactly once, in released or refused.
      std::vector<LeaseId> all = done.released;
      all.insert(all.end(), done.refused.begin(), done.refused.end());
      std::sort(all.begin(), all.end());
      std::vector<LeaseId> expected_leases = receipt.leases;
      std::sort(expected_leases.begin(), expected_leases.end());
      CHECK(all == expected_leases);
      CHECK(done.completed == (executed[i] && done.refused.empty()));
      const bool published = fates[i] == ReleaseFate::published && !index_down;
      CHECK(done.published_successor == (published && done.completed));
      CHECK(done.successor.has_value() ==
            (!index_down && (fates[i] == ReleaseFate::published || fates[i] == ReleaseFate::nothing_new)));
      CHECK(done.successor_refused.has_value() ==
            (fates[i] == ReleaseFate::refused || (index_down && fates[i] != ReleaseFate::plain)));
      held.erase(v);
    }
    REQUIRE(open.size() == held.size());
    REQUIRE(open.validate().ok());
  }
}
