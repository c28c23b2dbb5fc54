// Seeded randomised test of the ReuseAttempt state machine (spec 0x0CD,
// 0x0CF): random attempts receive, at each step, the right evidence, the
// evidence of another step, malformed evidence or evidence that must reject
// for a chosen reason. The generator's intent is the reference: the machine
// must answer exactly that (advance / typed error / that reason), a typed
// error must leave the attempt unchanged, a rejection must leave its evidence
// unchanged and close it, every rejection lands in exactly one bucket, and
// the funnel over all attempts stays monotone with each difference one bucket.
#include <catch2/catch.hpp>
#include <random>

#include "tests/reuse/reuse_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct Mutation {
  RejectionReason reason;
  void (*apply)(ReuseScenario&);
};

// Evidence that must reject at each step, with the reason it must name.
const std::vector<std::vector<Mutation>>& rejections() {
  static const std::vector<std::vector<Mutation>> table{
      /* 1 */ {{RejectionReason::namespace_denied,
                [](ReuseScenario& s) {
                  s.authorization = AuthorizationDenied{make_error(ErrorCode::authorization_namespace_denied, "no")};
                }},
               {RejectionReason::namespace_closed,
                [](ReuseScenario& s) {
                  s.authorization = AuthorizationDenied{make_error(ErrorCode::authorization_namespace_closed, "purge")};
                }},
               {RejectionReason::principal_revoked,
                [](ReuseScenario& s) {
                  s.authorization = AuthorizationDenied{make_error(ErrorCode::authorization_principal_revoked, "gone")};
                }}},
      /* 2 */
      {{RejectionReason::cross_namespace_key, [](ReuseScenario& s) { s.key.manifest.cache_salt = "x"; }},
       {RejectionReason::stale_namespace_generation,
        [](ReuseScenario& s) { s.key.manifest.namespace_generation = NamespaceGeneration{2}; }}},
      /* 3 */
      {{RejectionReason::no_candidate, [](ReuseScenario& s) { s.candidate = IndexMiss{}; }},
       {RejectionReason::semantic_mismatch, [](ReuseScenario& s) { s.hit().semantic_digest = sha256("m"); }},
       {RejectionReason::layout_mismatch, [](ReuseScenario& s) { s.hit().layout_digest = sha256("l"); }},
       {RejectionReason::isolation_mismatch, [](ReuseScenario& s) { s.hit().namespace_name = kTenantB; }},
       {RejectionReason::collision_witness_missing, [](ReuseScenario& s) { s.hit().token_witness.reset(); }},
       {RejectionReason::collision_witness_mismatch, [](ReuseScenario& s) { s.hit().token_witness = sha256("w"); }},
       {RejectionReason::stale_candidate_generation,
        [](ReuseScenario& s) { s.hit().namespace_generation = NamespaceGeneration{3}; }}},
      /* 4 */
      {{RejectionReason::lease_unavailable, [](ReuseScenario& s) { s.leases = LeaseRefused{"busy"}; }},
       {RejectionReason::lease_incomplete, [](ReuseScenario& s) { s.lease_grant().covered_handles.clear(); }}},
      /* 5 */
      {{RejectionReason::stale_index_version, [](ReuseScenario& s) { s.versions.index_version = 9; }},
       {RejectionReason::stale_tree_version, [](ReuseScenario& s) { s.versions.tree_version = TreeVersion{1}; }},
       {RejectionReason::stale_pool_generation,
        [](ReuseScenario& s) { s.versions.pool_generations[0].generation = PoolGeneration{9}; }},
       {RejectionReason::frontier_not_valid, [](ReuseScenario& s) { s.versions.valid_frontier_tokens = 3; }}},
      /* 6 */ {},
      /* 7 */ {{RejectionReason::mapping_frontier_lag, [](ReuseScenario& s) { s.mapping.ready_frontier_tokens = 20; }}},
      /* 8 */
      {{RejectionReason::stale_snapshot_version,
        [](ReuseScenario& s) { s.snapshot.planned_version = ExecutionSnapshotVersion{1}; }},
       {RejectionReason::snapshot_evidence_drift,
        [](ReuseScenario& s) {
          s.snapshot.bound_interval = {0, 8};
        }}},
      /* 9 */ {{RejectionReason::execution_failed, [](ReuseScenario& s) { s.execution.succeeded = false; }}},
      /* 10 */ {},
  };
  return table;
}

// Evidence that is malformed for this attempt at each step (a typed error).
void malform(ReuseScenario& s, ReuseStep step) {
  switch (step) {
    case ReuseStep::authorize:
      s.authorization = AuthorizationDenied{make_error(ErrorCode::io, "x")};
      break;
    case ReuseStep::build_key:
      s.key.manifest.covered_token_ids.clear();
      break;
    case ReuseStep::lookup_candidate:
      s.hit().covered_interval = {0, 99};
      break;
    case ReuseStep::acquire_leases:
      s.lease_grant().leases.clear();
      break;
    case ReuseStep::validate_versions:
      s.versions.pool_generations.clear();
      break;
    case ReuseStep::validate_positions:
      s.positions = ModulePositionAnswer{};
      break;
    case ReuseStep::await_mapping:
      s.mapping.required_frontier_tokens = 1;
      break;
    case ReuseStep::freeze_snapshot:
      s.snapshot.kernel_abi_id.clear();
      break;
    case ReuseStep::execute:
      s.execution.executed_version = ExecutionSnapshotVersion{7};
      break;
    case ReuseStep::finish:
      s.completion = LeasesReleased{};
      break;
  }
}

}  // namespace

TEST_CASE("random reuse attempts agree with their generator and keep the funnel monotone", "[reuse][property]") {
  const uint64_t seed = 0x5eed0c0dull;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto f = AuthorityFixture::make();
  const AuthorizedLookup grant = f.grant("worker-a", kTenantA);
  const ReuseScenario base = happy_scenario(f.authority, grant);

  ReuseFunnel funnel;
  uint64_t errors = 0, rejected = 0, executed = 0;
  for (int n = 0; n < 2000; ++n) {
    INFO("attempt " << n);
    ReuseScenario good = base;
    good.request.request_id = RequestId{static_cast<uint64_t>(1000 + n)};
    auto begun = ReuseAttempt::begin(good.request);
    REQUIRE(begun.ok());
    ReuseAttempt a = std::move(begun).value();
    bool recorded = false;
    for (int moves = 0; moves < 40 && a.phase() != ReusePhase::completed && a.phase() != ReusePhase::rejected;
         ++moves) {
      const ReuseStep next = a.next_step();
      const auto& table = rejections()[static_cast<size_t>(next) - 1];
      const size_t kind = pick(10);
      const Sha256Digest before = a.evidence_digest();
      const ReusePhase phase_before = a.phase();
      if (kind == 0) {  // another step's evidence
        ReuseStep other = static_cast<ReuseStep>(1 + pick(kReuseStepCount));
        if (other == next) other = static_cast<ReuseStep>(1 + static_cast<int>(next) % kReuseStepCount);
        auto r = a.advance(good.evidence(other));
        INFO("step " << to_string(next) << " given " << to_string(other));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == ErrorCode::reuse_step_out_of_order);
        CHECK(a.evidence_digest() == before);
        CHECK(a.phase() == phase_before);
        ++errors;
      } else if (kind == 1) {  // malformed
        ReuseScenario bad = good;
        malform(bad, next);
        auto r = a.advance(bad.evidence(next));
        INFO("malformed " << to_string(next));
        REQUIRE_FALSE(r.ok());
        CHECK(a.evidence_digest() == before);
        CHECK(a.phase() == phase_before);
        CHECK(a.next_step() == next);
        ++errors;
      } else if (kind <= 3 && !table.empty()) {  // a rejection for a chosen reason
        const Mutation& m = table[pick(table.size())];
        ReuseScenario bad = good;
        m.apply(bad);
        auto r = a.advance(bad.evidence(next));
        INFO("reject " << to_string(next) << " for " << to_string(m.reason) << ": "
                       << (r.ok() ? std::string("ok") : r.error().describe()));
        REQUIRE(r.ok());
        REQUIRE(r->rejection.has_value());
        CHECK(r->rejection->reason == m.reason);
        CHECK(r->rejection->bucket() == bucket_of(m.reason));
        CHECK(a.evidence_digest() == before);
        CHECK(a.rejection()->leases_to_release.size() >= a.acquired_leases().size());
        ++rejected;
      } else {  // the right evidence
        auto r = a.advance(good.evidence(next));
        INFO("good " << to_string(next) << ": " << (r.ok() ? std::string("ok") : r.error().describe()));
        REQUIRE(r.ok());
        REQUIRE(r->advanced());
        CHECK(a.evidence_digest() != before);
        CHECK(r->receipt.has_value() == (next == ReuseStep::freeze_snapshot));
      }
      REQUIRE(a.validate().ok());
      const auto outcome = a.funnel_outcome();
      if (outcome && !recorded) {
        funnel.record(*outcome);
        recorded = true;
        if (outcome->executed) ++executed;
      }
      REQUIRE(funnel.validate().ok());
    }
    if (a.phase() == ReusePhase::rejected || a.phase() == ReusePhase::completed)
      CHECK(a.advance(good.evidence(ReuseStep::authorize)).error().code == ErrorCode::reuse_attempt_closed);
  }
  // The funnel's stages are the executed count plus the rejections behind them.
  const FunnelCounts c = funnel.counts();
  CHECK(c.at(FunnelStage::executed) == executed);
  uint64_t total = executed;
  for (size_t b = 0; b < kReuseBucketCount; ++b) total += funnel.rejections(static_cast<ReuseBucket>(b));
  CHECK(c.at(FunnelStage::requests) == total);
  CHECK(rejected + executed <= 2000);
  CHECK(rejected > 100);
  for (size_t k = 0; k + 1 < kFunnelStageCount; ++k) {
    CHECK(c.stage[k] >= c.stage[k + 1]);
    CHECK(c.stage[k] - c.stage[k + 1] == funnel.rejections(static_cast<ReuseBucket>(k)));
  }
  CHECK(errors > 0);
  CHECK(executed > 0);
}
