// The executable-reuse transaction of spec 0x0CD as a state machine: the
// checked order, one bucket per rejection, typed errors that change nothing,
// and the receipt that binds E = (g_ns, d_sem, d_layout, v_index, v_tree,
// g_pool, f_map, v_exec).
#include <catch2/catch.hpp>

#include "tests/reuse/reuse_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// Runs the scenario's steps before `step`, which must all advance.
ReuseAttempt attempt_at(const ReuseScenario& s, ReuseStep step) {
  auto a = ReuseAttempt::begin(s.request);
  REQUIRE(a.ok());
  for (uint8_t i = 1; i < static_cast<uint8_t>(step); ++i) {
    auto r = a->advance(s.evidence(static_cast<ReuseStep>(i)));
    INFO("step " << int(i) << ": " << (r.ok() ? std::string("ok") : r.error().describe()));
    REQUIRE(r.ok());
    REQUIRE(r->advanced());
  }
  return std::move(a).value();
}

// The scenario's evidence at `step` is rejected for `reason`; the evidence
// digest is unchanged and the attempt is closed.
ReuseRejection expect_rejection(const ReuseScenario& s, ReuseStep step, RejectionReason reason) {
  ReuseAttempt a = attempt_at(s, step);
  const Sha256Digest before = a.evidence_digest();
  auto r = a.advance(s.evidence(step));
  INFO(to_string(step) << " -> " << to_string(reason) << ": " << (r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  REQUIRE(r->rejection.has_value());
  CHECK(r->rejection->reason == reason);
  CHECK(r->rejection->bucket() == bucket_of(reason));
  CHECK(r->rejection->step == step);
  CHECK(a.evidence_digest() == before);
  CHECK(a.phase() == ReusePhase::rejected);
  REQUIRE(a.funnel_outcome().has_value());
  CHECK_FALSE(a.funnel_outcome()->executed);
  REQUIRE(a.validate().ok());
  auto closed = a.advance(s.evidence(ReuseStep::authorize));
  CHECK(closed.error().code == ErrorCode::reuse_attempt_closed);
  return *r->rejection;
}

// The scenario's evidence at `step` is a typed error that changes nothing.
Error expect_error(const ReuseScenario& s, ReuseStep step) {
  ReuseAttempt a = attempt_at(s, step);
  const Sha256Digest before = a.evidence_digest();
  const ReusePhase phase = a.phase();
  auto r = a.advance(s.evidence(step));
  REQUIRE_FALSE(r.ok());
  CHECK(a.evidence_digest() == before);
  CHECK(a.phase() == phase);
  CHECK(a.next_step() == step);
  REQUIRE(a.validate().ok());
  return r.error();
}

struct Fixture {
  AuthorityFixture f = AuthorityFixture::make();
  AuthorizedLookup grant = f.grant("worker-a", kTenantA);
  ReuseScenario happy = happy_scenario(f.authority, grant);
};

}  // namespace

TEST_CASE("the happy path fills the receipt with the evidence tuple", "[reuse]") {
  Fixture x;
  DriveResult d = drive(x.happy);
  REQUIRE_FALSE(d.rejection.has_value());
  REQUIRE(d.receipt.has_value());
  const ExecutableReuseReceipt& r = *d.receipt;
  CHECK(r.request_id == RequestId{77});
  CHECK(r.source == ReuseSource::prefix_index);
  CHECK(r.namespace_id == kTenantA);
  CHECK(r.namespace_generation == x.grant.generation());
  CHECK(r.semantic_digest == reuse_semantic_digest(x.happy.key.manifest));
  CHECK(r.layout_digest == x.happy.key.manifest.cache_layout_sha256);
  CHECK(r.index_version == 7);
  CHECK(r.pool_generations == x.happy.hit().pool_generations);
  CHECK(r.physical_handles == x.happy.hit().physical_handles);
  CHECK(r.leases == std::vector<LeaseId>{LeaseId{771}, LeaseId{772}});
  CHECK(r.collision_witness_verified);
  CHECK(r.execution_snapshot_version == ExecutionSnapshotVersion{41});
  const EvidenceTuple& e = d.attempt.evidence();
  CHECK(e.namespace_generation == r.namespace_generation);
  CHECK(e.ready_frontier_tokens == std::optional<uint32_t>(32));
  CHECK(d.attempt.phase() == ReusePhase::completed);
  CHECK(d.attempt.completion()->kind == ReuseCompletionKind::released);
  CHECK(d.attempt.funnel_outcome()->executed);
}

TEST_CASE("steps out of order are typed errors that change nothing", "[reuse]") {
  Fixture x;
  auto a = ReuseAttempt::begin(x.happy.request);
  REQUIRE(a.ok());
  const Sha256Digest start = a->evidence_digest();
  // Lookup before authorization (0x0CE): refused before anything is read.
  auto early = a->advance(x.happy.evidence(ReuseStep::lookup_candidate));
  CHECK(early.error().code == ErrorCode::reuse_step_out_of_order);
  CHECK(early.error().field == "lookup_candidate");
  CHECK(a->evidence_digest() == start);
  REQUIRE(a->authorize(x.happy.authorization).ok());
  for (uint8_t i = 1; i <= kReuseStepCount; ++i) {
    if (i == 2) continue;
    const Sha256Digest before = a->evidence_digest();
    auto r = a->advance(x.happy.evidence(static_cast<ReuseStep>(i)));
    CHECK(r.error().code == ErrorCode::reuse_step_out_of_order);
    CHECK(a->evidence_digest() == before);
  }
  CHECK(ReuseAttempt::begin(ReuseRequest{RequestId{1}, RequestGeneration{1}, "", false}).error().field ==
        "namespace_name");
  // After completion nothing more is accepted.
  DriveResult d = drive(x.happy);
  CHECK(d.attempt.advance(x.happy.evidence(ReuseStep::finish)).error().code == ErrorCode::reuse_attempt_closed);
}

TEST_CASE("steps 1-2: authorization and key rejections land in the authorization bucket", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.authorization = AuthorizationDenied{x.f.authority.authorize(x.f.principal("worker-b"), kTenantA).error()};
  expect_rejection(s, ReuseStep::authorize, RejectionReason::namespace_denied);

  s = x.happy;  // a grant for another namespace than the request's
  s.authorization = x.f.grant("worker-ab", kTenantB);
  expect_rejection(s, ReuseStep::authorize, RejectionReason::cross_namespace_key);

  s = x.happy;
  s.authorization = AuthorizationDenied{make_error(ErrorCode::authorization_stale_generation, "moved on")};
  expect_rejection(s, ReuseStep::authorize, RejectionReason::stale_namespace_generation);

  s = x.happy;
  s.key.manifest.cache_salt = "guessed-salt";
  expect_rejection(s, ReuseStep::build_key, RejectionReason::cross_namespace_key);

  s = x.happy;
  s.key.manifest.cache_isolation_namespace = kTenantB;
  expect_rejection(s, ReuseStep::build_key, RejectionReason::cross_namespace_key);

  s = x.happy;
  s.key.manifest.namespace_generation = NamespaceGeneration{3};
  expect_rejection(s, ReuseStep::build_key, RejectionReason::stale_namespace_generation);

  s = x.happy;
  s.authorization = AuthorizationDenied{make_error(ErrorCode::io, "not an authorization error")};
  CHECK(expect_error(s, ReuseStep::authorize).code == ErrorCode::reuse_evidence_mismatch);
  s = x.happy;
  s.key.manifest.covered_token_ids.clear();
  CHECK(expect_error(s, ReuseStep::build_key).code == ErrorCode::invalid_manifest);
}

TEST_CASE("step 3: miss, compatibility, witness and candidate generation", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.candidate = IndexMiss{};
  CHECK(expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::no_candidate).bucket() ==
        ReuseBucket::index_miss);
  s = x.happy;
  s.hit().namespace_name = kTenantB;
  expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::isolation_mismatch);
  s = x.happy;
  s.hit().semantic_digest = sha256("another model");
  expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::semantic_mismatch);
  s = x.happy;
  s.hit().layout_digest = sha256("another layout");
  expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::layout_mismatch);
  s = x.happy;
  s.hit().token_witness.reset();
  expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::collision_witness_missing);
  s.request.require_collision_witness = false;  // without the policy, no witness is fine
  CHECK_FALSE(drive(s).rejection.has_value());
  s = x.happy;  // 0x07F: an equal key over different stored tokens
  std::vector<uint32_t> other = thirty_two_tokens();
  other[5] += 1;
  s.hit().token_witness = covered_tokens_digest(std::span<const uint32_t>(other.data(), 16));
  expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::collision_witness_mismatch);
  s = x.happy;
  s.hit().namespace_generation = NamespaceGeneration{3};
  CHECK(expect_rejection(s, ReuseStep::lookup_candidate, RejectionReason::stale_candidate_generation).bucket() ==
        ReuseBucket::stale_generation);

  // Malformed answers are errors, not funnel outcomes.
  s = x.happy;
  s.hit().covered_interval = {0, 33};
  CHECK(expect_error(s, ReuseStep::lookup_candidate).code == ErrorCode::reuse_evidence_mismatch);
  s = x.happy;
  s.hit().pool_generations.pop_back();
  CHECK(expect_error(s, ReuseStep::lookup_candidate).code == ErrorCode::reuse_evidence_mismatch);
  s = x.happy;
  s.hit().path_node_ids = {RadixNodeId{4}};  // path nodes on a prefix-index candidate
  CHECK(expect_error(s, ReuseStep::lookup_candidate).code == ErrorCode::reuse_evidence_mismatch);
}

TEST_CASE("steps 4-5: leases must cover the candidate, versions are read under them", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.leases = LeaseRefused{"block 100 is being evicted"};
  CHECK(expect_rejection(s, ReuseStep::acquire_leases, RejectionReason::lease_unavailable).leases_to_release.empty());
  s = x.happy;
  s.lease_grant().covered_handles.pop_back();
  const ReuseRejection partial = expect_rejection(s, ReuseStep::acquire_leases, RejectionReason::lease_incomplete);
  CHECK(partial.leases_to_release == s.lease_grant().leases);  // acquired, so released
  s = x.happy;
  s.lease_grant().leases = {LeaseId{5}, LeaseId{5}};
  CHECK(expect_error(s, ReuseStep::acquire_leases).code == ErrorCode::reuse_evidence_mismatch);

  s = x.happy;
  s.versions.index_version = 8;
  const ReuseRejection stale = expect_rejection(s, ReuseStep::validate_versions, RejectionReason::stale_index_version);
  CHECK(stale.leases_to_release == x.happy.lease_grant().leases);
  s = x.happy;
  s.versions.tree_version = TreeVersion{2};
  expect_rejection(s, ReuseStep::validate_versions, RejectionReason::stale_tree_version);
  s = x.happy;
  s.versions.pool_generations[1].generation = PoolGeneration{4};  // pool 2 was replaced
  expect_rejection(s, ReuseStep::validate_versions, RejectionReason::stale_pool_generation);
  s = x.happy;
  s.versions.valid_frontier_tokens = 15;
  expect_rejection(s, ReuseStep::validate_versions, RejectionReason::frontier_not_valid);
  s = x.happy;
  s.versions.pool_generations.pop_back();
  CHECK(expect_error(s, ReuseStep::validate_versions).code == ErrorCode::reuse_evidence_mismatch);
}

TEST_CASE("steps 7-9: mapping lag, stale snapshot, execution failure", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.mapping.ready_frontier_tokens = 31;
  const ReuseRejection lag = expect_rejection(s, ReuseStep::await_mapping, RejectionReason::mapping_frontier_lag);
  CHECK(lag.detail == "L_map = 1 tokens");
  s = x.happy;
  s.mapping = MappingAnswer{15, 15};  // the kernel must read at least the reused rows
  CHECK(expect_error(s, ReuseStep::await_mapping).code == ErrorCode::reuse_evidence_mismatch);

  s = x.happy;
  s.snapshot.planned_version = ExecutionSnapshotVersion{40};
  expect_rejection(s, ReuseStep::freeze_snapshot, RejectionReason::stale_snapshot_version);
  s = x.happy;
  s.snapshot.planned_kernel_abi_id = "paged_decode_p32_v1";
  expect_rejection(s, ReuseStep::freeze_snapshot, RejectionReason::snapshot_evidence_drift);
  s = x.happy;
  s.snapshot.bound_handles[0].generation = BlockGeneration{2};  // recycled under the snapshot
  expect_rejection(s, ReuseStep::freeze_snapshot, RejectionReason::snapshot_evidence_drift);

  s = x.happy;
  s.execution.succeeded = false;
  const ReuseRejection failed = expect_rejection(s, ReuseStep::execute, RejectionReason::execution_failed);
  CHECK(failed.bucket() == ReuseBucket::execution);
  s = x.happy;
  s.execution.executed_version = ExecutionSnapshotVersion{40};
  CHECK(expect_error(s, ReuseStep::execute).code == ErrorCode::reuse_evidence_mismatch);
}

TEST_CASE("step 10 releases exactly the held leases or publishes one complete successor", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.completion = LeasesReleased{{LeaseId{771}}};  // one lease would leak
  CHECK(expect_error(s, ReuseStep::finish).code == ErrorCode::reuse_evidence_mismatch);
  s.completion = LeasesReleased{{LeaseId{771}, LeaseId{771}}};
  CHECK(expect_error(s, ReuseStep::finish).code == ErrorCode::reuse_evidence_mismatch);
  SuccessorPublished p{{LeaseId{772}, LeaseId{771}}, 8, TokenInterval{0, 32}, true};
  s.completion = p;
  DriveResult d = drive(s);
  REQUIRE(d.attempt.completion().has_value());
  CHECK(d.attempt.completion()->kind == ReuseCompletionKind::published_successor);
  CHECK(d.attempt.completion()->published_interval == TokenInterval{0, 32});
  p.all_groups_published = false;
  s.completion = p;
  CHECK(expect_error(s, ReuseStep::finish).code == ErrorCode::reuse_evidence_mismatch);
  p.all_groups_published = true;
  p.published_index_version = 7;  // not after the publication generation read at step 5
  s.completion = p;
  CHECK(expect_error(s, ReuseStep::finish).code == ErrorCode::reuse_evidence_mismatch);
}

TEST_CASE("step 6: declared modules need equal tokens, positions, schema and ABI", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.hit().source = ReuseSource::prompt_module;
  s.hit().covered_interval = {4, 12};
  s.hit().token_witness =
      covered_tokens_digest(std::span<const uint32_t>(s.key.manifest.covered_token_ids.data() + 4, 8));
  s.versions.valid_frontier_tokens = 12;
  s.snapshot.bound_interval = {4, 12};
  PromptModuleReceipt m;
  m.schema_id = "support-schema";
  m.schema_generation = 2;
  m.module_id = "system-preamble";
  m.token_ids.assign(s.key.manifest.covered_token_ids.begin() + 4, s.key.manifest.covered_token_ids.begin() + 12);
  m.position_ids = {4, 5, 6, 7, 10, 11, 12, 13};  // a declared gap for a parameter
  m.semantic_manifest_digest = reuse_semantic_digest(s.key.manifest);
  m.layout_manifest_digest = s.key.manifest.cache_layout_sha256;
  m.namespace_id = kTenantA;
  m.namespace_generation = x.grant.generation();
  const ModulePositionAnswer good{m, "support-schema", 2, m.position_ids};
  s.positions = good;
  CHECK_FALSE(drive(s).rejection.has_value());

  ModulePositionAnswer moved = good;
  moved.declared_position_ids = {4, 5, 6, 7, 8, 9, 10, 11};  // same text, other positions: not a hit
  s.positions = moved;
  expect_rejection(s, ReuseStep::validate_positions, RejectionReason::module_position_mismatch);
  ModulePositionAnswer schema = good;
  schema.schema_generation = 3;
  s.positions = schema;
  expect_rejection(s, ReuseStep::validate_positions, RejectionReason::module_position_mismatch);
  ModulePositionAnswer abi = good;
  abi.module.semantic_manifest_digest = sha256("other adapter");
  s.positions = abi;
  expect_rejection(s, ReuseStep::validate_positions, RejectionReason::semantic_mismatch);
  ModulePositionAnswer ragged = good;
  ragged.module.position_ids.pop_back();  // N_module broken
  s.positions = ragged;
  CHECK(expect_error(s, ReuseStep::validate_positions).code == ErrorCode::reuse_evidence_mismatch);
  s.positions = PositionsNotApplicable{};
  CHECK(expect_error(s, ReuseStep::validate_positions).code == ErrorCode::reuse_evidence_mismatch);
}

TEST_CASE("step 6: a session resumes only its exact history 0..H", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.hit().source = ReuseSource::session;
  SessionReuseReceipt r;
  r.session_id = "conv-9";
  r.tenant_id = "tenant-a";
  r.namespace_id = kTenantA;
  r.namespace_generation = x.grant.generation();
  r.semantic_digest = reuse_semantic_digest(s.key.manifest);
  r.layout_digest = s.key.manifest.cache_layout_sha256;
  r.covered_interval = {0, 16};
  r.covered_tokens_digest =
      covered_tokens_digest(std::span<const uint32_t>(s.key.manifest.covered_token_ids.data(), 16));
  r.position_truncation_contract = "absolute-no-truncation";
  r.resume_prefill_tokens = 16;
  const SessionIntervalAnswer good{r, "absolute-no-truncation"};
  s.positions = good;
  CHECK_FALSE(drive(s).rejection.has_value());

  SessionIntervalAnswer bad = good;
  bad.position_truncation_contract = "sliding-window-4096";
  s.positions = bad;
  expect_rejection(s, ReuseStep::validate_positions, RejectionReason::session_interval_mismatch);
  bad = good;
  bad.session.covered_tokens_digest = sha256("edited history");
  s.positions = bad;
  expect_rejection(s, ReuseStep::validate_positions, RejectionReason::session_interval_mismatch);
  bad = good;
  bad.session.namespace_generation = NamespaceGeneration{3};  // saved before a namespace rotation
  s.positions = bad;
  expect_rejection(s, ReuseStep::validate_positions, RejectionReason::stale_candidate_generation);
  s.positions = ModulePositionAnswer{};
  CHECK(expect_error(s, ReuseStep::validate_positions).code == ErrorCode::reuse_evidence_mismatch);
}

TEST_CASE("radix candidates need a lease on every path node", "[reuse]") {
  Fixture x;
  ReuseScenario s = x.happy;
  s.hit().source = ReuseSource::radix_index;
  s.hit().tree_version = TreeVersion{12};
  s.hit().path_node_ids = {RadixNodeId{0}, RadixNodeId{3}};
  s.versions.tree_version = TreeVersion{12};
  s.lease_grant().covered_path_nodes = {RadixNodeId{0}, RadixNodeId{3}};
  DriveResult d = drive(s);
  REQUIRE_FALSE(d.rejection.has_value());
  CHECK(d.receipt->path_node_ids == s.hit().path_node_ids);
  CHECK(d.receipt->tree_version == TreeVersion{12});
  s.lease_grant().covered_path_nodes = {RadixNodeId{3}};
  expect_rejection(s, ReuseStep::acquire_leases, RejectionReason::lease_incomplete);
  s = x.happy;
  s.hit().source = ReuseSource::radix_index;
  CHECK(expect_error(s, ReuseStep::lookup_candidate).code == ErrorCode::reuse_evidence_mismatch);
}
