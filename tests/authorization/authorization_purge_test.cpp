// The strict namespace revocation protocol of spec 0x0CE ("Revocation And
// Purge"), steps 1-7, one receipt per step; a step whose precondition does
// not hold answers authorization_purge_pending and changes nothing.
#include <catch2/catch.hpp>

#include "tests/support/authorization_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

PurgeStepReceipt advance(NamespaceAuthority& a, PurgeId id, PurgeStep expected) {
  auto r = a.advance_purge(id);
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  CHECK(r->step == expected);
  REQUIRE(a.validate().ok());
  return *r;
}

void pending_unchanged(NamespaceAuthority& a, PurgeId id) {
  const Sha256Digest before = a.state_digest();
  auto r = a.advance_purge(id);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::authorization_purge_pending);
  CHECK(a.state_digest() == before);
  REQUIRE(a.validate().ok());
}

void acknowledge_all(NamespaceAuthority& a, PurgeId id, const PurgeStepReceipt& r) {
  for (const PurgeWorkItem& w : r.work_items) REQUIRE(a.acknowledge_purge_work(id, w.id).ok());
}

}  // namespace

TEST_CASE("purge walks steps 1-7 and waits for leases and receipts of g", "[authorization][purge]") {
  auto f = AuthorityFixture::make();
  NamespaceAuthority& a = f.authority;
  const AuthorizedLookup old = f.grant("worker-a", kTenantA);
  const AuthorizedLookup other = f.grant("worker-b", kTenantB);
  auto lease = a.record_hold(old, HoldKind::lease, 901);
  auto receipt = a.record_hold(old, HoldKind::executable_receipt, 902);
  REQUIRE((lease.ok() && receipt.ok()));

  // Step 1: stop admitting g = 4.
  auto s1 = a.begin_purge(kTenantA, adapter_purge());
  REQUIRE(s1.ok());
  const PurgeId id = s1->purge;
  CHECK(s1->step == PurgeStep::stop_admitting);
  CHECK(s1->purged_generation == NamespaceGeneration{4});
  CHECK(s1->live_leases == 1);
  CHECK(s1->live_receipts == 1);
  CHECK_FALSE(a.admitting(kTenantA));
  CHECK(a.check(old).error().code == ErrorCode::authorization_namespace_closed);
  CHECK(a.authorize(f.principal("worker-a"), kTenantA).error().code == ErrorCode::authorization_namespace_closed);
  CHECK(a.record_hold(old, HoldKind::lease, 903).error().code == ErrorCode::authorization_namespace_closed);
  CHECK(a.check(other).ok());  // other namespaces are untouched
  CHECK(a.begin_purge(kTenantA, adapter_purge()).error().code == ErrorCode::authorization_purge_pending);
  REQUIRE(a.validate().ok());

  // Step 2: g+1 = 5 admits, every grant of g ended.
  const PurgeStepReceipt s2 = advance(a, id, PurgeStep::advance_generation);
  CHECK(s2.successor_generation == NamespaceGeneration{5});
  REQUIRE(s2.invalidation.has_value());
  CHECK(s2.invalidation->cause == InvalidationCause::adapter);
  CHECK(s2.invalidation->old_live_admissions == 2);  // the two holds keep g frozen
  CHECK(a.registry().find(kTenantA, NamespaceGeneration{4})->state == GenerationState::frozen);
  CHECK(a.check(old).error().code == ErrorCode::authorization_stale_generation);
  const AuthorizedLookup fresh = f.grant("worker-a", kTenantA);
  CHECK(fresh.generation() == NamespaceGeneration{5});
  CHECK(fresh.grant_id() != old.grant_id());

  // Step 3: one drop item per index owner; step 4 waits for them.
  const PurgeStepReceipt s3 = advance(a, id, PurgeStep::invalidate_index);
  REQUIRE(s3.work_items.size() == 2);
  CHECK(s3.work_items[0].kind == PurgeWorkKind::drop_index_entries);
  CHECK(s3.work_items[0].owner == "prefix_index");
  CHECK(s3.work_items[1].owner == "radix_index");
  CHECK(s3.work_items[1].generation == NamespaceGeneration{4});
  pending_unchanged(a, id);
  REQUIRE(a.acknowledge_purge_work(id, s3.work_items[0].id).ok());
  pending_unchanged(a, id);
  CHECK_FALSE(a.acknowledge_purge_work(id, s3.work_items[0].id).ok());  // twice
  REQUIRE(a.acknowledge_purge_work(id, s3.work_items[1].id).ok());

  // Step 4 (wait mode): no cancel items; step 5 waits until the lease is gone.
  const PurgeStepReceipt s4 = advance(a, id, PurgeStep::drain_leases);
  CHECK(s4.work_items.empty());
  CHECK(s4.live_leases == 1);
  pending_unchanged(a, id);
  REQUIRE(a.release_hold(*lease).ok());

  // Step 5: overwrite physical objects (the fixture's threat model).
  const PurgeStepReceipt s5 = advance(a, id, PurgeStep::release_physical);
  REQUIRE(s5.work_items.size() == 1);
  CHECK(s5.work_items[0].kind == PurgeWorkKind::release_physical_objects);
  CHECK(s5.work_items[0].owner == "allocator");
  CHECK(s5.work_items[0].physical_mode == PhysicalReleaseMode::overwrite);
  pending_unchanged(a, id);
  acknowledge_all(a, id, s5);

  // Step 6: the M5.5 directory removes external-tier copies.
  const PurgeStepReceipt s6 = advance(a, id, PurgeStep::remove_external_copies);
  REQUIRE(s6.work_items.size() == 1);
  CHECK(s6.work_items[0].owner == "m5.5-directory");
  acknowledge_all(a, id, s6);

  // Step 7: completion only when no executable receipt of g remains.
  pending_unchanged(a, id);
  REQUIRE(a.release_hold(*receipt).ok());
  CHECK(a.registry().find(kTenantA, NamespaceGeneration{4})->state == GenerationState::reclaimed);
  const auto reclaimed = a.drain_reclamations();
  REQUIRE(reclaimed.size() == 1);
  CHECK(reclaimed[0].generation == NamespaceGeneration{4});
  const PurgeStepReceipt s7 = advance(a, id, PurgeStep::complete);
  CHECK(s7.live_receipts == 0);
  CHECK(a.purge(id)->completed());
  CHECK(a.purge(id)->receipts.size() == 7);
  CHECK(a.advance_purge(id).error().code == ErrorCode::invalid_argument);
  CHECK(a.admitting(kTenantA));
  CHECK(a.check(fresh).ok());
  REQUIRE(a.validate().ok());
}

TEST_CASE("purge in cancel mode issues one cancel item per live lease of g", "[authorization][purge]") {
  auto f = AuthorityFixture::make();
  NamespaceAuthority& a = f.authority;
  const AuthorizedLookup wa = f.grant("worker-a", kTenantA);
  const AuthorizedLookup wab = f.grant("worker-ab", kTenantA);
  auto l1 = a.record_hold(wa, HoldKind::lease, 11);
  auto l2 = a.record_hold(wab, HoldKind::lease, 12);
  auto lb = a.record_hold(f.grant("worker-b", kTenantB), HoldKind::lease, 13);  // another namespace
  REQUIRE((l1.ok() && l2.ok() && lb.ok()));
  PurgeRequest req = adapter_purge(/*cancel_leases=*/true);
  req.index_owners = {"prefix_index"};
  req.external_tiers.clear();
  auto s1 = a.begin_purge(kTenantA, req);
  REQUIRE(s1.ok());
  const PurgeId id = s1->purge;
  advance(a, id, PurgeStep::advance_generation);
  acknowledge_all(a, id, advance(a, id, PurgeStep::invalidate_index));
  const PurgeStepReceipt s4 = advance(a, id, PurgeStep::drain_leases);
  REQUIRE(s4.work_items.size() == 2);
  CHECK(s4.work_items[0].kind == PurgeWorkKind::cancel_lease);
  CHECK(s4.work_items[0].hold == *l1);
  CHECK(s4.work_items[0].subject == 11);
  CHECK(s4.work_items[1].hold == *l2);
  // A cancel item completes by releasing its hold, not by acknowledgement.
  CHECK(a.acknowledge_purge_work(id, s4.work_items[0].id).error().code == ErrorCode::invalid_argument);
  pending_unchanged(a, id);
  REQUIRE(a.release_hold(*l1).ok());
  pending_unchanged(a, id);
  REQUIRE(a.release_hold(*l2).ok());
  acknowledge_all(a, id, advance(a, id, PurgeStep::release_physical));
  const PurgeStepReceipt s6 = advance(a, id, PurgeStep::remove_external_copies);
  CHECK(s6.work_items.empty());  // no hold to wait for: the node's purge asks the session tier itself (NodePurge)
  advance(a, id, PurgeStep::complete);
  CHECK(a.live_holds(kTenantB, NamespaceGeneration{1}, HoldKind::lease) == 1);
  REQUIRE(a.validate().ok());
}

TEST_CASE("a purge that could not advance the generation never closes the namespace", "[authorization][purge]") {
  auto f = AuthorityFixture::make();
  NamespaceAuthority& a = f.authority;
  const Sha256Digest before = a.state_digest();
  PurgeRequest relabel;  // claims an adapter change but changes nothing: a relabelling
  relabel.cause = InvalidationCause::adapter;
  relabel.successor = base_facts();
  CHECK(a.begin_purge(kTenantA, relabel).error().code == ErrorCode::invalid_argument);
  PurgeRequest dup = adapter_purge();
  dup.index_owners = {"prefix_index", "prefix_index"};
  CHECK(a.begin_purge(kTenantA, dup).error().field == "index_owners[0]");
  CHECK(a.begin_purge("prod-eu1/none", adapter_purge()).error().code == ErrorCode::authorization_unknown_namespace);
  CHECK(a.advance_purge(PurgeId{42}).error().code == ErrorCode::invalid_argument);
  CHECK(a.state_digest() == before);
  CHECK(a.admitting(kTenantA));
  REQUIRE(a.validate().ok());
}
