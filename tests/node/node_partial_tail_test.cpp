// [node][prefix] The reuse policy as node configuration (0x07D). Under
// immutable_partial_tail, a finished request publishes its last, partly
// filled block with a key over exactly its valid rows; a lookup whose prompt
// agrees with some of those rows hits inside the block, and the allocator
// copies them into the new request's own block (the copy-rows intent), so a
// divergent write never touches the published rows. The spec's fixture: a
// 50-token prompt with P = 16 reuses 48 rows under full blocks and 49 with
// partial tails (0x07D, 0x07E: S_cap = 49). Under full_block the same
// publication of a tail is refused on its field, and nothing changes. Both
// index owners serve either policy: the radix tree, token by token, reads a
// page position's rows from the page of its deepest matched slot.
#include <map>

#include "engine/session_pools.hpp"
#include "node/node_config.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 16;  // tests/data/node's layout [tokens per block]

uint32_t group_index(const Client& c, CacheGroupId group) {
  uint32_t g = 0;
  while (c.session().pools.at(g).group != group) ++g;
  return g;
}

// The recognisable row of token position t in group g: every byte t + 1 + 64 g.
std::vector<uint8_t> row_of(const shm::ShmPayloadStore& pools, uint32_t g, uint32_t t) {
  return std::vector<uint8_t>(pools.row_bytes(g), static_cast<uint8_t>(t + 1 + 64 * g));
}

std::vector<uint8_t> read_row(const shm::ShmPayloadStore& pools, uint32_t g, const PhysicalBlockHandle& h,
                              uint32_t row) {
  std::vector<uint8_t> out(pools.row_bytes(g));
  pools.read_rows(g, h.block.value, row, 1, out);  // the node's pools use block id == slot
  return out;
}

}  // namespace

TEST_CASE("node partial tails: a hit ends inside a published tail, whose rows are copied, never shared",
          "[node][prefix]") {
  const bool partial = GENERATE(true, false);
  const bool radix = GENERATE(false, true);
  INFO("reuse_policy = " << (partial ? "immutable_partial_tail" : "full_block") << ", "
                         << (radix ? "radix" : "hash chain"));
  ScratchDir dir("node-tail");
  InProcessNode n(dir, test_node_config(dir,
                                        std::string("zero_on_recycle = true\nreuse_policy = ") +
                                            (partial ? "\"immutable_partial_tail\"" : "\"full_block\"") +
                                            "\nprefix_index = " + (radix ? "\"radix\"" : "\"hash_chain\"") + "\n",
                                        {}));
  CHECK(n.stat("prefix_index", "reuse_policy_partial_tail") == (partial ? 1 : 0));
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  CHECK(a->session().reuse_policy_id == (partial ? "kvrt.immutable_partial_tail.v1" : "kvrt.full_block.v1"));
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  Result<shm::ShmPayloadStore> a_pools = attach_shared_memory_pools(a->session());
  Result<shm::ShmPayloadStore> b_pools = attach_shared_memory_pools(b->session());
  REQUIRE(a_pools.ok());
  REQUIRE(b_pools.ok());
  const uint32_t G = a_pools->group_count();

  // A serves a 50-token prompt: three full blocks and a two-row tail, each
  // row written with its recognisable bytes, then committed.
  const std::vector<TokenId> prompt = prompt_of(7, 50);
  const AllocationReceipt served = allocation(*a, AllocateOp{50, {}, std::nullopt, "test/shared"});
  std::map<uint32_t, PhysicalBlockHandle> a_blocks;  // (group index * 16 + logical block) -> handle
  for (const TableEntryUpdate& e : served.published_entries) {
    const uint32_t g = group_index(*a, e.handle.group);
    a_blocks[g * 16 + e.logical_block] = e.handle;
    for (uint32_t row = 0; row < kP && e.logical_block * kP + row < 50; ++row)
      a_pools->write_rows(g, e.handle.block.value, row, 1, row_of(*a_pools, g, e.logical_block * kP + row));
  }
  RequestFence fence{served.request_id, served.request_generation, served.table_version_after};
  fence.table_version = allocation(*a, CommitRowsOp{fence, 50}).table_version_after;

  // Its publication names the tail (2 rows of block 3). Under full_block the
  // whole op is refused on tail_rows, and then published without it.
  Result<PrefixBatchReceipt> published =
      a->call(PrefixBatch{{}, {PrefixPublishOp{"test/shared", fence.request, prompt, 0, 3, {}, {}, 2}}});
  REQUIRE(published.ok());
  if (partial) {
    const auto* p = std::get_if<PrefixPublishReceipt>(&published->outcomes.at(0));
    REQUIRE(p != nullptr);
    CHECK(p->published == 4 * G);
  } else {
    const auto* e = std::get_if<Error>(&published->outcomes.at(0));
    REQUIRE(e != nullptr);
    CHECK(e->code == ErrorCode::invalid_argument);
    CHECK(e->field == "tail_rows");
    CHECK(n.stat("prefix_index", radix ? "cached_blocks" : "cached_block_entries") == 0);
    Result<PrefixBatchReceipt> full =
        a->call(PrefixBatch{{}, {PrefixPublishOp{"test/shared", fence.request, prompt, 0, 3}}});
    REQUIRE(full.ok());
    const auto* p = std::get_if<PrefixPublishReceipt>(&full->outcomes.at(0));
    REQUIRE(p != nullptr);
    CHECK(p->published == 3 * G);
  }
  // A tail of P rows or beyond the tokens is refused on the same field.
  for (const auto& [tail, tokens] : {std::pair<uint32_t, size_t>{kP, 50}, {2, 49}}) {
    Result<PrefixBatchReceipt> bad = a->call(PrefixBatch{
        {},
        {PrefixPublishOp{"test/shared",
                         fence.request,
                         std::vector<TokenId>(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(tokens)),
                         0,
                         3,
                         {},
                         {},
                         tail}}});
    REQUIRE(bad.ok());
    const auto* e = std::get_if<Error>(&bad->outcomes.at(0));
    REQUIRE(e != nullptr);
    CHECK(e->field == "tail_rows");
  }
  REQUIRE(a->call(AllocatorBatch{{}, {ReleaseOp{fence, ReleaseReason::finished}}}).ok());

  // B's prompt agrees with A's first 49 tokens, then diverges: S_cap is 49.
  std::vector<TokenId> divergent = prompt;
  divergent[49] = 99999;
  const PrefixMatchReceipt m = match(*b, "test/shared", divergent);
  CHECK(m.reuse_cap_tokens == 49);
  CHECK(m.runtime_hit_tokens == (partial ? 49u : 48u));
  CHECK(m.copy_valid_partial_rows == (partial ? 1u : 0u));
  REQUIRE(m.matched_group_handles.size() == (partial ? 4u : 3u));
  const uint32_t tail_rows = m.runtime_hit_tokens % kP;

  // A tail of P rows is refused, typed, on its field; nothing changes.
  const int64_t live_before = n.stat("allocator", "pool0_live_blocks");
  Result<AllocatorBatchReceipt> refused =
      b->call(AllocatorBatch{{}, {AllocateOp{50, hit_handles(m), std::nullopt, "test/shared", kP}}});
  REQUIRE(refused.ok());
  REQUIRE(std::holds_alternative<Error>(refused->outcomes.at(0)));
  CHECK(std::get<Error>(refused->outcomes[0]).field == "copy_tail_rows");
  CHECK(n.stat("allocator", "pool0_live_blocks") == live_before);

  // B's allocation shares the three full blocks and copies the tail's row.
  const AllocationReceipt mine = allocation(*b, AllocateOp{50, hit_handles(m), std::nullopt, "test/shared", tail_rows});
  REQUIRE(mine.outcome == AllocationOutcome::committed);
  CHECK(mine.copied_rows == tail_rows);
  CHECK(mine.useful_new_rows == 50 - m.runtime_hit_tokens);
  for (const TableEntryUpdate& e : mine.published_entries) {
    const uint32_t g = group_index(*b, e.handle.group);
    if (e.logical_block < 3) {
      CHECK(e.handle == a_blocks.at(g * 16 + e.logical_block));  // shared by reference
      continue;
    }
    // Block 3 is B's own: a new block, never A's tail, holding the copied rows.
    CHECK_FALSE(e.handle == a_blocks.at(g * 16 + 3));
    CHECK(e.valid_rows == tail_rows);
    CHECK(read_row(*b_pools, g, e.handle, 0) ==
          (partial ? row_of(*b_pools, g, 48) : std::vector<uint8_t>(b_pools->row_bytes(g), 0)));
    CHECK(read_row(*b_pools, g, e.handle, 1) == std::vector<uint8_t>(b_pools->row_bytes(g), 0));  // zeroed, not A's
    // B's divergent row 49 goes into its own block; A's published tail keeps its rows.
    b_pools->write_rows(g, e.handle.block.value, 1, 1, std::vector<uint8_t>(b_pools->row_bytes(g), 0xEE));
    if (partial) CHECK(read_row(*a_pools, g, a_blocks.at(g * 16 + 3), 1) == row_of(*a_pools, g, 49));
  }
  const RequestFence b_fence{mine.request_id, mine.request_generation, mine.table_version_after};
  CHECK(allocation(*b, CommitRowsOp{b_fence, 50}).outcome == AllocationOutcome::committed);

  // The same lookup again still ends inside A's tail: B published nothing.
  CHECK(match(*b, "test/shared", divergent).runtime_hit_tokens == m.runtime_hit_tokens);
  CHECK(n.stat("allocator", "partial_tails_copied") == (partial ? 1 : 0));
  CHECK(n.stat("allocator", "partial_tail_rows_copied") == (partial ? 1 : 0));
  CHECK(n.stat("prefix_index", "partial_tails_published") == (partial ? 1 : 0));
  CHECK(n.stat("prefix_index", "lookup_partial_tail_hits") == (partial ? 2 : 0));
  Result<NodeStats> s = read_node_stats(n.descriptor, true);
  REQUIRE(s.ok());
  for (const OwnerStats& owner : s->owners) {
    INFO(owner.owner << ": " << owner.validate_error);
    CHECK(owner.validate_ok);
  }
}

TEST_CASE("node config: the reuse policy is read by name, under either index", "[node][prefix][config]") {
  for (const char* index : {"hash_chain", "radix"}) {
    Result<NodeConfig> c =
        parse_node_config(std::string("[node]\nlayout = \"l.toml\"\nblocks_per_group = 16\n") + "prefix_index = \"" +
                              index + "\"\nreuse_policy = \"immutable_partial_tail\"\n",
                          "tail.toml");
    REQUIRE(c.ok());
    CHECK(c->reuse_policy == ReusePolicy::immutable_partial_tail);
  }
  Result<NodeConfig> fallback = parse_node_config("[node]\nlayout = \"l.toml\"\nblocks_per_group = 16\n", "tail.toml");
  REQUIRE(fallback.ok());
  CHECK(fallback->reuse_policy == ReusePolicy::full_block);
  Result<NodeConfig> bad = parse_node_config(
      "[node]\nlayout = \"l.toml\"\nblocks_per_group = 16\nreuse_policy = \"partial\"\n", "tail.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().describe().find("tail.toml:4") != std::string::npos);
  CHECK(bad.error().describe().find("immutable_partial_tail") != std::string::npos);  // the accepted names
}

}  // namespace kvrt::test
