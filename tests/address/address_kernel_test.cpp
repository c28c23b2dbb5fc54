// Kernel-side block arithmetic (spec 0x0A, 0x0AA-0x0AC): allocator blocks
// split into kernel blocks, the ragged block-table ledger, and how BLOCK_SIZE
// shapes the pinned paged-attention kernel. Each figure is compared with a
// derivation that walks tokens or cells one by one.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <vector>

#include "services/address/kernel_block_split.hpp"
#include "services/address/paged_kernel_geometry.hpp"
#include "services/address/ragged_table_ledger.hpp"
#include "tests/address/address_fixture.hpp"

using namespace kvrt;
using kvrt::test::kernel_ids_by_tokens;


TEST_CASE("0x0AC: allocator blocks expand to kernel blocks for P_a = q * P_k", "[address]") {
  const std::vector<uint64_t> ids{3, 7};
  auto split = split_allocator_blocks(ids, 32, 16);
  REQUIRE(split.ok());
  CHECK(split->split_factor == 2);
  CHECK(split->kernel_ids == std::vector<uint64_t>{6, 7, 14, 15});
  CHECK(split->kernel_ids == kernel_ids_by_tokens(ids, 32, 16));

  auto four = split_allocator_blocks(ids, 64, 16);  // one allocator id -> four kernel ids
  REQUIRE(four.ok());
  CHECK(four->split_factor == 4);
  CHECK(four->kernel_ids.size() == 4 * ids.size());
  CHECK(four->kernel_ids == kernel_ids_by_tokens(ids, 64, 16));

  const std::vector<uint64_t> many{0, 5, 1, 12};
  for (uint32_t pk : {1u, 2u, 4u, 8u, 16u}) {
    auto s = split_allocator_blocks(many, 16, pk);
    REQUIRE(s.ok());
    CHECK(s->kernel_ids == kernel_ids_by_tokens(many, 16, pk));
  }
  auto identity = split_allocator_blocks(many, 16, 16);
  REQUIRE(identity.ok());
  CHECK(identity->kernel_ids == many);
}

TEST_CASE("0x0AC: a kernel block that does not divide the allocator block is rejected", "[address]") {
  const std::vector<uint64_t> ids{3, 7};
  auto uneven = split_allocator_blocks(ids, 32, 24);
  REQUIRE(!uneven.ok());
  CHECK(uneven.error().code == ErrorCode::kernel_block_not_divisor);
  CHECK(uneven.error().field == "kernel_block_size");
  CHECK(split_allocator_blocks(ids, 16, 32).error().code == ErrorCode::kernel_block_not_divisor);  // merge
  CHECK(split_allocator_blocks(ids, 32, 0).error().code == ErrorCode::invalid_argument);
  CHECK(split_allocator_blocks(ids, 0, 16).error().code == ErrorCode::invalid_argument);
  const std::vector<uint64_t> last{UINT64_MAX / 2};  // kernel ids up to exactly 2^64 - 1
  CHECK(split_allocator_blocks(last, 32, 16)->kernel_ids.back() == UINT64_MAX);
  const std::vector<uint64_t> huge{UINT64_MAX / 2 + 1};
  CHECK(split_allocator_blocks(huge, 32, 16).error().code == ErrorCode::invalid_argument);
}

TEST_CASE("0x0AB: the ragged block-table ledger for lengths [64, 63, 17, 1]", "[address]") {
  const std::vector<uint64_t> lengths{64, 63, 17, 1};
  auto l = ragged_table_ledger(lengths, 16);
  REQUIRE(l.ok());

  // Independent derivation: lay out the dense table cell by cell; a cell
  // (r, c) is used when kernel block c holds at least one of row r's tokens.
  uint64_t n_max = 0;
  for (uint64_t t : lengths) {
    uint64_t n = 0;
    while (n * 16 < t) ++n;
    n_max = std::max(n_max, n);
  }
  uint64_t used = 0, pad = 0;
  for (uint64_t t : lengths)
    for (uint64_t c = 0; c < n_max; ++c) (c * 16 < t ? used : pad) += 1;

  CHECK(l->blocks_per_row == std::vector<uint64_t>{4, 4, 2, 1});
  CHECK(l->rows == 4);
  CHECK(l->max_blocks == n_max);
  CHECK(l->dense_cells == lengths.size() * n_max);
  CHECK(l->used_cells == used);
  CHECK(l->padding_cells == pad);
  CHECK(l->dense_cells == 16);
  CHECK(l->used_cells == 11);
  CHECK(l->padding_cells == 5);
  // int32 block ids: 4 bytes per cell.
  CHECK(l->dense_bytes() == 64);
  CHECK(l->used_bytes() == 44);
  CHECK(l->padding_bytes() == 20);
  CHECK(l->dense_bytes() == l->used_bytes() + l->padding_bytes());

  auto empty = ragged_table_ledger({}, 16);
  REQUIRE(empty.ok());
  CHECK(empty->dense_cells == 0);
  CHECK(ragged_table_ledger(lengths, 0).error().code == ErrorCode::invalid_argument);
  const std::vector<uint64_t> enormous{UINT64_MAX, UINT64_MAX, UINT64_MAX};
  CHECK(ragged_table_ledger(enormous, 1).error().code == ErrorCode::invalid_argument);
}

TEST_CASE("0x0AA: kernel geometry for T=2049, P_part=512, warp 32, fp16", "[address]") {
  struct Row {
    uint32_t p;
    uint64_t seq_blocks;
    uint32_t per_partition, thread_group, tokens_per_group, vec;
  };
  // The vLLM sizes the pinned launcher instantiates (8, 16, 32) and the two
  // larger listed sizes; the spec's five rows (table lost) share five partitions.
  const std::vector<Row> rows{{8, 257, 64, 4, 1, 8},
                              {16, 129, 32, 2, 1, 8},
                              {32, 65, 16, 1, 1, 8},
                              {64, 33, 8, 1, 2, 8},
                              {128, 17, 4, 1, 4, 8}};
  for (const Row& row : rows) {
    INFO("block size " << row.p);
    auto g = paged_kernel_geometry({2049, 512, row.p, 32, 2});
    REQUIRE(g.ok());
    // Walk the context one kernel block at a time.
    uint64_t blocks = 0;
    for (uint64_t first = 0; first < 2049; first += row.p) ++blocks;
    uint64_t parts = 0;
    for (uint64_t first = 0; first < 2049; first += 512) ++parts;
    CHECK(g->num_seq_blocks == blocks);
    CHECK(g->num_seq_blocks == row.seq_blocks);
    CHECK(g->num_partitions == parts);
    CHECK(g->num_partitions == 5);
    CHECK(g->blocks_per_partition == row.per_partition);
    CHECK(uint64_t{g->blocks_per_partition} * row.p == 512);
    CHECK(g->thread_group_size == row.thread_group);
    CHECK(g->tokens_per_thread_group == row.tokens_per_group);
    // One warp's thread groups, each taking tokens_per_thread_group tokens, cover a block.
    CHECK(uint64_t{32 / g->thread_group_size} * g->tokens_per_thread_group >= row.p);
    CHECK(g->value_vector_width == row.vec);
  }
  auto fp32 = paged_kernel_geometry({2049, 512, 8, 32, 4});
  REQUIRE(fp32.ok());
  CHECK(fp32->value_vector_width == 4);  // 16 bytes / 4
  auto tiny = paged_kernel_geometry({2049, 512, 2, 32, 1});
  REQUIRE(tiny.ok());
  CHECK(tiny->value_vector_width == 2);  // bounded by P

  auto uneven = paged_kernel_geometry({2049, 512, 48, 32, 2});
  REQUIRE(!uneven.ok());
  CHECK(uneven.error().code == ErrorCode::kernel_block_not_divisor);
  CHECK(paged_kernel_geometry({2049, 512, 16, 0, 2}).error().code == ErrorCode::invalid_argument);
  CHECK(paged_kernel_geometry({2049, 512, 16, 32, 3}).error().code == ErrorCode::invalid_argument);
}

