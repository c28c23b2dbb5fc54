// StagedModelKvCache: the model computes over a host copy, and rows move
// between the copy and the pools through the pools' store. Checked against
// a process-private cache that computed everything itself, against a
// reference of what the pools and each copy hold under random moves, and
// for refusals that move nothing.
#include "engine/staged_model_kv_cache.hpp"

#include <random>

#include "tests/engine/model_fixture.hpp"

using namespace kvrt;
using namespace kvrt::model;
using namespace kvrt::model::test;
using kvrt::engine::StagedModelKvCache;

namespace {

std::unique_ptr<StagedModelKvCache> make_staged(shm::SharedPoolStore& store, const CacheLayoutManifest& layout) {
  auto staged = StagedModelKvCache::create(store, layout);
  REQUIRE(staged.ok());
  return std::move(*staged);
}

// One canonical row as the cache's host copy holds it (its views), not as
// read_canonical_row answers (the pools).
std::vector<uint8_t> copy_row(const ModelKvCache& cache, uint32_t g, uint32_t slot, uint32_t row) {
  const CacheLayoutManifest& layout = cache.layout();
  std::vector<executor::PagedKvView> views;
  for (uint32_t l = 0; l < layout.layer_count(); ++l) views.push_back(cache.layer_view(l));
  std::vector<uint8_t> out(layout.cache_groups[g].row_bytes());
  gather_canonical_row(layout.cache_groups[g], views, slot, row, out);
  return out;
}

}  // namespace

TEST_CASE("a staged cache reads a prefix another worker stored, and computes what a private cache computes",
          "[model][staged]") {
  const CacheLayoutManifest layout = model_layout();
  constexpr uint32_t kSlots = 12;
  shm::ShmPayloadStore store = make_shm_store(layout, kSlots);
  const ReferenceModel model = make_model(seeded_config(5), layout);
  const std::vector<TokenId> tokens = seeded_tokens(11, 45, model.config().vocab);
  const SequenceBlocks blocks = blocks_for(layout, 45, 2);
  const std::span<const TokenId> prefix = std::span<const TokenId>(tokens).first(32);

  // The reference: one private cache computes all 45 rows.
  auto local = LocalModelKvCache::create(layout, kSlots);
  REQUIRE(local.ok());
  const std::vector<float> expected = forward_rows(model, **local, blocks, tokens, 0);

  // Worker A computes the prefix in its copy; until it stores them, the
  // pools (what read_canonical_row answers) still hold zeros.
  auto a = make_staged(store, layout);
  forward_rows(model, *a, blocks, prefix, 0);
  const std::vector<uint8_t> zero_row(layout.cache_groups[0].row_bytes(), 0);
  std::vector<uint8_t> row(layout.cache_groups[0].row_bytes());
  REQUIRE(a->read_canonical_row(0, blocks.slots[0][1], 3, row).ok());
  CHECK(row == zero_row);
  CHECK(copy_row(*a, 0, blocks.slots[0][1], 3) != zero_row);
  REQUIRE(a->store_rows(blocks, 0, 32).ok());
  CHECK(canonical_rows(*a, blocks, 32) == canonical_rows(**local, blocks, 32));

  // Worker B loads A's prefix into its own copy and computes the rest:
  // bitwise the private cache's logits and rows.
  auto b = make_staged(store, layout);
  REQUIRE(b->load_rows(blocks, 0, 32).ok());
  CHECK(same_bits(forward_rows(model, *b, blocks, tokens, 32), expected));
  REQUIRE(b->store_rows(blocks, 32, 45).ok());
  CHECK(canonical_rows(*b, blocks, 45) == canonical_rows(**local, blocks, 45));

  // Without the load, worker C's copy holds zeros where the prefix is: it
  // computes other logits (what the engine's load prevents).
  auto c = make_staged(store, layout);
  CHECK_FALSE(same_bits(forward_rows(model, *c, blocks, tokens, 32), expected));
}

TEST_CASE("a staged cache refuses rows past the table or the pools and moves nothing", "[model][staged]") {
  const CacheLayoutManifest layout = model_layout();
  constexpr uint32_t kSlots = 6;
  shm::ShmPayloadStore store = make_shm_store(layout, kSlots);
  const ReferenceModel model = make_model(seeded_config(2), layout);
  const std::vector<TokenId> tokens = seeded_tokens(3, 40, model.config().vocab);
  auto staged = make_staged(store, layout);
  const SequenceBlocks blocks = blocks_for(layout, 40, 0);
  forward_rows(model, *staged, blocks, tokens, 0);
  const std::vector<uint8_t> pools_before = whole_cache(*staged);

  // Rows past the table: nothing of rows [0, 40) is stored either.
  Error e = staged->store_rows(blocks, 0, 49).error();
  CHECK(e.code == ErrorCode::coordinate_out_of_range);
  CHECK(e.field == "blocks");
  CHECK(whole_cache(*staged) == pools_before);
  // A slot outside the pools, in the last block of the range.
  SequenceBlocks outside = blocks;
  outside.slots[1].back() = kSlots;
  e = staged->store_rows(outside, 0, 40).error();
  CHECK(e.code == ErrorCode::coordinate_out_of_range);
  CHECK(e.field == "slot");
  CHECK(whole_cache(*staged) == pools_before);
  e = staged->load_rows(outside, 0, 40).error();
  CHECK(e.field == "slot");
  CHECK(copy_row(*staged, 0, blocks.slots[0][2], 7) != std::vector<uint8_t>(layout.cache_groups[0].row_bytes(), 0));
  // An empty range moves nothing and is not an error.
  CHECK(staged->store_rows(blocks, 5, 5).ok());
  CHECK(whole_cache(*staged) == pools_before);

  SECTION("a store of another layout is refused") {
    CacheLayoutManifest other = layout;
    other.allocator_block_size = 32;
    auto refused = StagedModelKvCache::create(store, other);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::incompatible);
    CHECK(refused.error().field == "store.block_tokens");
  }
  SECTION("read_canonical_row checks its coordinates against the pools") {
    std::vector<uint8_t> row(layout.cache_groups[1].row_bytes());
    CHECK(staged->read_canonical_row(2, 0, 0, row).error().code == ErrorCode::unknown_group);
    CHECK(staged->read_canonical_row(1, kSlots, 0, row).error().field == "slot");
    CHECK(staged->read_canonical_row(1, 0, 16, row).error().field == "row_range");
    CHECK(staged->read_canonical_row(0, 0, 0, row).error().field == "out");
  }
}

// Two workers' copies over one pool, under a seeded random mix of writes
// into a copy, stores, loads and refused moves, against a reference of
// every (group, slot, row) of the pools and of each copy.
TEST_CASE("staged moves under random operations match a reference of pools and copies", "[model][staged]") {
  const CacheLayoutManifest layout = model_layout();
  constexpr uint32_t kSlots = 5;
  const uint32_t P = layout.allocator_block_size;
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  shm::ShmPayloadStore store = make_shm_store(layout, kSlots);
  std::unique_ptr<StagedModelKvCache> copies[2] = {make_staged(store, layout), make_staged(store, layout)};
  // [g][slot * P + row] -> the row's bytes; zero at the start.
  using Rows = std::vector<std::vector<std::vector<uint8_t>>>;
  auto zeroed = [&] {
    Rows r(groups);
    for (uint32_t g = 0; g < groups; ++g)
      r[g].assign(kSlots * P, std::vector<uint8_t>(layout.cache_groups[g].row_bytes(), 0));
    return r;
  };
  Rows pools = zeroed(), copy[2] = {zeroed(), zeroed()};
  auto pick = [&](uint64_t n) { return static_cast<uint32_t>(rng() % n); };
  // A table of up to 3 blocks per group over random slots (repeats allowed:
  // two logical blocks may name one slot, as the engine never does but the
  // cache must still move what it is told in order).
  auto random_table = [&] {
    SequenceBlocks b;
    b.slots.resize(groups);
    const uint32_t n = 1 + pick(3);
    for (uint32_t g = 0; g < groups; ++g)
      for (uint32_t j = 0; j < n; ++j) b.slots[g].push_back(pick(kSlots));
    return b;
  };
  for (int op = 0; op < 400; ++op) {
    const uint32_t w = pick(2);
    const SequenceBlocks table = random_table();
    const uint32_t rows = static_cast<uint32_t>(table.slots[0].size()) * P;
    uint32_t begin = pick(rows + 1), end = pick(rows + 1);
    if (begin > end) std::swap(begin, end);
    const bool past = pick(8) == 0;  // a refused move: rows past the table
    if (past) end = rows + 1 + pick(P);
    switch (pick(3)) {
      case 0:  // the model writes rows into worker w's copy
        for (uint32_t g = 0; g < groups; ++g)
          for (uint32_t t = begin; t < std::min(end, rows); ++t) {
            std::vector<uint8_t> bytes(layout.cache_groups[g].row_bytes());
            for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
            const uint32_t slot = table.slots[g][t / P];
            REQUIRE(write_canonical_row(*copies[w], g, slot, t % P, bytes).ok());
            copy[w][g][slot * P + t % P] = bytes;
          }
        break;
      case 1: {  // stored into the pools
        const Status s = copies[w]->store_rows(table, begin, end);
        REQUIRE(s.ok() == !past);
        if (s.ok())
          for (uint32_t g = 0; g < groups; ++g)
            for (uint32_t t = begin; t < end; ++t) {
              const uint32_t at = table.slots[g][t / P] * P + t % P;
              pools[g][at] = copy[w][g][at];
            }
        break;
      }
      default: {  // loaded from the pools
        const Status s = copies[w]->load_rows(table, begin, end);
        REQUIRE(s.ok() == !past);
        if (s.ok())
          for (uint32_t g = 0; g < groups; ++g)
            for (uint32_t t = begin; t < end; ++t) {
              const uint32_t at = table.slots[g][t / P] * P + t % P;
              copy[w][g][at] = pools[g][at];
            }
        break;
      }
    }
    // Every row of the pools and of both copies.
    for (uint32_t g = 0; g < groups; ++g)
      for (uint32_t slot = 0; slot < kSlots; ++slot)
        for (uint32_t r = 0; r < P; ++r) {
          std::vector<uint8_t> in_pools(layout.cache_groups[g].row_bytes());
          REQUIRE(copies[0]->read_canonical_row(g, slot, r, in_pools).ok());
          REQUIRE(in_pools == pools[g][slot * P + r]);
          for (uint32_t c = 0; c < 2; ++c) REQUIRE(copy_row(*copies[c], g, slot, r) == copy[c][g][slot * P + r]);
        }
  }
}
