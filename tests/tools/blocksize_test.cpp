// [blocksize] The block-size cost vector (tools/blocksize, `kvrt blocksize`)
// against the worked numbers of spec 0x09B (the nested-prefix fixture:
// lengths [33, 25, 16], 64 KiB rows, a 128-slot pool) and 0x09C (two
// branches sharing 20 tokens), and a random workload against a brute-force
// recount of its tables' laws.
#include <catch2/catch.hpp>
#include <random>

#include "tools/blocksize/block_size_sweep.hpp"

namespace kvrt::test {
namespace {

const BlockSizeCost& at(const BlockSizeSweep& s, uint32_t P) {
  for (const BlockSizeCost& c : s.costs)
    if (c.allocator_block == P) return c;
  FAIL("no P_a = " << P);
  return s.costs.front();
}

}  // namespace

TEST_CASE("blocksize: the 0x09B fixture's hit staircase, tails and record counts", "[blocksize]") {
  const BlockSizeSweep s = sweep_block_sizes(nested_prefix_fixture(), nested_prefix_fixture_config()).value();
  REQUIRE(s.costs.size() == 5);
  // Full-block hits of B and C under the logits cap, P floor((T - 1) / P):
  // 36, 32, 16, 0, 0 tokens; the recomputed B + C tail 5, 9, 25, 41, 41
  // (A's 33 prompt tokens are computed at every size).
  const uint32_t sizes[] = {4, 8, 16, 32, 64};
  const uint64_t hits[] = {36, 32, 16, 0, 0};
  for (int i = 0; i < 5; ++i) {
    const BlockSizeCost& c = at(s, sizes[i]);
    INFO("P_a = " << sizes[i]);
    CHECK(c.prompt_tokens == 33 + 25 + 16);
    CHECK(c.hit_tokens == hits[i]);
    CHECK(c.recomputed_tokens == 33 + 41 - hits[i]);
    // The immutable partial-tail alternative reuses 39 tokens (24 for B, 15
    // for C) at every size, and copies the rows past each hit's last full block.
    CHECK(c.partial_tail_hit_tokens == 39);
    CHECK(c.partial_tail_copy_rows == 24 % sizes[i] + 15 % sizes[i]);
    // Storage identity: only the 33-token path, ceil(33 / P) blocks.
    CHECK(c.ideal_unique_blocks == (33 + sizes[i] - 1) / sizes[i]);
    CHECK(c.ideal_unique_tail_rows == c.ideal_unique_blocks * sizes[i] - 33);
  }
  // "At P=4, unique tail is only 3 * 64 KiB = 192 KiB, but the fixed
  // 128-slot pool needs 32 descriptors and the three request maps contain
  // 20 entries. At P=32 ... 31 * 64 KiB = 1.9375 MiB."
  CHECK(at(s, 4).ideal_unique_tail_rows * s.config.row_bytes == 192 * 1024);
  CHECK(at(s, 4).metadata.counts.pool_blocks == 32);
  CHECK(at(s, 4).request_block_refs == 20);
  CHECK(at(s, 32).ideal_unique_tail_rows * s.config.row_bytes == 31 * 64 * 1024);
  // Request-view tail counts every map alone: sum_r (ceil(T_r/P) P - T_r).
  CHECK(at(s, 4).request_view_tail_rows == 3 + 3 + 0);
  CHECK(at(s, 32).request_view_tail_rows == 31 + 7 + 16);
  // The runtime at P = 4: A's 9 blocks, B's private tail block, and C's
  // fourth block, recomputed under the cap (15 rows align down to 12) and
  // held privately: 11 blocks, not the ideal 9.
  CHECK(at(s, 4).runtime_unique_blocks == 11);
  CHECK(at(s, 4).runtime_unique_tail_rows == 3 + 3 + 0);
  // At P = 32 nothing is shared (the cap leaves B and C no full block): A's
  // two blocks and one private block each for B and C.
  CHECK(at(s, 32).runtime_unique_blocks == 4);
  // The table of the three contexts at P_k = 4 under P_a = 16: rows of 9, 7 and 4 blocks.
  const BlockSizeCost& p16 = at(s, 16);
  REQUIRE(p16.kernels.size() == 3);
  CHECK(p16.kernels[0].kernel_block == 4);
  CHECK(p16.kernels[0].table.dense_cells == 27);
  CHECK(p16.kernels[0].table.used_cells == 20);
  CHECK(p16.kernels[0].table.padding_cells == 7);
  CHECK(at(s, 4).kernels.size() == 1);  // only P_k = 4 divides P_a = 4
  // Nothing forks: no copy.
  for (const BlockSizeCost& c : s.costs) CHECK(c.cow_copies == 0);
}

TEST_CASE("blocksize: shared-prefix chunks of the nested prefixes, counted by hand (0x0BD, 0x0BI)", "[blocksize]") {
  BlockSizeSweepConfig config = nested_prefix_fixture_config();
  config.allocator_block_sizes = {4, 32};
  config.chunk_tokens = {8, 16};
  const BlockSizeSweep s = sweep_block_sizes(nested_prefix_fixture(), config).value();
  for (const BlockSizeCost& c : s.costs) {
    INFO("P_a = " << c.allocator_block);
    REQUIRE(c.chunks.size() == 2);
    // P_c = 8: A = [0,8) [8,16) [16,24) [24,32) [32,33); B shares the first
    // three and ends with its own [24,25); C shares the first two.
    const ChunkCost& c8 = c.chunks[0];
    CHECK(c8.sequences == 3);
    CHECK(c8.chunks == 6);
    CHECK(c8.ordinary_visits == 5 + 4 + 2);
    CHECK(c8.materialised_chunks == 3);  // coverage 3, 3 and 2
    CHECK(c8.partial_rows == 3 + 3 + 2);
    CHECK(c8.saved_reads == 74 - (8 * 4 + 1 + 1));
    // Per partial row and query head: d_v fp32 lanes and two fp32 states.
    CHECK(c8.partial_bytes == c8.partial_rows * (64 * 4 + 2 * 4) * 8);
    // P_c = 16: A = [0,16) [16,32) [32,33); B adds [16,25); C shares [0,16).
    const ChunkCost& c16 = c.chunks[1];
    CHECK(c16.chunks == 4);
    CHECK(c16.ordinary_visits == 3 + 2 + 1);
    CHECK(c16.materialised_chunks == 1);
    CHECK(c16.partial_rows == 3);
    CHECK(c16.saved_reads == 74 - (16 + 16 + 1 + 9));
    CHECK(c16.step_seconds == 0);  // no timing asked
  }
}

TEST_CASE("blocksize: a branch at 20 shared tokens copies 20 mod P rows into a P-row block (0x09C)", "[blocksize]") {
  std::vector<TokenId> prompt(20);
  for (uint32_t i = 0; i < 20; ++i) prompt[i] = static_cast<TokenId>(i + 1);
  BlockSizeSweepConfig config = nested_prefix_fixture_config();
  const uint64_t B = config.row_bytes;
  const BlockSizeSweep s = sweep_block_sizes({SweepRequest{"", prompt, {7, 8}, 2}}, config).value();
  // r = 20 mod P: 0 at P = 4 (the prefix ends on a boundary: no copy),
  // 4 at 8 and 16, 20 at 32 and 64.
  const uint32_t sizes[] = {4, 8, 16, 32, 64};
  const uint64_t rows[] = {0, 4, 4, 20, 20};
  for (int i = 0; i < 5; ++i) {
    const BlockSizeCost& c = at(s, sizes[i]);
    INFO("P_a = " << sizes[i]);
    CHECK(c.cow_copies == (rows[i] ? 1u : 0u));
    CHECK(c.cow_rows == rows[i]);
    CHECK(c.cow_traffic_bytes == 2 * rows[i] * B);                          // M_copy,R+W = 2 r B_row
    CHECK(c.cow_capacity_bytes == (rows[i] ? uint64_t{sizes[i]} * B : 0));  // M_dst = P_a B_row
  }
  // A_capacity = P_a / r = 16 / 4 at P_a = 16.
  CHECK(at(s, 16).cow_capacity_bytes / (at(s, 16).cow_rows * B) == 4);
}

TEST_CASE("blocksize property: random workloads keep the ledgers' laws at every size", "[blocksize][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 11));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<SweepRequest> requests;
  std::vector<std::vector<TokenId>> bases;
  for (int b = 0; b < 3; ++b) {
    std::vector<TokenId> base(20 + rng() % 60);
    for (TokenId& t : base) t = static_cast<TokenId>(rng() % 50);
    bases.push_back(base);
  }
  for (int r = 0; r < 8; ++r) {
    const std::vector<TokenId>& base = bases[rng() % bases.size()];
    std::vector<TokenId> prompt(base.begin(), base.begin() + 1 + rng() % base.size());
    for (size_t k = 0, n = rng() % 10; k < n; ++k) prompt.push_back(static_cast<TokenId>(100 + rng() % 50));
    std::vector<TokenId> decode(rng() % 12);
    for (TokenId& t : decode) t = static_cast<TokenId>(200 + rng() % 50);
    requests.push_back(SweepRequest{rng() % 4 == 0 ? "tenant-b" : "", prompt, decode,
                                    static_cast<uint32_t>(rng() % 3 == 0 ? 2 + rng() % 2 : 1)});
  }
  BlockSizeSweepConfig config = nested_prefix_fixture_config();
  config.allocator_block_sizes = {1, 3, 4, 16, 64};
  config.pool_tokens = 0;
  const BlockSizeSweep s = sweep_block_sizes(requests, config).value();
  uint64_t prompt_total = 0, expanded = 0;
  for (const SweepRequest& r : requests) {
    prompt_total += r.prompt.size() * r.branches;
    expanded += r.branches;
  }
  CHECK(s.requests == expanded);
  for (const BlockSizeCost& c : s.costs) {
    const uint32_t P = c.allocator_block;
    INFO("P_a = " << P);
    CHECK(c.prompt_tokens == prompt_total);
    CHECK(c.hit_tokens + c.recomputed_tokens == c.prompt_tokens);
    CHECK(c.hit_tokens % P == 0);  // full blocks only
    // Token granularity finds every full-block hit and perhaps more.
    CHECK(c.partial_tail_hit_tokens >= c.hit_tokens);
    CHECK(c.partial_tail_hit_tokens == s.costs.front().partial_tail_hit_tokens);
    CHECK(c.partial_tail_copy_rows < uint64_t{P} * s.requests + 1);
    // Brute force: the request-view maps are ceil(T_r / P) each.
    uint64_t refs = 0, tail = 0;
    for (const SweepRequest& r : requests) {
      const uint64_t T = r.prompt.size() + r.decode.size();
      refs += r.branches * ((T + P - 1) / P);
      tail += r.branches * (((T + P - 1) / P) * P - T);
    }
    CHECK(c.request_block_refs == refs);
    CHECK(c.request_view_tail_rows == tail);
    // Sharing never stores more than the maps name, and the ideal never more than the runtime.
    CHECK(c.runtime_unique_blocks <= c.request_block_refs);
    CHECK(c.ideal_unique_blocks <= c.runtime_unique_blocks);
    CHECK(c.runtime_unique_tail_rows <= c.request_view_tail_rows);
    CHECK(c.metadata.total_bytes == c.metadata.request_map_bytes + c.metadata.descriptor_bytes +
                                        c.metadata.cached_hash_bytes + c.metadata.valid_tail_bytes +
                                        c.metadata.free_queue_bytes + c.metadata.fixed_bytes);
    CHECK(c.cow_rows < uint64_t{P} * (c.cow_copies + 1));
    for (const KernelTableCost& k : c.kernels) {
      CHECK(P % k.kernel_block == 0);
      CHECK(k.table.dense_cells == k.table.used_cells + k.table.padding_cells);
    }
  }
  // With P = 1 the runtime shares every equal prefix the cap allows: its
  // unwritten rows are none.
  CHECK(at(s, 1).runtime_unique_tail_rows == 0);
  CHECK(at(s, 1).ideal_unique_tail_rows == 0);
}

TEST_CASE("blocksize: bad sweeps are typed errors naming the field", "[blocksize]") {
  BlockSizeSweepConfig config = nested_prefix_fixture_config();
  auto field_of = [&](const std::vector<SweepRequest>& r, const BlockSizeSweepConfig& c) {
    Result<BlockSizeSweep> s = sweep_block_sizes(r, c);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::invalid_argument);
    return s.error().field;
  };
  BlockSizeSweepConfig none = config;
  none.allocator_block_sizes.clear();
  CHECK(field_of(nested_prefix_fixture(), none) == "sizes");
  BlockSizeSweepConfig huge = config;
  huge.allocator_block_sizes = {8192};
  CHECK(field_of(nested_prefix_fixture(), huge) == "sizes");
  BlockSizeSweepConfig zero_kernel = config;
  zero_kernel.kernel_block_sizes = {0};
  CHECK(field_of(nested_prefix_fixture(), zero_kernel) == "kernel_sizes");
  BlockSizeSweepConfig no_rows = config;
  no_rows.row_bytes = 0;
  CHECK(field_of(nested_prefix_fixture(), no_rows) == "row_bytes");
  CHECK(field_of({}, config) == "workload");
  CHECK(field_of({SweepRequest{"", {}, {}, 1}}, config) == "workload");
}

TEST_CASE("blocksize: the kernel and the mapper measure what the tables and frontiers say", "[blocksize]") {
  // Two requests: 40 prompt tokens and 5 decoded, and its 33-token prefix.
  std::vector<TokenId> prompt(40);
  for (uint32_t i = 0; i < 40; ++i) prompt[i] = static_cast<TokenId>(i + 3);
  BlockSizeSweepConfig config = nested_prefix_fixture_config();
  config.allocator_block_sizes = {16};
  config.kernel_block_sizes = {8, 16};
  config.kernel_timing.trials = 3;
  config.page_group_tokens = {32, 64};
  config.chunk_tokens = {16};
  const BlockSizeSweep s = sweep_block_sizes({SweepRequest{"", prompt, {90, 91, 92, 93, 94}, 1},
                                              SweepRequest{"", {prompt.begin(), prompt.begin() + 33}, {}, 1}},
                                             config)
                               .value();
  const BlockSizeCost& c = at(s, 16);
  REQUIRE(c.kernels.size() == 2);
  for (const KernelTableCost& k : c.kernels) {
    INFO("P_k = " << k.kernel_block);
    CHECK(k.timed_requests == 2);
    // The kernel visits ceil(T / P_k) blocks per K/V head: T = 45 and 33.
    CHECK(k.kernel_blocks ==
          2 * ((45 + k.kernel_block - 1) / k.kernel_block + (33 + k.kernel_block - 1) / k.kernel_block));
    CHECK(k.kernel_blocks == 2 * k.table.used_cells);
    CHECK(k.kv_bytes == (45 + 33) * 2 * 64 * 4 * 2);  // rows x K/V heads x lanes x fp32 x (K and V)
    CHECK(k.step_seconds > 0);
    CHECK(k.read_floor_seconds > 0);
  }
  // The 33-token prompt is a prefix of the 45-token context: chunks [0,16)
  // and [16,32) shared, then [32,45) and [32,33) each their own.
  REQUIRE(c.chunks.size() == 1);
  CHECK(c.chunks[0].chunks == 4);
  CHECK(c.chunks[0].ordinary_visits == 3 + 3);
  CHECK(c.chunks[0].step_seconds > 0);
  CHECK(c.chunks[0].paged_step_seconds > 0);
  // Page groups of 32 rows: ceil(45/32) + ceil(33/32) = 4 pages per tensor,
  // each mapped once in K and once in V; tails 19 + 31 rows. Of 64: 1 + 1 pages.
  REQUIRE(s.page_groups.size() == 2);
  CHECK(s.page_groups[0].mapped_pages == 4);
  CHECK(s.page_groups[0].map_calls == 8);
  CHECK(s.page_groups[0].tail_rows == 19 + 31);
  CHECK(s.page_groups[0].steps == 1 + 5 + 1);
  CHECK(s.page_groups[1].mapped_pages == 2);
  CHECK(s.page_groups[1].map_calls == 4);
  CHECK(s.page_groups[1].tail_rows == 19 + 31);
  // A page group that is not a whole OS page per tensor is refused, typed.
  config.page_group_tokens = {24};
  Result<BlockSizeSweep> bad = sweep_block_sizes(nested_prefix_fixture(), config);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().field == "page_groups");
}

}  // namespace kvrt::test
