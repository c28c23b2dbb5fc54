// [node][radix] The radix index owner served by a node ([node] prefix_index =
// "radix"): the same prefix messages as the hash chain; a publication
// leases every adopted block to the node, a second session of the namespace
// hits the first one's blocks and allocates with them, another namespace
// does not; the budget evicts least-recently-used pages and releases their
// leases; the node's leases always equal the tree's cached blocks, and
// nothing leaks once the workers are gone.
#include "node/node_config.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {

TEST_CASE("node radix: publications lease pages, matches reuse them, the budget evicts", "[node][radix]") {
  ScratchDir dir("node-radix");
  InProcessNode n(dir, "tests/data/node/node-radix-test.toml");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  CHECK(n.stat("prefix_index", "radix") == 1);

  // A serves 40 tokens (P = 16: two full pages) and publishes them: 2 pages
  // x 2 groups adopted, each block leased to the node.
  const std::vector<TokenId> prompt = prompt_of(1, 40);
  RequestFence a_fence;
  const PrefixPublishReceipt published = serve_and_publish(*a, prompt, &a_fence);
  CHECK(published.published == 2 * 2);
  CHECK(n.stat("allocator", "node_leases") == 4);
  CHECK(n.stat("prefix_index", "cached_blocks") == 4);

  // B hits both pages (the cap keeps the last prompt token computed) and
  // allocates with A's blocks.
  const PrefixMatchReceipt m = match(*b, "test/shared", prompt);
  REQUIRE(m.runtime_hit_tokens == 32);
  REQUIRE(m.matched_group_handles.size() == 2);
  const AllocationReceipt b_alloc = allocation(*b, AllocateOp{40, hit_handles(m), std::nullopt});
  CHECK(b_alloc.outcome == AllocationOutcome::committed);
  // Publishing again (B's table begins with the same pages) adopts nothing.
  // Another namespace sees nothing.
  auto c = n.connect("worker-3");
  REQUIRE(c->call(AuthorizeRequest{{}, "test/other"}).ok());
  CHECK(match(*c, "test/other", prompt).runtime_hit_tokens == 0);

  // A releases: its blocks stay cached (the node's leases hold them).
  Result<AllocatorBatchReceipt> released = a->call(AllocatorBatch{{}, {ReleaseOp{a_fence, ReleaseReason::finished}}});
  REQUIRE(released.ok());
  REQUIRE(std::holds_alternative<ReleaseResult>(released->outcomes.at(0)));
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 32);

  // Three more distinct two-page prompts: 8 pages against a budget of 4.
  // The least recently used go, their leases with them.
  for (TokenId s = 2; s <= 4; ++s) (void)serve_and_publish(*a, prompt_of(s, 32), nullptr);
  CHECK(n.stat("prefix_index", "cached_pages") == 4);
  CHECK(n.stat("prefix_index", "evicted_pages") == 4);
  CHECK(n.stat("allocator", "node_leases") == n.stat("prefix_index", "cached_blocks"));
  CHECK(match(*b, "test/shared", prompt_of(4, 33)).runtime_hit_tokens == 32);  // the newest survives

  a.reset();
  b.reset();
  c.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("allocator", "live_requests") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(n.stat("allocator", "live_requests") == 0);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
  CHECK(n.stat("allocator", "refcount_delta") == 0);
  CHECK(n.stat("allocator", "live_leases") == n.stat("allocator", "node_leases"));
}

TEST_CASE("node radix: a bad prefix_index is refused naming the field", "[node][radix]") {
  Result<NodeConfig> c =
      parse_node_config("[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\nprefix_index = \"trie\"\n", "bad.toml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().reason.find("prefix_index") != std::string::npos);
  Result<NodeConfig> over = parse_node_config(
      "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\nprefix_index = \"radix\"\nradix_budget_blocks = 9\n",
      "bad.toml");
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().reason.find("radix_budget_blocks") != std::string::npos);
}

}  // namespace kvrt::test
