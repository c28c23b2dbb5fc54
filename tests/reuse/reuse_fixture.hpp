#pragma once
// Fixtures of the [reuse] suites: one request of 32 tokens in tenant-a
// (generation 4) whose first 16 tokens — one full block of the Loop 4 layout
// in each of its two cache groups — are cached, and the evidence every owner
// answers on the happy path of the executable-reuse transaction (0x0CD).
// Tests copy a ReuseScenario and change the one answer they are about.
#include <catch2/catch.hpp>
#include <optional>

#include "tests/support/authorization_fixture.hpp"
#include "services/identity/compatibility_manifest_builder.hpp"
#include "services/reuse/reuse_attempt.hpp"

namespace kvrt::test {

inline std::vector<uint32_t> thirty_two_tokens() {
  std::vector<uint32_t> t = sixteen_tokens();
  for (uint32_t i = 0; i < 16; ++i) t.push_back(50000 + 37 * i);
  return t;
}

// The request's manifest, built against the namespace generation a grant admits.
inline CacheCompatibilityManifest request_manifest(const NamespaceAuthority& a, const AuthorizedLookup& g,
                                                   std::vector<uint32_t> tokens = thirty_two_tokens()) {
  const GenerationRecord* rec = a.registry().find(g.namespace_name(), g.generation());
  REQUIRE(rec != nullptr);
  CoveredInput in;
  in.token_ids = std::move(tokens);
  in.publication_generation = 1;
  in.provenance = {"tok-r1", "chat-r1", "req-77", "temperature=0"};
  return build(rec->facts.layout, rec->facts.artifact, rec->isolation, in);
}

struct ReuseScenario {
  ReuseRequest request;
  AuthorizationAnswer authorization;
  KeyEvidence key;
  CandidateAnswer candidate;
  LeaseAnswer leases;
  VersionAnswer versions;
  PositionAnswer positions;
  MappingAnswer mapping;
  SnapshotAnswer snapshot;
  ExecutionAnswer execution;
  CompletionAnswer completion;

  ReuseCandidate& hit() { return std::get<ReuseCandidate>(candidate); }
  LeaseGrant& lease_grant() { return std::get<LeaseGrant>(leases); }

  // The answer for step s (1-based), as the reuse coordinator would pass it.
  StepEvidence evidence(ReuseStep s) const {
    switch (s) {
      case ReuseStep::authorize:
        return StepEvidence(std::in_place_index<0>, authorization);
      case ReuseStep::build_key:
        return StepEvidence(std::in_place_index<1>, key);
      case ReuseStep::lookup_candidate:
        return StepEvidence(std::in_place_index<2>, candidate);
      case ReuseStep::acquire_leases:
        return StepEvidence(std::in_place_index<3>, leases);
      case ReuseStep::validate_versions:
        return StepEvidence(std::in_place_index<4>, versions);
      case ReuseStep::validate_positions:
        return StepEvidence(std::in_place_index<5>, positions);
      case ReuseStep::await_mapping:
        return StepEvidence(std::in_place_index<6>, mapping);
      case ReuseStep::freeze_snapshot:
        return StepEvidence(std::in_place_index<7>, snapshot);
      case ReuseStep::execute:
        return StepEvidence(std::in_place_index<8>, execution);
      case ReuseStep::finish:
        return StepEvidence(std::in_place_index<9>, completion);
    }
    FAIL("unknown step");
    return StepEvidence(std::in_place_index<0>, authorization);
  }
};

// Two handles of one 16-token bundle: group 0 in pool 1 (block 100), group 1
// in pool 2 (block 200), both pools at generation 3.
inline ReuseScenario happy_scenario(const NamespaceAuthority& authority, const AuthorizedLookup& grant,
                                    uint64_t request_id = 77) {
  const CacheCompatibilityManifest m = request_manifest(authority, grant);
  const std::vector<PhysicalBlockHandle> handles{
      {PoolId{1}, CacheGroupId{0}, PhysicalBlockId{100}, BlockGeneration{1}},
      {PoolId{2}, CacheGroupId{1}, PhysicalBlockId{200}, BlockGeneration{1}},
  };
  const TokenInterval covered{0, 16};
  ReuseCandidate c;
  c.source = ReuseSource::prefix_index;
  c.namespace_name = grant.namespace_name();
  c.namespace_generation = grant.generation();
  c.semantic_digest = reuse_semantic_digest(m);
  c.layout_digest = m.cache_layout_sha256;
  c.index_version = 7;
  c.tree_version = TreeVersion{0};
  c.covered_interval = covered;
  c.physical_handles = handles;
  c.pool_generations = {{PoolId{1}, PoolGeneration{3}}, {PoolId{2}, PoolGeneration{3}}};
  c.token_witness = covered_tokens_digest(std::span<const uint32_t>(m.covered_token_ids.data(), 16));

  const std::vector<LeaseId> leases{LeaseId{request_id * 10 + 1}, LeaseId{request_id * 10 + 2}};
  return ReuseScenario{
      ReuseRequest{RequestId{request_id}, RequestGeneration{1}, grant.namespace_name(), true},
      AuthorizationAnswer(grant),
      KeyEvidence{m},
      CandidateAnswer(c),
      LeaseAnswer(LeaseGrant{leases, handles, {}}),
      VersionAnswer{7, TreeVersion{0}, c.pool_generations, 16, 7},
      PositionAnswer(PositionsNotApplicable{}),
      MappingAnswer{32, 32},
      SnapshotAnswer{ExecutionSnapshotVersion{41}, ExecutionSnapshotVersion{41}, "paged_decode_p16_v1",
                     "paged_decode_p16_v1", handles, covered},
      ExecutionAnswer{ExecutionSnapshotVersion{41}, true},
      CompletionAnswer(LeasesReleased{leases}),
  };
}

// Drives an attempt step by step until it is rejected or completes, checking
// validate() after every transition. Errors fail the test.
struct DriveResult {
  ReuseAttempt attempt;
  std::optional<ReuseRejection> rejection;
  std::optional<ExecutableReuseReceipt> receipt;
};

inline DriveResult drive(const ReuseScenario& s) {
  auto begun = ReuseAttempt::begin(s.request);
  REQUIRE(begun.ok());
  DriveResult out{std::move(begun).value(), std::nullopt, std::nullopt};
  for (uint8_t i = 1; i <= kReuseStepCount; ++i) {
    const auto step = static_cast<ReuseStep>(i);
    auto r = out.attempt.advance(s.evidence(step));
    INFO("step " << int(i) << ": " << (r.ok() ? std::string("ok") : r.error().describe()));
    REQUIRE(r.ok());
    REQUIRE(out.attempt.validate().ok());
    if (r->receipt) out.receipt = r->receipt;
    if (r->rejection) {
      out.rejection = r->rejection;
      break;
    }
  }
  return out;
}

}  // namespace kvrt::test
