// [radix][handoff] The scheduler handoff of spec 0x08G as the node's radix
// owner serves it (RadixBlockService::handoff / dispose_handoff, through
// PrefixBatchRun as the prefix route runs it): the receipt's fields against
// the tree and the 0x08G estimates derived by hand, the lock it holds
// against eviction, every refusal (tampered, foreign or disposed lease,
// stale tree version, the hash chain's) leaving the owner unchanged, and a
// seeded random run of the lease life cycle against a model of it.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>

#include "services/radix/radix_handoff_receipt.hpp"
#include "tests/services/prefix_batch_run_fixture.hpp"
#include "tests/support/identity_fixtures.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 16;  // loop4_layout's P_a

struct HandoffBench {
  CacheLayoutManifest layout = loop4_layout();
  uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  RadixBlockService svc;
  AllocatorService alloc;

  explicit HandoffBench(uint32_t budget_pages)
      : svc(RadixBlockService::create(layout, budget_pages).value()),
        alloc(BlockAllocator::create(pools(static_cast<uint32_t>(layout.cache_groups.size()), 256)).value()) {
    svc.grant(SessionId{1}, SessionNamespaceGrant{"t/a", NamespaceGeneration{1}, "salt-a", {}, {}});
    svc.grant(SessionId{2}, SessionNamespaceGrant{"t/a", NamespaceGeneration{1}, "salt-a", {}, {}});
  }

  // Publishes the full pages of `prompt` as a request of session 1.
  void publish(const std::vector<TokenId>& prompt) {
    const RequestFence fence = committed(alloc, SessionId{1}, static_cast<uint32_t>(prompt.size()));
    PrefixBatchRun<RadixBlockService> run(
        svc, SessionId{1},
        PrefixBatch{{}, {PrefixPublishOp{"t/a", fence.request, prompt, 0, static_cast<uint32_t>(prompt.size() / kP)}}});
    drive(run, alloc, SessionId{1}, {});
    REQUIRE(std::holds_alternative<PrefixPublishReceipt>(run.take_receipt().outcomes.at(0)));
  }

  // One op through the prefix route's run, as the node answers it.
  PrefixOutcome one(SessionId session, PrefixOp op) {
    PrefixBatch b;
    b.ops.push_back(std::move(op));
    PrefixBatchRun<RadixBlockService> run(svc, session, std::move(b));
    CHECK(drive(run, alloc, session, {}).empty());  // answered at once: nothing asked of the allocator
    return run.take_receipt().outcomes.at(0);
  }
  Result<RadixSchedulerHandoffReceipt> handoff(SessionId session, const std::vector<TokenId>& prompt, uint64_t request,
                                               uint32_t free_tail = 0) {
    PrefixMatchOp m = match(prompt);
    m.request = RequestId{request};
    PrefixOutcome o = one(session, PrefixHandoffOp{m, free_tail});
    if (auto* e = std::get_if<Error>(&o)) return *e;
    return std::get<RadixSchedulerHandoffReceipt>(o);
  }
  Result<HandoffDispositionReceipt> dispose(SessionId session, const RadixSchedulerHandoffReceipt& h,
                                            HandoffDisposition d) {
    PrefixOutcome o = one(session, PrefixHandoffDispositionOp{h, d});
    if (auto* e = std::get_if<Error>(&o)) return *e;
    return std::get<HandoffDispositionReceipt>(o);
  }
  int64_t stat(const std::string& name) const {
    for (const StatValue& v : svc.stats().values)
      if (v.name == name) return v.value;
    FAIL("no statistic " << name);
    return -1;
  }
  uint32_t locks_at(RadixNodeId id) const {
    const std::optional<RadixNodeRef> ref = svc.index().tree().find(id);
    return ref ? svc.index().tree().node(*ref).lock_count : 0;
  }
};

std::vector<TokenId> prompt_of(TokenId first, uint32_t tokens) {
  std::vector<TokenId> p(tokens);
  for (uint32_t i = 0; i < tokens; ++i) p[i] = first + static_cast<TokenId>(i);
  return p;
}

ErrorCode code_of(const Result<HandoffDispositionReceipt>& r) { return r.ok() ? ErrorCode::ok : r.error().code; }

}  // namespace

TEST_CASE("radix handoff: the receipt freezes the match, its path, its lock and the 0x08G estimates",
          "[radix][handoff]") {
  HandoffBench b(/*budget_pages=*/16);
  const std::vector<TokenId> cached = prompt_of(100, 3 * kP);
  b.publish(cached);
  // A prompt sharing the first two pages and diverging in the third: 2 * P
  // matched, S_prompt = 2P + 7 + 8 = 47, suffix [32, 47).
  std::vector<TokenId> prompt = prompt_of(100, 2 * kP + 7);
  for (TokenId t = 0; t < 8; ++t) prompt.push_back(9000 + t);
  const uint64_t B_row = b.layout.row_bytes();
  REQUIRE(B_row > 0);

  SECTION("no private tail: ceil(15 / 16) = 1 new block") {
    const RadixSchedulerHandoffReceipt h = b.handoff(SessionId{1}, prompt, 44).value();
    CHECK(h.match.request_id == RequestId{44});
    CHECK(h.match.runtime_hit_tokens == 2 * kP);
    CHECK(h.match.matched_group_handles.size() == 2);
    CHECK(h.suffix_interval == TokenInterval{2 * kP, 47});
    CHECK(h.new_useful_kv_bytes == 15 * B_row);
    CHECK(h.new_physical_blocks == 1);
    CHECK(h.new_physical_capacity_bytes == kP * B_row);
    CHECK(h.lock_required_until_scheduler_disposition);
    CHECK(h.lock_lease_id.value != 0);
    CHECK(h.tree_version == b.svc.index().retraction_version());
    REQUIRE_FALSE(h.path_node_ids.empty());
    CHECK(h.path_node_ids.back() == h.terminal_node_id);
    // The match split the three-page edge after two pages (0x08B): the
    // terminal ends exactly at the hit and carries the lock (0x08D).
    CHECK(b.locks_at(h.terminal_node_id) == 1);
    CHECK(h.receipt_sha256 == canonical_digest(h));
    CHECK(b.stat("handoffs") == 1);
    CHECK(b.svc.validate().ok());
    // The handles are those a plain match answers.
    CHECK(b.svc.peek(SessionId{1}, match(prompt)).value().matched_group_handles == h.match.matched_group_handles);
  }
  SECTION("a private tail of 15 writable rows covers the suffix: no new block") {
    const RadixSchedulerHandoffReceipt h = b.handoff(SessionId{1}, prompt, 44, 15).value();
    CHECK(h.new_useful_kv_bytes == 15 * B_row);
    CHECK(h.new_physical_blocks == 0);
    CHECK(h.new_physical_capacity_bytes == 0);
    CHECK(h.free_private_tail_slots == 15);
  }
  SECTION("admit retains the lock until release; release ends it") {
    const RadixSchedulerHandoffReceipt h = b.handoff(SessionId{1}, prompt, 44).value();
    const HandoffDispositionReceipt a = b.dispose(SessionId{1}, h, HandoffDisposition::admit).value();
    CHECK(a.disposition == HandoffDisposition::admit);
    CHECK(a.lock_lease_id == h.lock_lease_id);
    CHECK(a.path_node_ids == h.path_node_ids);
    CHECK(b.locks_at(h.terminal_node_id) == 1);
    // Admitted once: a second admission is not a disposition of a pending handoff.
    CHECK(code_of(b.dispose(SessionId{1}, h, HandoffDisposition::admit)) == ErrorCode::unknown_lease);
    CHECK(b.dispose(SessionId{1}, h, HandoffDisposition::release).ok());
    CHECK(b.locks_at(h.terminal_node_id) == 0);
    CHECK(code_of(b.dispose(SessionId{1}, h, HandoffDisposition::release)) == ErrorCode::unknown_lease);
    CHECK(b.stat("handoffs_admitted") == 1);
    CHECK(b.stat("handoffs_released") == 1);
    CHECK(b.stat("path_leases") == 0);
    CHECK(b.svc.validate().ok());
  }
  SECTION("a miss locks nothing and needs no disposition") {
    const RadixSchedulerHandoffReceipt h = b.handoff(SessionId{1}, prompt_of(5000, 40), 45).value();
    CHECK(h.match.runtime_hit_tokens == 0);
    CHECK(h.lock_lease_id.value == 0);
    CHECK_FALSE(h.lock_required_until_scheduler_disposition);
    CHECK(h.path_node_ids.empty());
    CHECK(h.suffix_interval == TokenInterval{0, 40});
    CHECK(h.new_physical_blocks == 3);  // ceil(40 / 16)
    CHECK(b.dispose(SessionId{1}, h, HandoffDisposition::admit).ok());
    CHECK(b.stat("path_leases") == 0);
  }
  SECTION("the session's end releases its handoff locks") {
    const RadixSchedulerHandoffReceipt h = b.handoff(SessionId{1}, prompt, 44).value();
    b.svc.end_session(SessionId{1});
    CHECK(b.locks_at(h.terminal_node_id) == 0);
    CHECK(b.stat("path_leases") == 0);
    CHECK(b.svc.validate().ok());
  }
  SECTION("an ungranted namespace is refused before the lookup") {
    PrefixMatchOp m = match(prompt);
    m.namespace_name = "t/other";
    const PrefixOutcome o = b.one(SessionId{1}, PrefixHandoffOp{m, 0});
    CHECK(std::get<Error>(o).code == ErrorCode::authorization_namespace_denied);
    CHECK(b.stat("handoffs") == 0);
  }
}

TEST_CASE("radix handoff: every refusal is typed and changes nothing", "[radix][handoff]") {
  HandoffBench b(/*budget_pages=*/4);
  const std::vector<TokenId> cached = prompt_of(100, 2 * kP);
  b.publish(cached);
  const std::vector<TokenId> prompt = prompt_of(100, 2 * kP + 5);
  const RadixSchedulerHandoffReceipt h = b.handoff(SessionId{1}, prompt, 7).value();
  REQUIRE(h.match.runtime_hit_tokens == 2 * kP);
  const int64_t leases = b.stat("path_leases");

  auto refused_unchanged = [&](const Result<HandoffDispositionReceipt>& r, ErrorCode code, const std::string& field) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    CHECK(r.error().field == field);
    CHECK(b.stat("path_leases") == leases);
    CHECK(b.locks_at(h.terminal_node_id) == 1);
    CHECK(b.svc.validate().ok());
  };

  SECTION("a field edited without its digest: receipt_tampered") {
    RadixSchedulerHandoffReceipt t = h;
    t.suffix_interval.begin = 0;
    refused_unchanged(b.dispose(SessionId{1}, t, HandoffDisposition::admit), ErrorCode::receipt_tampered,
                      "receipt_sha256");
    RadixSchedulerHandoffReceipt m = h;
    m.match.runtime_hit_tokens += 1;
    refused_unchanged(b.dispose(SessionId{1}, m, HandoffDisposition::release), ErrorCode::receipt_tampered,
                      "match.receipt_sha256");
  }
  SECTION("a field edited and digested again: not the receipt the lease was issued with") {
    RadixSchedulerHandoffReceipt t = h;
    t.new_physical_blocks = 0;
    t.receipt_sha256 = canonical_digest(t);
    refused_unchanged(b.dispose(SessionId{1}, t, HandoffDisposition::admit), ErrorCode::receipt_tampered,
                      "receipt_sha256");
  }
  SECTION("another session's or another request's lease: unknown_lease") {
    refused_unchanged(b.dispose(SessionId{2}, h, HandoffDisposition::admit), ErrorCode::unknown_lease, "lock_lease_id");
    refused_unchanged(b.dispose(SessionId{2}, h, HandoffDisposition::release), ErrorCode::unknown_lease,
                      "lock_lease_id");
    RadixSchedulerHandoffReceipt other = h;
    other.match.request_id = RequestId{8};
    other.match.receipt_sha256 = canonical_digest(other.match);
    other.receipt_sha256 = canonical_digest(other);
    refused_unchanged(b.dispose(SessionId{1}, other, HandoffDisposition::admit), ErrorCode::unknown_lease,
                      "lock_lease_id");
  }
  SECTION("cached tokens left the tree since: stale_tree_version, and the stale handoff still releases") {
    // Three more pages over a budget of four: the LRU leaf (not the locked
    // path) leaves, the retraction version moves.
    b.publish(prompt_of(700, 3 * kP));
    REQUIRE(b.svc.index().evicted_pages() > 0);
    REQUIRE(b.svc.index().retraction_version() != h.tree_version);
    CHECK(b.locks_at(h.terminal_node_id) == 1);  // the locked path stayed (0x08D)
    CHECK(b.svc.peek(SessionId{1}, match(prompt)).value().runtime_hit_tokens == 2 * kP);
    refused_unchanged(b.dispose(SessionId{1}, h, HandoffDisposition::admit), ErrorCode::stale_tree_version,
                      "tree_version");
    CHECK(b.stat("handoffs_stale") == 1);
    CHECK(b.dispose(SessionId{1}, h, HandoffDisposition::release).ok());
    CHECK(b.locks_at(h.terminal_node_id) == 0);
    // Asked again, the scheduler gets a current receipt it can admit.
    const RadixSchedulerHandoffReceipt again = b.handoff(SessionId{1}, prompt, 7).value();
    CHECK(b.dispose(SessionId{1}, again, HandoffDisposition::admit).ok());
  }
  SECTION("a namespace generation retired since: stale_tree_version") {
    (void)b.svc.advance_generation("t/a", NamespaceGeneration{2});
    refused_unchanged(b.dispose(SessionId{1}, h, HandoffDisposition::admit), ErrorCode::stale_tree_version,
                      "tree_version");
    CHECK(b.dispose(SessionId{1}, h, HandoffDisposition::release).ok());
    // Unlocked, the retired generation's pages leave at the next advance.
    (void)b.svc.advance_generation("t/a", NamespaceGeneration{3});
    CHECK(b.svc.index().cached_pages() == 0);
  }
  SECTION("the hash-chain index answers invalid_argument for both ops") {
    PrefixService chain = hash_chain(1);
    PrefixBatchRun<PrefixService> run(
        chain, SessionId{1},
        PrefixBatch{{},
                    {PrefixHandoffOp{match(prompt), 0}, PrefixHandoffDispositionOp{h, HandoffDisposition::release}}});
    CHECK(drive(run, b.alloc, SessionId{1}, {}).empty());
    const PrefixBatchReceipt r = run.take_receipt();
    for (const PrefixOutcome& o : r.outcomes) {
      CHECK(std::get<Error>(o).code == ErrorCode::invalid_argument);
      CHECK(std::get<Error>(o).field == "handoff");
    }
  }
}

TEST_CASE("radix handoff property: random handoffs, dispositions, publications and retirements follow the lease model",
          "[radix][handoff][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 21));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  HandoffBench b(/*budget_pages=*/6);
  // The model: each issued handoff's state, and what it read.
  enum class State { pending, admitted, released };
  struct Issued {
    RadixSchedulerHandoffReceipt receipt;
    SessionId session;
    State state = State::pending;
    uint64_t evicted_at = 0;  // evicted pages when it was issued
    uint64_t retired_at = 0;  // generations retired when it was issued
  };
  std::vector<Issued> issued;
  static std::map<ErrorCode, int> outcomes;  // dispositions by expected answer, over every seed
  uint64_t retired = 0;
  uint32_t generation = 1;
  auto family = [&](uint32_t f) { return prompt_of(static_cast<TokenId>(1000 * (f + 1)), 2 * kP); };
  for (int step = 0; step < 120; ++step) {
    const uint32_t what = static_cast<uint32_t>(rng() % 10);
    INFO("step " << step << " op " << what);
    if (what < 2) {
      std::vector<TokenId> p = family(static_cast<uint32_t>(rng() % 5));
      p.resize(kP * (1 + rng() % 2));
      b.publish(p);
    } else if (what < 5) {
      const SessionId s{1 + rng() % 2};
      std::vector<TokenId> p = family(static_cast<uint32_t>(rng() % 5));
      p.push_back(7);
      Result<RadixSchedulerHandoffReceipt> h = b.handoff(s, p, 1 + rng() % 3);
      REQUIRE(h.ok());
      REQUIRE(h->receipt_sha256 == canonical_digest(*h));
      // The hit is what a side-effect-free lookup answers now.
      CHECK(h->match.runtime_hit_tokens == b.svc.peek(s, match(p)).value().runtime_hit_tokens);
      if (h->lock_lease_id.value != 0)
        issued.push_back(Issued{*h, s, State::pending, b.svc.index().evicted_pages(), retired});
    } else if (what < 9 && !issued.empty()) {
      Issued& i = issued[rng() % issued.size()];
      // Now and then from the wrong session.
      const bool foreign = rng() % 6 == 0;
      const SessionId s = foreign ? SessionId{3 - i.session.value} : i.session;
      const HandoffDisposition d = rng() % 2 == 0 ? HandoffDisposition::admit : HandoffDisposition::release;
      const bool stale = b.svc.index().evicted_pages() != i.evicted_at || retired != i.retired_at;
      ErrorCode expected = ErrorCode::ok;
      if (foreign || i.state == State::released || (d == HandoffDisposition::admit && i.state == State::admitted))
        expected = ErrorCode::unknown_lease;
      else if (d == HandoffDisposition::admit && stale)
        expected = ErrorCode::stale_tree_version;
      const Result<HandoffDispositionReceipt> r = b.dispose(s, i.receipt, d);
      CHECK(code_of(r) == expected);
      ++outcomes[expected];
      if (r.ok()) i.state = d == HandoffDisposition::admit ? State::admitted : State::released;
    } else if (what == 9 && rng() % 3 == 0) {
      // A retirement: the session's grants move to the new generation.
      ++generation;
      (void)b.svc.advance_generation("t/a", NamespaceGeneration{generation});
      for (uint64_t s : {1, 2})
        b.svc.grant(SessionId{s}, SessionNamespaceGrant{"t/a", NamespaceGeneration{generation}, "salt-a", {}, {}});
      ++retired;
    }
    // Every live lock is a pending or admitted handoff of the model.
    int64_t live = 0;
    for (const Issued& i : issued) live += i.state == State::released ? 0 : 1;
    REQUIRE(b.stat("path_leases") == live);
    REQUIRE(b.svc.validate().ok());
    REQUIRE(b.alloc.validate().ok());
  }
  // The seeds together reached the model's branches: granted, foreign or
  // disposed, stale.
  if (seed == 20) {
    CHECK(outcomes[ErrorCode::ok] > 0);
    CHECK(outcomes[ErrorCode::unknown_lease] > 0);
    CHECK(outcomes[ErrorCode::stale_tree_version] > 0);
  }
}

}  // namespace kvrt::test
