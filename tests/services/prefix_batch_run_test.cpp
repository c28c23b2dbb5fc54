// [prefix][run] PrefixBatchRun (services/prefix/prefix_batch_run.hpp): the
// prefix route's cross-owner protocol, driven here with no actor system: the
// allocator owner is an AllocatorService in this process, and the test
// decides per request whether it answers, refuses a tag or a lease, or
// fails in transport. Checked: the exact request sequence of a batch, one
// outcome per op in order, and that the index never names an identity the
// allocator does not hold (its validate against the allocator core), for
// the hash chain and the radix index alike. Randomised with a printed seed.
#include "services/prefix/prefix_batch_run.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "tests/services/prefix_batch_run_fixture.hpp"
#include "tests/support/identity_fixtures.hpp"

namespace kvrt::test {

TEST_CASE("prefix batch run: lookups at once, each publication asks for its table, then its tags", "[prefix][run]") {
  PrefixService svc = hash_chain(1);
  AllocatorService alloc(BlockAllocator::create(pools(1, 32)).value());
  const std::vector<TokenId> prompt(40, 3);
  const RequestFence mine = committed(alloc, SessionId{1}, 40);
  const RequestFence theirs = committed(alloc, SessionId{2}, 40);
  PrefixBatchRun<PrefixService> run(svc, SessionId{1},
                                    PrefixBatch{TraceContext{7, 8, 0},
                                                {match(prompt), PrefixPublishOp{"t/a", mine.request, prompt, 0, 2},
                                                 PrefixPublishOp{"t/a", theirs.request, prompt, 0, 2}, match(prompt),
                                                 PrefixPublishOp{"t/other", mine.request, prompt, 0, 2}}});
  // The foreign request's table is refused by the allocator (not this
  // session's), and the ungranted namespace never reaches it.
  CHECK(drive(run, alloc, SessionId{1}, {}) == std::vector<size_t>{kTableRead, kTagApply, kTableRead});
  const PrefixBatchReceipt r = run.take_receipt();
  CHECK(r.trace == TraceContext{7, 8, 0});
  REQUIRE(r.outcomes.size() == 5);
  CHECK(std::get<PrefixMatchReceipt>(r.outcomes[0]).runtime_hit_tokens == 0);
  CHECK(std::get<PrefixPublishReceipt>(r.outcomes[1]).published == 2);
  CHECK(std::get<Error>(r.outcomes[2]).code == ErrorCode::unknown_request);
  CHECK(std::get<PrefixMatchReceipt>(r.outcomes[3]).runtime_hit_tokens == 32);  // both full blocks, after publishing
  CHECK(std::get<Error>(r.outcomes[4]).code == ErrorCode::authorization_namespace_denied);
  CHECK(svc.validate().ok());
  CHECK(svc.index().validate(&alloc.core()).ok());
}

TEST_CASE("prefix batch run: a refused tag is withdrawn, a silent allocator withdraws the whole publication",
          "[prefix][run]") {
  PrefixService svc = hash_chain(1);
  AllocatorService alloc(BlockAllocator::create(pools(1, 32)).value());
  const std::vector<TokenId> prompt(40, 3);
  const RequestFence fence = committed(alloc, SessionId{1}, 40);
  const PrefixBatch publish{{}, {PrefixPublishOp{"t/a", fence.request, prompt, 0, 2}}};

  SECTION("one tag refused") {
    PrefixBatchRun<PrefixService> run(svc, SessionId{1}, publish);
    CHECK(drive(run, alloc, SessionId{1}, {false, false, true}) == std::vector<size_t>{kTableRead, kTagApply});
    CHECK(std::get<PrefixPublishReceipt>(run.take_receipt().outcomes.at(0)).published == 1);
    CHECK(svc.index().cached_blocks() == 1);
  }
  SECTION("the allocator does not answer the tags") {
    PrefixBatchRun<PrefixService> run(svc, SessionId{1}, publish);
    CHECK(drive(run, alloc, SessionId{1}, {false, true, false}) == std::vector<size_t>{kTableRead, kTagApply});
    CHECK(std::get<Error>(run.take_receipt().outcomes.at(0)).code == ErrorCode::rpc_failed);
    CHECK(svc.index().cached_blocks() == 0);
  }
  SECTION("the allocator does not answer the table") {
    PrefixBatchRun<PrefixService> run(svc, SessionId{1}, publish);
    CHECK(drive(run, alloc, SessionId{1}, {true, false, false}) == std::vector<size_t>{kTableRead});
    CHECK(std::get<Error>(run.take_receipt().outcomes.at(0)).code == ErrorCode::rpc_failed);
    CHECK(svc.index().cached_blocks() == 0);
  }
  CHECK(svc.validate().ok());
  CHECK(svc.index().validate(&alloc.core()).ok());
}

TEST_CASE("prefix batch run: the radix index leases what it adopts and hands back what it withdraws",
          "[prefix][run][radix]") {
  const CacheLayoutManifest layout = loop4_layout();
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  REQUIRE(layout.allocator_block_size == 16);
  RadixBlockService svc = RadixBlockService::create(layout, /*budget_blocks=*/8).value();
  svc.grant(SessionId{1}, SessionNamespaceGrant{"t/a", NamespaceGeneration{1}, "salt-a", {}, {}});
  AllocatorService alloc(BlockAllocator::create(pools(groups, 32)).value());
  const std::vector<TokenId> prompt(40, 3);
  const RequestFence fence = committed(alloc, SessionId{1}, 40);
  const PrefixBatch publish{{}, {PrefixPublishOp{"t/a", fence.request, prompt, 0, 2}, match(prompt)}};

  SECTION("every lease granted: two pages cached") {
    PrefixBatchRun<RadixBlockService> run(svc, SessionId{1}, publish);
    CHECK(drive(run, alloc, SessionId{1}, {}) == std::vector<size_t>{kTableRead, kLeaseAcquire});
    const PrefixBatchReceipt r = run.take_receipt();
    CHECK(std::get<PrefixPublishReceipt>(r.outcomes.at(0)).published == 2 * groups);
    CHECK(std::get<PrefixMatchReceipt>(r.outcomes.at(1)).runtime_hit_tokens == 32);
    CHECK(alloc.core().active_leases() == 2 * groups);
  }
  SECTION("one lease refused: the adoption is withdrawn and every lease it took goes back") {
    PrefixBatchRun<RadixBlockService> run(svc, SessionId{1}, publish);
    CHECK(drive(run, alloc, SessionId{1}, {false, false, true}) ==
          std::vector<size_t>{kTableRead, kLeaseAcquire, kLeaseRelease});
    const PrefixBatchReceipt r = run.take_receipt();
    CHECK(std::get<PrefixPublishReceipt>(r.outcomes.at(0)).published == 0);
    CHECK(std::get<PrefixMatchReceipt>(r.outcomes.at(1)).runtime_hit_tokens == 0);
    CHECK(alloc.core().active_leases() == 0);
  }
  SECTION("the allocator does not answer the leases") {
    PrefixBatchRun<RadixBlockService> run(svc, SessionId{1}, publish);
    CHECK(drive(run, alloc, SessionId{1}, {false, true, false}) == std::vector<size_t>{kTableRead, kLeaseAcquire});
    CHECK(std::get<Error>(run.take_receipt().outcomes.at(0)).code == ErrorCode::rpc_failed);
    CHECK(alloc.core().active_leases() == 0);
  }
  CHECK(svc.validate().ok());
  CHECK(alloc.validate().ok());
}

TEST_CASE("prefix batch run property: random batches answer every op once, in order, and the index stays exact",
          "[prefix][run][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 31));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  PrefixService svc = hash_chain(2);
  AllocatorService alloc(BlockAllocator::create(pools(2, 64)).value());
  std::vector<std::vector<TokenId>> prompts;
  for (int p = 0; p < 4; ++p) prompts.emplace_back(16 * (1 + rng() % 4) + rng() % 16, static_cast<TokenId>(p % 2));
  std::vector<std::pair<SessionId, RequestFence>> requests;
  for (int batch = 0; batch < 12; ++batch) {
    if (requests.size() < 6) {
      const SessionId owner{1 + rng() % 2};
      const auto& prompt = prompts[rng() % prompts.size()];
      requests.emplace_back(owner, committed(alloc, owner, static_cast<uint32_t>(prompt.size())));
    }
    const SessionId session{1 + rng() % 2};
    PrefixBatch b;
    size_t publications = 0;
    for (size_t k = 0, n = 1 + rng() % 6; k < n; ++k) {
      const auto& prompt = prompts[rng() % prompts.size()];
      if (rng() % 2 == 0) {
        b.ops.push_back(match(prompt));
        continue;
      }
      const auto& [owner, fence] = requests[rng() % requests.size()];
      const uint32_t blocks = static_cast<uint32_t>(prompt.size() / 16);
      b.ops.push_back(PrefixPublishOp{"t/a", fence.request, prompt, 0, static_cast<uint32_t>(rng() % (blocks + 2))});
      ++publications;
    }
    const AllocatorScript script{rng() % 8 == 0, rng() % 8 == 0, rng() % 4 == 0};
    INFO("batch " << batch << ": " << b.ops.size() << " ops, " << publications << " publications");
    const size_t ops = b.ops.size();
    PrefixBatchRun<PrefixService> run(svc, session, std::move(b));
    const std::vector<size_t> asked = drive(run, alloc, session, script);
    // Each publication asks at most its table, then at most its tags.
    CHECK(std::count(asked.begin(), asked.end(), kTableRead) <= static_cast<long>(publications));
    for (size_t i = 0; i < asked.size(); ++i)
      if (asked[i] == kTagApply) CHECK((i > 0 && asked[i - 1] == kTableRead));
    const PrefixBatchReceipt r = run.take_receipt();
    CHECK(r.outcomes.size() == ops);
    REQUIRE(svc.validate().ok());
    REQUIRE(svc.index().validate(&alloc.core()).ok());
  }
}

}  // namespace kvrt::test
