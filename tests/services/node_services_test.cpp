// The node-side owner services without actors ("Deterministic
// actor tests of each owner's protocol"): every actor handler is one call on
// these classes, so driving them directly is the owners' protocol, message by
// message, with no scheduler in the way. Randomised with a printed seed.
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "services/allocator/allocator_service.hpp"
#include "services/authorization/authorization_service.hpp"
#include "services/prefix/prefix_service.hpp"
#include "tests/support/identity_fixtures.hpp"

namespace kvrt::test {
namespace {

BlockAllocatorConfig small_pools(uint32_t groups, uint32_t blocks) {
  BlockAllocatorConfig c;
  c.block_size = 16;
  for (uint32_t g = 0; g < groups; ++g)
    c.groups.push_back(GroupPoolConfig{CacheGroupId{g}, PoolId{1 + g}, PoolGeneration{1}, blocks, 0, 64, {}});
  return c;
}

int64_t stat(const OwnerStats& s, const std::string& name) {
  for (const StatValue& v : s.values)
    if (v.name == name) return v.value;
  FAIL("no stat " << name);
  return -1;
}

}  // namespace

TEST_CASE("session holdings index every object under exactly one session", "[node][services]") {
  SessionHoldings<uint64_t> h("request");
  h.record(SessionId{1}, 10);
  h.record(SessionId{1}, 11);
  h.record(SessionId{2}, 20);
  CHECK(h.validate().ok());
  CHECK(h.check(SessionId{1}, 10, "f").ok());
  CHECK(h.check(SessionId{2}, 10, "f").error().code == ErrorCode::not_owner);
  CHECK(h.check(kNodeSession, 10, "f").ok());
  CHECK(h.check(SessionId{2}, 99, "f").ok());  // unknown: the core answers
  h.forget(10);
  CHECK(h.held_by(SessionId{1}) == std::vector<uint64_t>{11});
  h.forget(11);
  CHECK(h.sessions() == 1);
  CHECK(h.validate().ok());
}

TEST_CASE("random multi-session allocator traffic: ownership holds and ending every session leaks nothing",
          "[node][services][property]") {
  const uint64_t seed = GENERATE(1ull, 2ull, 20261130ull);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  AllocatorService svc(BlockAllocator::create(small_pools(2, 96)).value());
  struct Held {
    SessionId session;
    RequestFence fence;
  };
  std::vector<Held> requests;
  std::vector<std::pair<SessionId, LeaseId>> leases;
  std::map<uint64_t, bool> open_sessions{{1, true}, {2, true}, {3, true}};
  auto pick_session = [&] { return SessionId{1 + rng() % 3}; };
  auto refresh = [&](Held& h, const AllocatorOutcome& o) {
    if (const auto* r = std::get_if<AllocationReceipt>(&o); r && r->outcome == AllocationOutcome::committed) {
      h.fence.generation = r->request_generation;
      h.fence.table_version = r->table_version_after;
    }
  };
  for (int step = 0; step < 1500; ++step) {
    INFO("step " << step);
    const uint32_t kind = rng() % 8;
    const SessionId s = pick_session();
    if (kind == 0 || requests.empty()) {
      const AllocatorOutcome o = svc.apply_one(s, AllocateOp{1 + static_cast<uint32_t>(rng() % 60), {}, std::nullopt});
      if (const auto* r = std::get_if<AllocationReceipt>(&o); r && r->outcome == AllocationOutcome::committed)
        requests.push_back(Held{s, RequestFence{r->request_id, r->request_generation, r->table_version_after}});
    } else if (kind == 1) {  // another session acts on a request it does not hold
      Held& h = requests[rng() % requests.size()];
      SessionId other{h.session.value % 3 + 1};
      const StateDigest before = svc.core().state_digest();
      const AllocatorOutcome o = svc.apply_one(other, ReleaseOp{h.fence, ReleaseReason::finished});
      REQUIRE(std::holds_alternative<Error>(o));
      CHECK(std::get<Error>(o).code == ErrorCode::not_owner);
      CHECK(svc.core().state_digest() == before);
    } else if (kind == 2) {
      Held& h = requests[rng() % requests.size()];
      const Result<uint32_t> ctx = svc.core().context_tokens(h.fence.request);
      REQUIRE(ctx.ok());
      refresh(h, svc.apply_one(h.session, CommitRowsOp{h.fence, *ctx}));
    } else if (kind == 3) {
      Held& h = requests[rng() % requests.size()];
      refresh(h, svc.apply_one(h.session, AppendOp{h.fence, {}, std::nullopt}));
    } else if (kind == 4) {
      Held& h = requests[rng() % requests.size()];
      const AllocatorOutcome o = svc.apply_one(h.session, ForkOp{h.fence});
      if (const auto* r = std::get_if<AllocationReceipt>(&o); r && r->outcome == AllocationOutcome::committed)
        requests.push_back(Held{h.session, RequestFence{r->request_id, r->request_generation, r->table_version_after}});
    } else if (kind == 5) {
      const size_t i = rng() % requests.size();
      const AllocatorOutcome o =
          svc.apply_one(requests[i].session, ReleaseOp{requests[i].fence, ReleaseReason::finished});
      INFO((std::holds_alternative<Error>(o) ? std::get<Error>(o).describe() : std::string("receipt")));
      CHECK(std::holds_alternative<ReleaseResult>(o));
      requests.erase(requests.begin() + static_cast<long>(i));
    } else if (kind == 6) {
      const Held& h = requests[rng() % requests.size()];
      const Result<std::vector<PhysicalBlockHandle>> table = svc.core().table(h.fence.request, 0);
      if (table.ok() && !table->empty()) {
        const AllocatorOutcome o = svc.apply_one(s, AcquireLeaseOp{table->front()});
        if (const auto* l = std::get_if<LeaseReceipt>(&o)) leases.emplace_back(s, l->lease);
      }
    } else if (!leases.empty()) {
      const size_t i = rng() % leases.size();
      CHECK(std::holds_alternative<LeaseReleaseReceipt>(
          svc.apply_one(leases[i].first, ReleaseLeaseOp{leases[i].second})));
      leases.erase(leases.begin() + static_cast<long>(i));
    }
    const Status v = svc.validate();
    INFO((v.ok() ? std::string("ok") : v.error().describe()));
    REQUIRE(v.ok());
    if (step % 500 == 499) {  // a worker dies: its session ends through normal operations
      const SessionId dead = pick_session();
      uint32_t held = 0, held_leases = 0;
      for (const Held& h : requests) held += h.session == dead ? 1 : 0;
      for (const auto& l : leases) held_leases += l.first == dead ? 1 : 0;
      // Half the reclaims are interrupted by their fault point after the
      // leases: the requests stay the ended session's (no other session may
      // touch them, every owner validates), and a second end finishes.
      const bool interrupt = rng() % 2 == 0;
      if (interrupt) (void)svc.fault_points().arm(FaultArmRequest{{}, false, {{"allocator.after_reclaim_leases", 1}}});
      SessionReclaim r = svc.end_session(dead);
      CHECK(r.interrupted == (interrupt && held > 0));
      if (r.interrupted) {
        CHECK(r.requests_released == 0);
        CHECK(r.leases_released == held_leases);
        REQUIRE(svc.validate().ok());
        CHECK(stat(svc.stats(), "reclaims_pending") == 1);
        for (const Held& h : requests)
          if (h.session == dead)
            CHECK(std::get<Error>(
                      svc.apply_one(SessionId{dead.value % 3 + 1}, ReleaseOp{h.fence, ReleaseReason::finished}))
                      .code == ErrorCode::not_owner);
        const uint32_t leases_first = r.leases_released;
        r = svc.end_session(dead);
        CHECK_FALSE(r.interrupted);
        CHECK(r.leases_released + leases_first == held_leases);
        CHECK(stat(svc.stats(), "reclaims_pending") == 0);
      }
      (void)svc.fault_points().arm(FaultArmRequest{{}, true, {}});  // a point that was not reached goes
      CHECK(r.requests_released == held);
      std::erase_if(requests, [&](const Held& h) { return h.session == dead; });
      std::erase_if(leases, [&](const auto& l) { return l.first == dead; });
      REQUIRE(svc.validate().ok());
    }
  }
  for (uint64_t s = 1; s <= 3; ++s) svc.end_session(SessionId{s});
  CHECK(svc.validate().ok());
  const OwnerStats stats = svc.stats();
  CHECK(stat(stats, "live_requests") == 0);
  CHECK(stat(stats, "live_leases") == 0);
  CHECK(stat(stats, "leaked_blocks") == 0);
  CHECK(stat(stats, "refcount_delta") == 0);
  CHECK(stat(stats, "pool0_live_blocks") == 0);
}

TEST_CASE("the prefix owner answers a lookup only under a current grant, before the index sees it",
          "[node][services]") {
  PrefixIndexConfig config;
  config.block_tokens = 16;
  config.cache_groups = 1;
  PrefixService svc = PrefixService::create(config).value();
  AllocatorService alloc(BlockAllocator::create(small_pools(1, 32)).value());
  const std::vector<TokenId> prompt(40, 3);
  const PrefixMatchOp match{"t/a", RequestId{0}, RequestGeneration{0}, prompt, LogitsPath::logits_required};

  const int64_t lookups_before = stat(svc.stats(), "lookups");
  const Sha256Digest index_before = svc.index().state_digest();
  Result<PrefixMatchReceipt> ungranted = svc.match(SessionId{1}, match);
  CHECK(ungranted.error().code == ErrorCode::authorization_namespace_denied);
  CHECK(stat(svc.stats(), "lookups") == lookups_before);
  CHECK(svc.index().state_digest() == index_before);

  svc.grant(SessionId{1}, SessionNamespaceGrant{"t/a", NamespaceGeneration{1}, "salt-a", {}, {}});
  svc.grant(SessionId{2}, SessionNamespaceGrant{"t/b", NamespaceGeneration{1}, "salt-b", {}, {}});
  REQUIRE(svc.match(SessionId{1}, match).ok());

  // Session 1 owns a committed 40-row request and publishes its two full blocks.
  const AllocatorOutcome a = alloc.apply_one(SessionId{1}, AllocateOp{40, {}, std::nullopt});
  const auto& r = std::get<AllocationReceipt>(a);
  RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
  const AllocationReceipt c = std::get<AllocationReceipt>(alloc.apply_one(SessionId{1}, CommitRowsOp{fence, 40}));
  fence.table_version = c.table_version_after;
  const PrefixPublishOp publish{"t/a", fence.request, prompt, 0, 2};
  REQUIRE(svc.check_publication(SessionId{1}, publish).ok());
  const BlockTableView view = std::get<BlockTableView>(alloc.apply_one(SessionId{1}, ReadTableOp{fence.request}));
  Result<DecidedPublication> decided = svc.decide_publication(SessionId{1}, publish, view);
  INFO((decided.ok() ? std::string("ok") : decided.error().describe()));
  REQUIRE(decided.ok());
  REQUIRE(decided->tags.size() == 2);
  // The allocator accepts the first tag and refuses the second: the index
  // withdraws the refused identity and still validates.
  std::vector<Status> results{alloc.tag_cache_keys({decided->tags[0]})[0],
                              make_error(ErrorCode::unknown_physical, "refused by the test")};
  CHECK(svc.confirm_tags(decided->tags, results) == 1);
  CHECK(svc.index().cached_blocks() == 1);
  REQUIRE(svc.validate().ok());
  Result<PrefixMatchReceipt> hit = svc.match(SessionId{1}, match);
  CHECK(hit->runtime_hit_tokens == 16);
  // Another namespace, same tokens: its salt separates the chains.
  svc.grant(SessionId{1}, SessionNamespaceGrant{"t/b", NamespaceGeneration{1}, "salt-b", {}, {}});
  PrefixMatchOp other = match;
  other.namespace_name = "t/b";
  CHECK(svc.match(SessionId{1}, other)->runtime_hit_tokens == 0);
  // A newer generation voids the old grant; the old generation's entries never match again.
  svc.advance_generation("t/a", NamespaceGeneration{2});
  CHECK(svc.match(SessionId{1}, match).error().code == ErrorCode::authorization_stale_generation);
  svc.grant(SessionId{1}, SessionNamespaceGrant{"t/a", NamespaceGeneration{2}, "salt-a", {}, {}});
  CHECK(svc.match(SessionId{1}, match)->runtime_hit_tokens == 0);
  svc.end_session(SessionId{1});
  CHECK(svc.match(SessionId{1}, match).error().code == ErrorCode::authorization_namespace_denied);
}

TEST_CASE("the authorization owner opens sessions from tokens and ends grants with the last session",
          "[node][services][authorization]") {
  const AuthorizationConfig config = parse_authorization_config(
                                         "[[namespace]]\ndeployment = \"d\"\ntenant = \"t\"\nsalt = \"s\"\n\n"
                                         "[[principal]]\nname = \"w\"\nnamespaces = [\"d/t\"]\n",
                                         "inline.toml")
                                         .value();
  Result<NamespaceAuthority> authority = NamespaceAuthority::create(config, base_facts());
  REQUIRE(authority.ok());
  std::vector<IssuedToken> tokens = authority->take_issued_tokens();
  REQUIRE(tokens.size() == 1);
  const std::string token = tokens[0].token.reveal_hex();
  AuthorizationService svc(std::move(*authority), config);

  CHECK(svc.open_session(HelloRequest{std::string(32, '0'), "x", 1}).error().code ==
        ErrorCode::authorization_unauthenticated);
  const OpenedSession a = svc.open_session(HelloRequest{token, "w-a", 1}).value();
  const OpenedSession b = svc.open_session(HelloRequest{token, "w-b", 2}).value();
  CHECK(a.principal == "w");
  CHECK(a.allowed_namespaces == std::vector<std::string>{"d/t"});
  CHECK(a.session != b.session);
  const IssuedGrant g = svc.authorize(a.session, AuthorizeRequest{{}, "d/t"}).value();
  CHECK(g.receipt.namespace_name == "d/t");
  // The index owners salt chains with the salt's digest; the salt itself never leaves this owner.
  CHECK(g.for_indexes.salt == cache_salt_digest("s").hex());
  CHECK(svc.authorize(a.session, AuthorizeRequest{{}, "d/other"}).error().code ==
        ErrorCode::authorization_unknown_namespace);
  CHECK(svc.authority().live_grants() == 1);
  // The principal's grants outlive one of its sessions, not the last one.
  REQUIRE(svc.end_session(a.session).ok());
  CHECK(svc.authority().live_grants() == 1);
  REQUIRE(svc.end_session(b.session).ok());
  CHECK(svc.authority().live_grants() == 0);
  CHECK(svc.end_session(b.session).error().code == ErrorCode::session_ended);
  CHECK(svc.authorize(a.session, AuthorizeRequest{{}, "d/t"}).error().code == ErrorCode::session_ended);
  CHECK(svc.validate().ok());
}

}  // namespace kvrt::test

// ---- the fault_arm route -------------------------------------------------------

namespace kvrt::test {
namespace {

FaultArmRequest arm_request(std::vector<FaultPointArm> points, bool disarm_all = false) {
  return FaultArmRequest{TraceContext{7, 8, 0}, disarm_all, std::move(points)};
}

const AllocationReceipt& receipt_of(const AllocatorOutcome& o) {
  INFO((std::holds_alternative<Error>(o) ? std::get<Error>(o).describe() : "receipt"));
  REQUIRE(std::holds_alternative<AllocationReceipt>(o));
  return std::get<AllocationReceipt>(o);
}

}  // namespace

TEST_CASE("fault_arm is refused unless the node runs with fault_injection", "[node][services][faults]") {
  AllocatorService svc(BlockAllocator::create(small_pools(2, 32)).value());
  const StateDigest before = svc.core().state_digest();
  const Result<FaultArmReceipt> r = svc.apply(SessionId{1}, arm_request({{"allocator.after_reserve_group_0", 1}}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::invalid_argument);
  CHECK(r.error().field == "fault_injection");
  CHECK_FALSE(svc.core().faults().any_armed());
  CHECK(svc.core().state_digest() == before);
  // Nothing armed: the next allocation commits.
  CHECK(receipt_of(svc.apply_one(SessionId{1}, AllocateOp{40, {}, std::nullopt})).outcome ==
        AllocationOutcome::committed);
}

TEST_CASE("fault_arm checks the whole request before it arms anything", "[node][services][faults]") {
  AllocatorService svc(BlockAllocator::create(small_pools(2, 32)).value(), AllocatorServiceOptions{true});
  REQUIRE(svc.apply(SessionId{1}, arm_request({{"allocator.after_reserve_group_1", 3}})).ok());
  struct Bad {
    std::vector<FaultPointArm> points;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {{{"allocator.after_reserve_group_0", 1}, {"allocator.after_reserve_group_2", 1}},
       "arm[1].name"},  // two groups only
      {{{"before_everything", 1}}, "arm[0].name"},
      {{{"allocator.after_reserve_group_0", 1}, {"allocator.after_reserve_group_1", 0}}, "arm[1].nth"},
      {std::vector<FaultPointArm>(NodeFaultPoints::kMaxArmed + 1, {"allocator.after_reserve_group_0", 1}), "arm"},
  };
  for (const Bad& b : bad) {
    INFO(b.field);
    // With and without disarm_all: a refused request disarms nothing either.
    for (bool disarm : {false, true}) {
      const Result<FaultArmReceipt> r = svc.apply(SessionId{1}, arm_request(b.points, disarm));
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::invalid_argument);
      CHECK(r.error().field == b.field);
      REQUIRE(svc.core().faults().armed().size() == 1);
      CHECK(svc.core().faults().armed()[0].name == "after_reserve_group_1");
      CHECK(svc.core().faults().armed()[0].remaining == 3);
    }
  }
  // disarm_all then arm: the receipt lists what is armed afterwards.
  const Result<FaultArmReceipt> r =
      svc.apply(SessionId{1},
                arm_request({{"allocator.after_reserve_group_0", 2}, {"allocator.after_reserve_group_1", 1}}, true));
  REQUIRE(r.ok());
  CHECK(r->trace.trace_id == 7);
  CHECK(r->armed ==
        std::vector<FaultPointArm>{{"allocator.after_reserve_group_0", 2}, {"allocator.after_reserve_group_1", 1}});
  CHECK(svc.apply(SessionId{1}, arm_request({}, true))->armed.empty());
}

TEST_CASE("an armed fault point fails the nth transaction that reaches it and restores the digest",
          "[node][services][faults][property]") {
  const uint64_t seed = GENERATE(3ull, 19ull, 20261201ull);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  AllocatorService svc(BlockAllocator::create(small_pools(2, 64)).value(), AllocatorServiceOptions{true});
  for (int round = 0; round < 40; ++round) {
    INFO("round " << round);
    const uint32_t group = static_cast<uint32_t>(rng() % 2);
    const uint32_t nth = 1 + static_cast<uint32_t>(rng() % 3);
    const std::string point = "allocator.after_reserve_group_" + std::to_string(group);
    REQUIRE(svc.apply(SessionId{1}, arm_request({{point, nth}}, true)).ok());
    // Each allocation reaches both groups' points once: the nth rolls back.
    std::vector<RequestFence> held;
    for (uint32_t i = 1; i <= nth; ++i) {
      const StateDigest before = svc.core().state_digest();
      const AllocationReceipt r =
          receipt_of(svc.apply_one(SessionId{1}, AllocateOp{1 + static_cast<uint32_t>(rng() % 40), {}, std::nullopt}));
      if (i < nth) {
        REQUIRE(r.outcome == AllocationOutcome::committed);
        held.push_back(RequestFence{r.request_id, r.request_generation, r.table_version_after});
        continue;
      }
      CHECK(r.outcome == AllocationOutcome::rolled_back);
      CHECK(r.rollback_reason == "fault point after_reserve_group_" + std::to_string(group));
      CHECK(r.predecessor_digest == before);
      CHECK(r.successor_digest == before);
      CHECK(svc.core().state_digest() == before);
    }
    CHECK_FALSE(svc.core().faults().any_armed());  // a point fires once
    REQUIRE(svc.validate().ok());
    for (const RequestFence& f : held)
      CHECK(std::holds_alternative<ReleaseResult>(svc.apply_one(SessionId{1}, ReleaseOp{f, ReleaseReason::finished})));
  }
  CHECK(svc.core().live_requests() == 0);
}

}  // namespace kvrt::test
