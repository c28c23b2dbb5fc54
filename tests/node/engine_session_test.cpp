// [node][engine_session] The engine-facing session (engine/engine_session.hpp)
// against an in-process node: admission sends one reuse message and one
// allocation and hands each request its hit and its blocks; an attempt whose
// blocks the allocation did not take is ended by the session; an admitted
// one ends with end_reuse(), travels at the head of the next reuse message
// (or flush_reuse_ends) and may publish the request's own full prompt
// blocks as the attempt's successor, which a third session then finds. The
// node's reuse_open_attempts and lease counts tell that every attempt ended.
#include "engine/engine_session.hpp"

#include <chrono>
#include <thread>

#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t P = 16;  // tests/data/node's block size [tokens]

std::unique_ptr<EngineSession> open(const InProcessNode& n, const std::string& principal) {
  ClientOptions o;
  o.worker_name = principal;
  o.channel_only = true;
  Result<std::unique_ptr<EngineSession>> s =
      EngineSession::connect(n.descriptor, read_token_file(n.descriptor.token_path(principal)).value(), o);
  INFO((s.ok() ? std::string("ok") : s.error().describe()));
  REQUIRE(s.ok());
  REQUIRE((*s)->authorize("test/shared", {}).ok());
  return std::move(*s);
}

Admission admit_one(EngineSession& s, const std::vector<TokenId>& prompt, const std::string& ns = "test/shared") {
  const std::vector<AdmissionRequest> asks{AdmissionRequest{ns, prompt, {}, LogitsPath::logits_required, std::nullopt}};
  Result<std::vector<Admission>> a = s.admit(asks, /*reuse=*/true, {}, {});
  INFO((a.ok() ? std::string("ok") : a.error().describe()));
  REQUIRE(a.ok());
  REQUIRE(a->size() == 1);
  return (*a)[0];
}

RequestFence commit_all(EngineSession& s, const Admission& a, uint32_t rows) {
  Result<AllocatorBatchReceipt> c = s.allocator(AllocatorBatch{{}, {CommitRowsOp{a.fence(), rows}}});
  REQUIRE(c.ok());
  const auto* r = std::get_if<AllocationReceipt>(&c->outcomes.at(0));
  REQUIRE(r != nullptr);
  RequestFence f = a.fence();
  f.table_version = r->table_version_after;
  return f;
}

}  // namespace

TEST_CASE("an engine session admits with reuse, ends its attempts and publishes a successor",
          "[node][engine_session]") {
  ScratchDir dir("engine-session");
  InProcessNode n(dir);
  auto a = open(n, "worker-0");
  auto b = open(n, "worker-1");
  auto c = open(n, "worker-2");

  // A: nothing cached yet; the reuse attempt is rejected, the allocation commits.
  const std::vector<TokenId> base = prompt_of(7, 3 * P + 5);
  const Admission first = admit_one(*a, base);
  REQUIRE(first.admitted());
  CHECK_FALSE(first.hit);
  REQUIRE(first.rejection);
  CHECK(first.rejection->reason == RejectionReason::no_candidate);
  CHECK(first.hit_tokens() == 0);
  CHECK_FALSE(first.reuse_attempt());
  const RequestFence fa = commit_all(*a, first, static_cast<uint32_t>(base.size()));
  Result<PrefixBatchReceipt> published =
      a->prefix(PrefixBatch{{}, {PrefixPublishOp{"test/shared", fa.request, base, 0, 3, {}}}});
  REQUIRE(published.ok());
  REQUIRE(std::holds_alternative<PrefixPublishReceipt>(published->outcomes.at(0)));

  // B: the same three blocks, then more of its own. The hit covers the
  // published blocks; its attempt stays open until B ends it.
  std::vector<TokenId> longer(base.begin(), base.begin() + 3 * P);
  for (TokenId t = 0; t < static_cast<TokenId>(P + 4); ++t) longer.push_back(900000 + t);
  const Admission second = admit_one(*b, longer);
  REQUIRE(second.admitted());
  REQUIRE(second.hit);
  CHECK(second.hit_tokens() == 3 * P);
  REQUIRE(second.reuse_attempt());
  CHECK(n.stat("node", "reuse_open_attempts") == 1);
  // The hit's blocks are B's table's first three bundles.
  for (const TableEntryUpdate& e : second.allocation->published_entries)
    if (e.logical_block < 3) {
      const auto& hit = second.hit->physical_handles;
      CHECK(std::find(hit.begin(), hit.end(), e.handle) != hit.end());
    }
  const RequestFence fb = commit_all(*b, second, static_cast<uint32_t>(longer.size()));
  const uint32_t full = static_cast<uint32_t>(longer.size()) / P;  // 4: block 3 is B's own
  b->end_reuse(*second.reuse_attempt(), true,
               ReuseSuccessor{fb.request, std::vector<TokenId>(longer.begin(), longer.begin() + full * P), full});
  CHECK(b->successor_pending(fb.request));
  CHECK(b->reuse_ends_pending());
  REQUIRE(b->flush_reuse_ends({}).ok());
  CHECK_FALSE(b->successor_pending(fb.request));
  const ReuseEndNotes notes = b->take_reuse_end_notes();
  CHECK(notes.ended == 1);
  CHECK(notes.successors_published == 1);
  for (const Error& e : notes.errors) FAIL_CHECK(e.describe());
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
  CHECK(n.stat("allocator", "live_leases") == 0);

  // C finds B's successor: four blocks now.
  std::vector<TokenId> third(longer.begin(), longer.begin() + 4 * P);
  third.push_back(42);
  const Admission found = admit_one(*c, third);
  REQUIRE(found.admitted());
  CHECK(found.hit_tokens() == 4 * P);
  c->end_reuse(*found.reuse_attempt(), false, std::nullopt);  // its work never ran
  REQUIRE(c->flush_reuse_ends({}).ok());
  CHECK(c->take_reuse_end_notes().ended == 1);
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
}

TEST_CASE("an engine session ends an attempt whose allocation was refused, and keeps typed errors per request",
          "[node][engine_session]") {
  ScratchDir dir("engine-session-refused");
  InProcessNode n(dir);
  auto a = open(n, "worker-0");
  auto b = open(n, "worker-1");
  const std::vector<TokenId> base = prompt_of(3, 2 * P);
  const Admission seeded = admit_one(*a, base);
  REQUIRE(seeded.admitted());
  const RequestFence fa = commit_all(*a, seeded, static_cast<uint32_t>(base.size()));
  REQUIRE(a->prefix(PrefixBatch{{}, {PrefixPublishOp{"test/shared", fa.request, base, 0, 2, {}}}}).ok());

  // One batch, three requests: a hit whose allocation cannot fit (more
  // blocks than the pool holds), a namespace this principal was never
  // granted, and a plain one. Each answers for itself.
  std::vector<TokenId> huge(base.begin(), base.end());
  huge.resize(300 * P, 5);  // 300 blocks per group: more than the pool's 256
  std::vector<TokenId> plain = prompt_of(4, P + 3);
  const std::vector<AdmissionRequest> asks{
      AdmissionRequest{"test/shared", huge, {}, LogitsPath::logits_required, std::nullopt},
      AdmissionRequest{"test/other", plain, {}, LogitsPath::logits_required, std::nullopt},
      AdmissionRequest{"test/shared", plain, {}, LogitsPath::logits_required, std::nullopt},
  };
  Result<std::vector<Admission>> answered = b->admit(asks, true, {}, {});
  REQUIRE(answered.ok());
  REQUIRE(answered->size() == 3);
  const Admission& too_big = (*answered)[0];
  REQUIRE(too_big.hit);
  CHECK_FALSE(too_big.admitted());
  CHECK_FALSE(too_big.reuse_attempt());  // the session ended it, unexecuted
  CHECK((too_big.allocation_error ||
         (too_big.allocation && too_big.allocation->outcome == AllocationOutcome::out_of_capacity)));
  const Admission& foreign = (*answered)[1];
  CHECK_FALSE(foreign.hit);
  CHECK((foreign.rejection || foreign.reuse_error));
  CHECK_FALSE(foreign.admitted());
  REQUIRE(foreign.allocation_error);
  CHECK(foreign.allocation_error->code == ErrorCode::authorization_namespace_denied);
  CHECK((*answered)[2].admitted());
  // The refused attempt's end went with the next message; nothing stays open.
  CHECK(b->reuse_ends_pending());
  REQUIRE(b->flush_reuse_ends({}).ok());
  const ReuseEndNotes notes = b->take_reuse_end_notes();
  CHECK(notes.ended == 1);
  CHECK(notes.errors.empty());
  CHECK(n.stat("node", "reuse_open_attempts") == 0);
  CHECK(n.stat("allocator", "live_leases") == 0);
}

TEST_CASE("an engine session without reuse allocates only, and a lost session abandons its queued ends",
          "[node][engine_session]") {
  ScratchDir dir("engine-session-plain");
  InProcessNode n(dir);
  auto a = open(n, "worker-0");
  uint64_t calls = 0;
  a->set_call_observer([&](Owner owner, double micros) {
    CHECK(owner == Owner::allocator);
    CHECK(micros >= 0);
    ++calls;
  });
  const std::vector<AdmissionRequest> asks{AdmissionRequest{"test/shared", prompt_of(9, 40), {}, {}, std::nullopt}};
  Result<std::vector<Admission>> plain = a->admit(asks, /*reuse=*/false, {}, {});
  REQUIRE(plain.ok());
  CHECK(calls == 1);  // no reuse message
  REQUIRE((*plain)[0].admitted());
  CHECK_FALSE((*plain)[0].rejection);
  CHECK(n.stat("prefix_index", "lookups") == 0);
  a->set_call_observer({});
  a->end_reuse(ExecutionSnapshotVersion{12345}, false, std::nullopt);
  a->abandon_reuse_ends();
  CHECK_FALSE(a->reuse_ends_pending());
}

namespace kvrt::test {

TEST_CASE("a lookup answers the hit an admission reuses and changes nothing on the node", "[node][engine_session]") {
  for (const std::string config : {"tests/data/node/node-test.toml", "tests/data/node/node-radix-test.toml"}) {
    INFO(config);
    const bool radix = config.find("radix") != std::string::npos;
    ScratchDir dir("engine-session-lookup");
    InProcessNode n(dir, config);
    auto a = open(n, "worker-0");
    auto b = open(n, "worker-1");
    auto ask = [](const std::vector<TokenId>& prompt, const std::string& ns = "test/shared") {
      return AdmissionRequest{ns, prompt, {}, LogitsPath::logits_required, std::nullopt};
    };

    const std::vector<TokenId> base = prompt_of(11, 3 * P + 5);
    {
      Result<std::vector<Result<PrefixMatchReceipt>>> empty = b->lookup(std::vector{ask(base)}, {});
      REQUIRE(empty.ok());
      REQUIRE((*empty)[0].ok());
      CHECK((*empty)[0]->runtime_hit_tokens == 0);
    }
    const Admission first = admit_one(*a, base);
    REQUIRE(first.admitted());
    const RequestFence fa = commit_all(*a, first, static_cast<uint32_t>(base.size()));
    REQUIRE(a->prefix(PrefixBatch{{}, {PrefixPublishOp{"test/shared", fa.request, base, 0, 3, {}}}}).ok());

    // Two blocks shared, then B's own tokens: in the radix tree a match
    // would split the published edge after its second page; a peek must not.
    std::vector<TokenId> two(base.begin(), base.begin() + 2 * P);
    for (TokenId t = 0; t < static_cast<TokenId>(P + 3); ++t) two.push_back(700000 + t);
    const int64_t lookups = n.stat("prefix_index", "lookups");
    const int64_t peeks = n.stat("prefix_index", "peeks");
    const int64_t nodes = radix ? n.stat("prefix_index", "tree_nodes") : 0;
    Result<std::vector<Result<PrefixMatchReceipt>>> seen =
        b->lookup(std::vector{ask(base), ask(two), ask(base, "test/other")}, {});
    REQUIRE(seen.ok());
    REQUIRE(seen->size() == 3);
    REQUIRE((*seen)[0].ok());
    REQUIRE((*seen)[1].ok());
    CHECK((*seen)[0]->runtime_hit_tokens == 3 * P);
    CHECK((*seen)[0]->matched_group_handles.size() == 3);
    CHECK((*seen)[1]->runtime_hit_tokens == 2 * P);
    CHECK((*seen)[1]->lease_id == LeaseId{});
    REQUIRE_FALSE((*seen)[2].ok());  // worker-1 holds no grant of test/other
    CHECK((*seen)[2].error().code == ErrorCode::authorization_namespace_denied);
    CHECK(n.stat("prefix_index", "lookups") == lookups);
    CHECK(n.stat("prefix_index", "peeks") == peeks + 2);
    if (radix) CHECK(n.stat("prefix_index", "tree_nodes") == nodes);

    // The admission reuses what the peek saw, the same blocks.
    const Admission second = admit_one(*b, two);
    REQUIRE(second.admitted());
    CHECK(second.hit_tokens() == 2 * P);
    REQUIRE(second.hit);
    std::vector<PhysicalBlockHandle> peeked;
    for (const MatchedBlockBundle& bundle : (*seen)[1]->matched_group_handles)
      peeked.insert(peeked.end(), bundle.handles.begin(), bundle.handles.end());
    CHECK(second.hit->physical_handles == peeked);
    b->end_reuse(*second.reuse_attempt(), /*executed=*/false, std::nullopt);
    REQUIRE(b->flush_reuse_ends({}).ok());
  }
}

}  // namespace kvrt::test

TEST_CASE("a scheduler handoff holds its path on a live radix node until admitted or released",
          "[node][engine_session][handoff]") {
  ScratchDir dir("engine-session-handoff");
  InProcessNode n(dir, "tests/data/node/node-radix-test.toml");  // a budget of 4 pages
  auto a = open(n, "worker-0");
  auto b = open(n, "worker-1");
  auto c = open(n, "worker-2");
  auto publish = [&](const std::vector<TokenId>& prompt, uint32_t blocks) {
    const Admission first = admit_one(*a, prompt);
    REQUIRE(first.admitted());
    const RequestFence f = commit_all(*a, first, static_cast<uint32_t>(prompt.size()));
    REQUIRE(a->prefix(PrefixBatch{{}, {PrefixPublishOp{"test/shared", f.request, prompt, 0, blocks, {}}}}).ok());
    if (first.hit) a->end_reuse(*first.reuse_attempt(), /*executed=*/true, std::nullopt);
  };
  auto handoff_one = [&](EngineSession& s, const std::vector<TokenId>& prompt, uint64_t request) {
    const std::vector<HandoffRequest> asks{HandoffRequest{
        AdmissionRequest{"test/shared", prompt, {}, LogitsPath::logits_required, std::nullopt}, RequestId{request}, 0}};
    Result<std::vector<Result<RadixSchedulerHandoffReceipt>>> h = s.handoff(asks, {});
    REQUIRE(h.ok());
    REQUIRE(h->size() == 1);
    INFO(((*h)[0].ok() ? std::string("ok") : (*h)[0].error().describe()));
    REQUIRE((*h)[0].ok());
    return *(*h)[0];
  };
  auto dispose = [&](EngineSession& s, const RadixSchedulerHandoffReceipt& h, HandoffDisposition d) {
    const std::vector<PrefixHandoffDispositionOp> ops{PrefixHandoffDispositionOp{h, d}};
    Result<std::vector<Result<HandoffDispositionReceipt>>> r = s.dispose_handoffs(ops, {});
    REQUIRE(r.ok());
    REQUIRE(r->size() == 1);
    return (*r)[0];
  };

  const std::vector<TokenId> base = prompt_of(11, 2 * P + 5);
  publish(base, 2);
  std::vector<TokenId> mine(base.begin(), base.begin() + 2 * P);
  for (TokenId t = 0; t < 9; ++t) mine.push_back(900000 + t);

  const RadixSchedulerHandoffReceipt h = handoff_one(*b, mine, 71);
  CHECK(h.match.runtime_hit_tokens == 2 * P);
  CHECK(h.suffix_interval == TokenInterval{2 * P, 2 * P + 9});
  CHECK(h.new_physical_blocks == 1);
  CHECK(h.lock_lease_id.value != 0);
  CHECK(n.stat("prefix_index", "path_leases") == 1);

  // Another worker cannot dispose of it.
  const Result<HandoffDispositionReceipt> foreign = dispose(*c, h, HandoffDisposition::release);
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.error().code == ErrorCode::unknown_lease);

  // Four more pages over a budget of four: the tree evicts, but not the
  // locked path; the handoff is now stale, and its release still works.
  publish(prompt_of(50000, 4 * P + 1), 4);
  CHECK(n.stat("prefix_index", "evicted_pages") > 0);
  const Result<HandoffDispositionReceipt> stale = dispose(*b, h, HandoffDisposition::admit);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code == ErrorCode::stale_tree_version);
  CHECK(n.stat("prefix_index", "handoffs_stale") == 1);
  REQUIRE(dispose(*b, h, HandoffDisposition::release).ok());
  CHECK(n.stat("prefix_index", "path_leases") == 0);

  // The scheduler asks again; the locked path had stayed, so it still hits.
  const RadixSchedulerHandoffReceipt again = handoff_one(*b, mine, 71);
  CHECK(again.match.runtime_hit_tokens == 2 * P);
  CHECK(again.match.matched_group_handles == h.match.matched_group_handles);
  const Result<HandoffDispositionReceipt> admitted = dispose(*b, again, HandoffDisposition::admit);
  REQUIRE(admitted.ok());
  CHECK(admitted->disposition == HandoffDisposition::admit);
  // The admission reuses the handed-off blocks; then the lock may go.
  const Admission second = admit_one(*b, mine);
  REQUIRE(second.admitted());
  CHECK(second.hit_tokens() == 2 * P);
  b->end_reuse(*second.reuse_attempt(), /*executed=*/false, std::nullopt);
  REQUIRE(b->flush_reuse_ends({}).ok());
  REQUIRE(dispose(*b, again, HandoffDisposition::release).ok());

  // A handoff left undisposed ends with its session.
  (void)handoff_one(*b, mine, 72);
  CHECK(n.stat("prefix_index", "path_leases") == 1);
  b.reset();
  for (int i = 0; i < 200 && n.stat("prefix_index", "path_leases") != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(n.stat("prefix_index", "path_leases") == 0);
  CHECK(n.stat("prefix_index", "handoffs") == 3);
}

TEST_CASE("a hash-chain node refuses the scheduler handoff with a typed error", "[node][engine_session][handoff]") {
  ScratchDir dir("engine-session-handoff-chain");
  InProcessNode n(dir);
  auto a = open(n, "worker-0");
  const std::vector<HandoffRequest> asks{
      HandoffRequest{AdmissionRequest{"test/shared", prompt_of(3, 40), {}, LogitsPath::logits_required, std::nullopt},
                     RequestId{1}, 0}};
  Result<std::vector<Result<RadixSchedulerHandoffReceipt>>> h = a->handoff(asks, {});
  REQUIRE(h.ok());
  REQUIRE_FALSE((*h)[0].ok());
  CHECK((*h)[0].error().code == ErrorCode::invalid_argument);
  CHECK((*h)[0].error().field == "handoff");
}

}  // namespace kvrt::test
