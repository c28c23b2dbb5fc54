// The checked synthetic counts of spec 0x0CF, produced by driving twelve
// ReuseAttempts through the 0x0CD transaction with the failures the spec
// lists, and counting their outcomes in the funnel:
//
//   requests 12, authorized 11 (1 authorization rejection), candidates 9
//   (2 index misses), compatible 7 (2 semantic/layout rejections), current
//   generations 6 (1 stale generation), leased 6, mapping-ready 5 (1 mapping
//   frontier lag), current snapshots 4 (1 stale execution snapshot), executed 4.
#include <catch2/catch.hpp>

#include "tests/reuse/reuse_fixture.hpp"
#include "services/identity/layout_loader.hpp"

using namespace kvrt;
using namespace kvrt::test;

TEST_CASE("twelve attempts reproduce the 0x0CF funnel 12/11/9/7/6/6/5/4/4", "[reuse][telemetry][funnel]") {
  auto f = AuthorityFixture::make();
  const AuthorizedLookup grant = f.grant("worker-a", kTenantA);
  std::vector<ReuseScenario> attempts;
  for (uint64_t i = 0; i < 12; ++i) attempts.push_back(happy_scenario(f.authority, grant, 100 + i));

  // 1 authorization rejection: worker-b asks for tenant-a (cross-namespace).
  auto denied = f.authority.authorize(f.principal("worker-b"), kTenantA);
  REQUIRE_FALSE(denied.ok());
  attempts[0].authorization = AuthorizationDenied{denied.error()};
  // 2 index misses.
  attempts[1].candidate = IndexMiss{};
  attempts[2].candidate = IndexMiss{};
  // 2 semantic/layout rejections: a producer under another adapter, and one
  // whose bytes use the single-group layout.
  {
    CacheCompatibilityManifest other = attempts[3].key.manifest;
    other.adapter_identity = "lora-legal-v3";
    attempts[3].hit().semantic_digest = reuse_semantic_digest(other);
    auto single = load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/single-group-tp2.toml");
    REQUIRE(single.ok());
    attempts[4].hit().layout_digest = single->digest();
  }
  // 1 stale generation: an entry tenant-a published at generation 3, before
  // the last invalidation, still in the index.
  attempts[5].hit().namespace_generation = NamespaceGeneration{3};
  // 1 mapping frontier lag: the last 16 rows are not mapped yet.
  attempts[6].mapping.ready_frontier_tokens = 16;
  // 1 stale execution snapshot: a concurrent mutation moved the snapshot.
  attempts[7].snapshot.frozen_version = ExecutionSnapshotVersion{42};
  // attempts 8-11 execute.

  ReuseFunnel funnel;
  std::vector<ExecutableReuseReceipt> receipts;
  for (const ReuseScenario& s : attempts) {
    DriveResult d = drive(s);
    const auto outcome = d.attempt.funnel_outcome();
    REQUIRE(outcome.has_value());
    funnel.record(*outcome);
    if (!d.rejection) {
      CHECK(d.attempt.phase() == ReusePhase::completed);
      REQUIRE(d.receipt.has_value());
      receipts.push_back(*d.receipt);
    }
    REQUIRE(funnel.validate().ok());
  }

  const FunnelCounts c = funnel.counts();
  CHECK(c.at(FunnelStage::requests) == 12);
  CHECK(c.at(FunnelStage::authorized) == 11);
  CHECK(c.at(FunnelStage::candidates) == 9);
  CHECK(c.at(FunnelStage::compatible) == 7);
  CHECK(c.at(FunnelStage::current_generation) == 6);
  CHECK(c.at(FunnelStage::leased) == 6);
  CHECK(c.at(FunnelStage::mapping_ready) == 5);
  CHECK(c.at(FunnelStage::current_snapshot) == 4);
  CHECK(c.at(FunnelStage::executed) == 4);
  // Every difference is one named bucket.
  CHECK(funnel.rejections(ReuseBucket::authorization) == 1);
  CHECK(funnel.rejections(RejectionReason::namespace_denied) == 1);
  CHECK(funnel.rejections(ReuseBucket::index_miss) == 2);
  CHECK(funnel.rejections(ReuseBucket::incompatible) == 2);
  CHECK(funnel.rejections(RejectionReason::semantic_mismatch) == 1);
  CHECK(funnel.rejections(RejectionReason::layout_mismatch) == 1);
  CHECK(funnel.rejections(ReuseBucket::stale_generation) == 1);
  CHECK(funnel.rejections(ReuseBucket::lease) == 0);
  CHECK(funnel.rejections(ReuseBucket::mapping_lag) == 1);
  CHECK(funnel.rejections(ReuseBucket::stale_snapshot) == 1);
  CHECK(funnel.rejections(ReuseBucket::execution) == 0);
  CHECK(funnel.cross_namespace_rejects() == 1);
  CHECK(funnel.generation_version_rejects() == 2);

  // The four executable hits bind the whole evidence tuple.
  REQUIRE(receipts.size() == 4);
  for (const ExecutableReuseReceipt& r : receipts) {
    CHECK(r.namespace_id == kTenantA);
    CHECK(r.namespace_generation == NamespaceGeneration{4});
    CHECK(r.index_version == 7);
    CHECK(r.covered_interval == TokenInterval{0, 16});
    CHECK(r.leases.size() == 2);
    CHECK(r.collision_witness_verified);
    CHECK(r.required_frontier_tokens == 32);
    CHECK(r.ready_frontier_tokens == 32);
    CHECK(r.execution_snapshot_version == ExecutionSnapshotVersion{41});
    CHECK(r.kernel_abi_id == "paged_decode_p16_v1");
  }
}
