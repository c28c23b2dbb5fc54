// [node][funnel] The node's own reuse funnel (0x0CF): every lookup
// is one attempt; the prefix owner counts authorization refusals, misses and
// candidates, the allocator owner counts how presented candidates end, and
// node_reuse_funnel() joins them into monotone stages. The same script runs
// against the hash-chain and the radix index owner, and the expected figures
// are counted from the script's own steps.
#include "services/reuse/reuse_funnel_counters.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {

TEST_CASE("node reuse funnel: lookups, refusals and presented hits land in their stages", "[node][funnel]") {
  const std::string config =
      GENERATE(std::string("tests/data/node/node-test.toml"), std::string("tests/data/node/node-radix-test.toml"));
  INFO("config " << config);
  ScratchDir dir("node-funnel");
  InProcessNode n(dir, config);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  auto c = n.connect("worker-3");  // granted test/other only
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(c->call(AuthorizeRequest{{}, "test/other"}).ok());
  const std::vector<TokenId> prompt = prompt_of(7, 40);  // two full blocks of 16, and 8 tokens

  // 1. Nothing published yet: a miss.
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 0);
  // A serves and publishes (an allocation without hits is no reuse attempt).
  (void)serve_and_publish(*a, prompt, nullptr);
  // 2. A candidate, presented and taken by reference.
  const PrefixMatchReceipt hit = match(*b, "test/shared", prompt);
  REQUIRE(hit.runtime_hit_tokens == 32);
  CHECK(allocation(*b, AllocateOp{40, hit_handles(hit), std::nullopt}).outcome == AllocationOutcome::committed);
  // 3. A candidate presented with a generation the blocks never had: the
  // allocator's generation fence refuses it (0x0CD step 5).
  std::vector<PhysicalBlockHandle> stale = hit_handles(match(*b, "test/shared", prompt));
  REQUIRE(!stale.empty());
  for (PhysicalBlockHandle& h : stale) h.generation = BlockGeneration{h.generation.value + 1};
  Result<AllocatorBatchReceipt> refused = b->call(AllocatorBatch{{}, {AllocateOp{40, stale, std::nullopt}}});
  REQUIRE(refused.ok());
  REQUIRE(std::holds_alternative<Error>(refused->outcomes.at(0)));
  CHECK(std::get<Error>(refused->outcomes[0]).code == ErrorCode::stale_physical);
  // 4. A candidate never presented: unsettled.
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 32);
  // 5. A lookup in a namespace the session holds no grant for: refused
  // before the index sees it (0x0CE).
  Result<PrefixBatchReceipt> denied =
      c->call(PrefixBatch{{}, {PrefixMatchOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(denied.ok());
  REQUIRE(std::holds_alternative<Error>(denied->outcomes.at(0)));
  const std::optional<RejectionReason> denied_reason =
      authorization_rejection(std::get<Error>(denied->outcomes[0]).code);
  REQUIRE(denied_reason.has_value());
  // 6. A malformed request is no reuse attempt at all: an allocation whose
  // hits are not whole bundles.
  Result<AllocatorBatchReceipt> malformed =
      b->call(AllocatorBatch{{}, {AllocateOp{40, {hit_handles(hit).front()}, std::nullopt}}});
  REQUIRE(malformed.ok());
  REQUIRE(std::holds_alternative<Error>(malformed->outcomes.at(0)));

  Result<NodeStats> stats = read_node_stats(n.descriptor, /*validate=*/true);
  REQUIRE(stats.ok());
  const NodeReuseFunnel f = node_reuse_funnel(stats->owners);
  CHECK(f.requests == 5);
  CHECK(f.authorized == 4);
  CHECK(f.candidates == 3);
  CHECK(f.current == 2);
  CHECK(f.leased == 1);
  CHECK(f.out_of_capacity == 0);
  CHECK(f.unsettled == 1);
  CHECK(f.rejections[static_cast<size_t>(RejectionReason::no_candidate)] == 1);
  CHECK(f.rejections[static_cast<size_t>(RejectionReason::stale_candidate_generation)] == 1);
  CHECK(f.rejections[static_cast<size_t>(*denied_reason)] == 1);
  uint64_t rejected = 0;
  for (uint64_t r : f.rejections) rejected += r;
  CHECK(rejected == 3);
  // Monotone stages (0x0CF).
  CHECK(f.requests >= f.authorized);
  CHECK(f.authorized >= f.candidates);
  CHECK(f.candidates >= f.current);
  CHECK(f.current >= f.leased + f.out_of_capacity + f.unsettled);
}

TEST_CASE("node reuse funnel: error codes map to the 0x0CF reasons, others are no attempt", "[node][funnel]") {
  CHECK(authorization_rejection(ErrorCode::authorization_namespace_denied) == RejectionReason::namespace_denied);
  CHECK(authorization_rejection(ErrorCode::authorization_stale_generation) ==
        RejectionReason::stale_namespace_generation);
  CHECK(authorization_rejection(ErrorCode::authorization_namespace_closed) == RejectionReason::namespace_closed);
  CHECK(authorization_rejection(ErrorCode::authorization_principal_revoked) == RejectionReason::principal_revoked);
  CHECK(authorization_rejection(ErrorCode::authorization_unauthenticated) == RejectionReason::unauthenticated);
  CHECK_FALSE(authorization_rejection(ErrorCode::invalid_argument).has_value());
  CHECK(hit_rejection(ErrorCode::stale_physical) == RejectionReason::stale_candidate_generation);
  CHECK(hit_rejection(ErrorCode::row_not_valid) == RejectionReason::frontier_not_valid);
  CHECK_FALSE(hit_rejection(ErrorCode::invalid_argument).has_value());
  for (RejectionReason r : {RejectionReason::namespace_denied, RejectionReason::stale_candidate_generation})
    CHECK(bucket_of(r) != ReuseBucket::lease);
}

}  // namespace kvrt::test
