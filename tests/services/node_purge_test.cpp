// A namespace purge as the node's authorization owner runs it (0x0CE
// "Revocation And Purge"), driven here without actors: NodePurge asks for
// each owner's part in the spec's order and the test answers as the owners
// would. Expected values come from the configuration (generation 4, so the
// successor is 5) and from the answers the test gave, not from the owner.
// A seeded randomised run mixes receipt counts, waits and deadlines.
#include "services/authorization/node_purge.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "tests/services/admin_session_fixture.hpp"

namespace kvrt::test {
namespace {

NamespacePurgeRequest purge_of(const std::string& ns, uint32_t deadline_ms, bool overwrite) {
  return NamespacePurgeRequest{{}, ns, InvalidationCause::weights, "", deadline_ms, overwrite};
}

const std::vector<std::string> kSevenSteps{"stop_admitting", "advance_generation", "invalidate_index",
                                           "drain_leases",   "release_physical",   "remove_external_copies",
                                           "complete"};

std::vector<std::string> step_names(const NamespacePurgeReceipt& r) {
  std::vector<std::string> out;
  for (const PurgeStepRecord& s : r.steps) out.push_back(s.step);
  return out;
}

uint64_t stat(const OwnerStats& s, const std::string& name) {
  for (const StatValue& v : s.values)
    if (v.name == name) return static_cast<uint64_t>(v.value);
  FAIL("no statistic " << name);
  return 0;
}

}  // namespace

TEST_CASE("a node purge runs the seven steps in order, waits for receipts, then revokes them",
          "[node][services][authorization][purge]") {
  AdminServed s = serve_with_admin();
  REQUIRE(s.svc.authorize(s.worker, AuthorizeRequest{{}, "d/a"}).value().receipt.generation.value == 4);
  (void)s.svc.authorize(s.worker, AuthorizeRequest{{}, "d/b"}).value();

  const uint64_t t0 = 1'000'000;
  Result<NodePurge> begun = NodePurge::begin(s.svc, s.admin, purge_of("d/a", 10, true), t0);
  REQUIRE(begun.ok());
  NodePurge run = std::move(begun).value();
  // Steps 1-2 are done: g+1 admits, g's grant ended, d/b untouched.
  CHECK(s.svc.authority().registry().current("d/a")->generation().value == 5);

  // Step 3: the index owner advances to 5 and gives back 3 pages.
  REQUIRE(std::holds_alternative<PurgeIndexAdvance>(*run.next()));
  CHECK(std::get<PurgeIndexAdvance>(*run.next()).successor.value == 5);
  run.answer(3, t0 + 100);
  // Step 4: two receipts of generation 4 are open; one ends, the other
  // outlives the 10 ms deadline and is revoked.
  REQUIRE(std::holds_alternative<PurgeReceiptCount>(*run.next()));
  CHECK(std::get<PurgeReceiptCount>(*run.next()).generation.value == 4);
  CHECK_FALSE(std::get<PurgeReceiptCount>(*run.next()).revoke);
  run.answer(2, t0 + 200);
  REQUIRE(std::holds_alternative<PurgeWait>(*run.next()));
  run.answer(0, t0 + 2'200);
  run.answer(1, t0 + 2'300);
  REQUIRE(std::holds_alternative<PurgeWait>(*run.next()));
  run.answer(0, t0 + 10'500);
  run.answer(1, t0 + 10'600);  // past the deadline
  REQUIRE(std::holds_alternative<PurgeReceiptCount>(*run.next()));
  CHECK(std::get<PurgeReceiptCount>(*run.next()).revoke);
  run.answer(1, t0 + 10'700);
  // Step 5 with overwrite: the allocator marks 64 blocks.
  REQUIRE(std::holds_alternative<PurgeBlockOverwrite>(*run.next()));
  run.answer(64, t0 + 10'800);
  // Step 6: the session tier deletes its 3 saves of generation 4.
  REQUIRE(std::holds_alternative<PurgeTierRetire>(*run.next()));
  CHECK(std::get<PurgeTierRetire>(*run.next()).generation.value == 4);
  CHECK(std::get<PurgeTierRetire>(*run.next()).namespace_name == "d/a");
  run.answer(3, t0 + 10'850);
  // Step 7: nothing of generation 4 appeared meanwhile.
  REQUIRE(std::holds_alternative<PurgeReceiptCount>(*run.next()));
  CHECK(std::get<PurgeReceiptCount>(*run.next()).revoke);
  run.answer(0, t0 + 10'900);
  // Then the index drops what the revoked receipt had locked: 2 more pages.
  REQUIRE(std::holds_alternative<PurgeIndexAdvance>(*run.next()));
  CHECK(std::get<PurgeIndexAdvance>(*run.next()).successor.value == 5);
  run.answer(2, t0 + 11'000);
  REQUIRE(run.finished());

  const NamespacePurgeReceipt r = run.result().value();
  CHECK(step_names(r) == kSevenSteps);
  CHECK(r.purged_generation.value == 4);
  CHECK(r.successor_generation.value == 5);
  CHECK(r.ended_grants == 1);
  CHECK(r.dropped_index_pages == 3 + 2);
  CHECK(r.receipts_drained == 1);
  CHECK(r.receipts_revoked == 1);
  CHECK(r.blocks_marked_for_overwrite == 64);
  CHECK(r.external_copies == 3);
  CHECK(r.duration_us == 11'000);
  for (size_t i = 1; i < r.steps.size(); ++i) CHECK(r.steps[i - 1].at_us <= r.steps[i].at_us);
  // The authority's purge is complete: the namespace admits, no purge open.
  const PurgeProgress* p = s.svc.authority().purge(run.id());
  REQUIRE(p != nullptr);
  CHECK(p->completed());
  CHECK(p->pending.empty());
  CHECK(s.svc.authority().admitting("d/a"));
  REQUIRE(s.svc.validate().ok());
  const OwnerStats st = s.svc.stats();
  CHECK(stat(st, "purges_completed") == 1);
  CHECK(stat(st, "purge_receipts_revoked") == 1);
  CHECK(stat(st, "last_purge_us") == 11'000);
}

TEST_CASE("a refused purge changes nothing, and an open purge refuses another and an invalidation",
          "[node][services][authorization][purge]") {
  AdminServed s = serve_with_admin();
  const Sha256Digest before = s.svc.authority().state_digest();
  // A worker may not purge; an unknown namespace; a cause the pools cannot follow.
  CHECK(NodePurge::begin(s.svc, s.worker, purge_of("d/a", 0, false), 0).error().code ==
        ErrorCode::authorization_route_denied);
  CHECK(NodePurge::begin(s.svc, s.admin, purge_of("d/zz", 0, false), 0).error().code ==
        ErrorCode::authorization_unknown_namespace);
  NamespacePurgeRequest shard = purge_of("d/a", 0, false);
  shard.cause = InvalidationCause::shard;
  const Error e = NodePurge::begin(s.svc, s.admin, shard, 0).error();
  CHECK(e.code == ErrorCode::invalid_argument);
  CHECK(e.field == "cause");
  CHECK(s.svc.authority().state_digest() == before);
  CHECK(s.svc.authority().registry().current("d/a")->generation().value == 4);

  NodePurge open = NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, false), 0).value();
  CHECK(NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, false), 0).error().code ==
        ErrorCode::authorization_purge_pending);
  CHECK(s.svc.apply(s.admin, NamespaceInvalidateRequest{{}, "d/a", InvalidationCause::adapter, "v9"}).error().code ==
        ErrorCode::authorization_purge_pending);
  // Another namespace purges meanwhile.
  CHECK(NodePurge::begin(s.svc, s.admin, purge_of("d/b", 0, false), 0).ok());
  // Release mode: no overwrite action; a deadline of 0 revokes at once.
  open.answer(0, 10);
  open.answer(2, 20);
  REQUIRE(std::holds_alternative<PurgeReceiptCount>(*open.next()));
  CHECK(std::get<PurgeReceiptCount>(*open.next()).revoke);
  open.answer(2, 30);
  REQUIRE(std::holds_alternative<PurgeTierRetire>(*open.next()));  // step 6: a node without a tier
  open.answer(0, 35);
  REQUIRE(std::holds_alternative<PurgeReceiptCount>(*open.next()));  // step 7's check
  open.answer(0, 40);
  REQUIRE(std::holds_alternative<PurgeIndexAdvance>(*open.next()));  // and the index's last drop
  open.answer(0, 45);
  REQUIRE(open.finished());
  const NamespacePurgeReceipt r = open.result().value();
  CHECK(step_names(r) == kSevenSteps);
  CHECK(r.receipts_revoked == 2);
  CHECK(r.receipts_drained == 0);
  CHECK(r.blocks_marked_for_overwrite == 0);
  // A second purge of d/a now goes to generation 6.
  NodePurge again = NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, false), 50).value();
  CHECK(std::get<PurgeIndexAdvance>(*again.next()).successor.value == 6);
}

TEST_CASE("a node purge stopped by an unreachable owner answers the owner's error and stays open",
          "[node][services][authorization][purge]") {
  AdminServed s = serve_with_admin();
  NodePurge run = NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, false), 0).value();
  run.failed(make_error(ErrorCode::rpc_failed, "prefix_index went away", "prefix_index"), 5);
  REQUIRE(run.finished());
  CHECK(run.result().error().code == ErrorCode::rpc_failed);
  CHECK(s.svc.authority().standing("d/a").value().open_purge.has_value());
  CHECK(stat(s.svc.stats(), "purges_stopped") == 1);
}

TEST_CASE("a fault after any step stops the purge open, and the next purge call resumes it to one successor",
          "[node][services][authorization][purge][faults]") {
  for (const std::string& point : AuthorizationService::purge_fault_point_names()) {
    INFO("fault point " << point);
    AdminServed s = serve_with_admin();
    s.svc.purge_faults().arm(point);
    auto answer_all = [](NodePurge& run, uint64_t& now) {
      while (!run.finished()) {
        now += 100;
        const NodePurgeAction a = *run.next();
        run.answer(std::holds_alternative<PurgeBlockOverwrite>(a) ? 7 : 0, now);
      }
    };
    uint64_t now = 0;
    NodePurge first = NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, true), now).value();
    answer_all(first, now);
    const Error e = first.result().error();
    CHECK(e.code == ErrorCode::fault_injected);
    CHECK(e.reason.find(point) != std::string::npos);
    // Stopped between two steps: a state the authority accepts, the purge
    // open at the step before the fault, nothing unacknowledged.
    REQUIRE(s.svc.validate().ok());
    const PurgeProgress* p = s.svc.authority().purge(first.id());
    REQUIRE(p != nullptr);
    CHECK("after_" + std::string(to_string(p->last_step)) == point);
    CHECK(p->pending.empty());
    CHECK(stat(s.svc.stats(), "purges_stopped") == 1);
    // Without a resumer the open purge refuses the call; with one it resumes
    // (its own overwrite mode, whatever the call asks) and completes at
    // generation 5, not 6.
    CHECK(NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, false), now).error().code ==
          ErrorCode::authorization_purge_pending);
    NodePurge resumed =
        NodePurge::begin(s.svc, s.admin, purge_of("d/a", 0, false), now, [](PurgeId) { return false; }).value();
    CHECK(resumed.id() == first.id());
    answer_all(resumed, now);
    const NamespacePurgeReceipt r = resumed.result().value();
    CHECK("after_" + r.resumed_after == point);
    const auto stopped_at = std::find(kSevenSteps.begin(), kSevenSteps.end(), r.resumed_after);
    REQUIRE(stopped_at != kSevenSteps.end());
    CHECK(step_names(r) == std::vector<std::string>(stopped_at + 1, kSevenSteps.end()));
    CHECK(r.successor_generation.value == 5);
    const bool overwrite_done_before = std::distance(kSevenSteps.begin(), stopped_at) >= 4;
    CHECK(r.blocks_marked_for_overwrite == (overwrite_done_before ? 0u : 7u));
    CHECK(s.svc.authority().purge(first.id())->completed());
    CHECK(s.svc.authority().registry().current("d/a")->generation().value == 5);
    REQUIRE(s.svc.validate().ok());
  }
}

TEST_CASE("seeded node purges: every run ends in the seven steps with counts that add up",
          "[node][services][authorization][purge][property]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  AdminServed s = serve_with_admin();
  uint64_t now = 0, generation = 4;
  for (int purge = 0; purge < 50; ++purge) {
    const uint32_t deadline_ms = static_cast<uint32_t>(rng() % 6);
    const bool overwrite = rng() % 2 == 0;
    NodePurge run = NodePurge::begin(s.svc, s.admin, purge_of("d/a", deadline_ms, overwrite), now).value();
    const uint64_t start = now;
    uint64_t open_receipts = rng() % 5, revoked = 0, first = open_receipts, marked = 0;
    bool counted = false;
    while (!run.finished()) {
      now += 1 + rng() % 1500;
      const NodePurgeAction a = *run.next();
      if (const auto* c = std::get_if<PurgeReceiptCount>(&a)) {
        if (c->revoke) {
          revoked += open_receipts;
          run.answer(open_receipts, now);
          open_receipts = 0;
        } else {
          if (counted && open_receipts > 0 && rng() % 3 == 0) --open_receipts;  // a holder released
          counted = true;
          run.answer(open_receipts, now);
        }
      } else if (std::holds_alternative<PurgeBlockOverwrite>(a)) {
        marked = 1 + rng() % 100;
        run.answer(marked, now);
      } else {
        run.answer(0, now);
      }
    }
    const NamespacePurgeReceipt r = run.result().value();
    REQUIRE(step_names(r) == kSevenSteps);
    CHECK(r.purged_generation.value == generation);
    CHECK(r.successor_generation.value == generation + 1);
    CHECK(r.receipts_revoked == revoked);
    CHECK(r.receipts_drained + r.receipts_revoked == first);
    CHECK(r.blocks_marked_for_overwrite == (overwrite ? marked : 0));
    CHECK(r.duration_us == now - start);
    // Revocation only after the deadline, unless nothing was left open.
    if (r.receipts_revoked > 0) CHECK(r.steps[3].at_us >= uint64_t{deadline_ms} * 1000);
    REQUIRE(s.svc.validate().ok());
    ++generation;
  }
  CHECK(stat(s.svc.stats(), "purges_completed") == 50);
}

}  // namespace kvrt::test
