// write_canonical_row and copy_kv_rows (engine/model/model_kv_cache.hpp):
// rows written in canonical order read back unchanged, land at the
// elements the canonical order names (checked through the layer views,
// not through read_canonical_row), and copies move exactly the rows asked
// between caches whose physical orders differ; refusals change nothing.
#include <cstring>
#include <random>

#include "tests/engine/model_fixture.hpp"

using namespace kvrt;
using namespace kvrt::model;
using namespace kvrt::model::test;

namespace {

std::vector<uint8_t> random_row(std::mt19937_64& rng, size_t bytes) {
  std::vector<uint8_t> row(bytes);
  for (uint8_t& b : row) b = static_cast<uint8_t>(rng());
  return row;
}

}  // namespace

TEST_CASE("write_canonical_row: the canonical order's elements, read back unchanged, nothing else touched",
          "[model][rows]") {
  const uint64_t seed = GENERATE(1u, 2u, 3u);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Two groups with different axis orders (slot-major and layer-major).
  const CacheLayoutManifest layout = model_layout();
  auto cache = make_cache(layout, 8);
  const std::vector<uint8_t> before = whole_cache(*cache);
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
    const CacheGroupLayout& group = layout.cache_groups[g];
    const uint32_t slot = static_cast<uint32_t>(rng() % cache->slot_count());
    const uint32_t row = static_cast<uint32_t>(rng() % layout.allocator_block_size);
    const std::vector<uint8_t> in = random_row(rng, group.row_bytes());
    REQUIRE(write_canonical_row(*cache, g, slot, row, in).ok());
    std::vector<uint8_t> out(group.row_bytes());
    REQUIRE(cache->read_canonical_row(g, slot, row, out).ok());
    CHECK(out == in);
    // Element (kind, layer, head, lane) sits at canonical offset
    // ((kind L + l) H + h) d + x scalars (K first, layer-major, then head, lane).
    const uint32_t L = group.layer_end - group.layer_start, H = group.kv_heads_local, d = group.head_dim;
    for (int kind = 0; kind < 2; ++kind)
      for (uint32_t l = 0; l < L; ++l)
        for (uint32_t h = 0; h < H; ++h)
          for (uint32_t x = 0; x < d; x += d - 1) {
            const executor::PagedKvView& view = cache->layer_view(group.layer_start + l);
            const executor::KvTensorView& t = kind == 0 ? view.k : view.v;
            const uint32_t b = t.scalar_bytes();
            const size_t k_bytes = size_t{L} * H * d * scalar_bytes(group.k_dtype);
            const size_t at = (kind == 0 ? 0 : k_bytes) + ((size_t{l} * H + h) * d + x) * b;
            CHECK(std::memcmp(t.row(slot, row, h) + size_t{x} * t.lane_stride * b, in.data() + at, b) == 0);
          }
  }
  // Exactly two rows' bytes changed in the whole cache.
  const std::vector<uint8_t> after = whole_cache(*cache);
  REQUIRE(after.size() == before.size());
  size_t changed = 0;
  for (size_t i = 0; i < after.size(); ++i) changed += after[i] != before[i];
  CHECK(changed <= layout.cache_groups[0].row_bytes() + layout.cache_groups[1].row_bytes());
  CHECK(changed > 0);
}

TEST_CASE("write_canonical_row: refusals are typed and write nothing", "[model][rows]") {
  const CacheLayoutManifest layout = model_layout();
  auto cache = make_cache(layout, 4);
  const std::vector<uint8_t> before = whole_cache(*cache);
  const std::vector<uint8_t> row(layout.cache_groups[0].row_bytes(), 0xAB);
  CHECK(write_canonical_row(*cache, 7, 0, 0, row).error().code == ErrorCode::unknown_group);
  CHECK(write_canonical_row(*cache, 0, 0, 0, std::span(row).first(row.size() - 1)).error().code ==
        ErrorCode::invalid_argument);
  CHECK(write_canonical_row(*cache, 0, 4, 0, row).error().field == "slot");
  CHECK(write_canonical_row(*cache, 0, 0, layout.allocator_block_size, row).error().field == "row");
  CHECK(whole_cache(*cache) == before);
}

TEST_CASE("copy_kv_rows: the rows asked move between different block tables, bit for bit, and no others",
          "[model][rows]") {
  const uint64_t seed = GENERATE(11u, 12u);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const CacheLayoutManifest layout = model_layout();
  const uint32_t P = layout.allocator_block_size, tokens = 3 * P + 5;
  auto from = make_cache(layout, 16);
  auto to = make_cache(layout, 16);
  // Source at blocks from slot 1, destination from slot 9 (groups run in
  // opposite directions in blocks_for): no row is at the same place.
  const SequenceBlocks src = blocks_for(layout, tokens, 1), dst = blocks_for(layout, tokens, 9);
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g)
    for (uint32_t t = 0; t < tokens; ++t)
      REQUIRE(
          write_canonical_row(*from, g, src.slots[g][t / P], t % P, random_row(rng, layout.cache_groups[g].row_bytes()))
              .ok());
  const uint32_t begin = static_cast<uint32_t>(rng() % P), end = tokens - static_cast<uint32_t>(rng() % 4);
  REQUIRE(copy_kv_rows(*from, src, *to, dst, begin, end).ok());
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
    std::vector<uint8_t> a(layout.cache_groups[g].row_bytes()), b(a.size()), zero(a.size(), 0);
    for (uint32_t t = 0; t < tokens; ++t) {
      REQUIRE(from->read_canonical_row(g, src.slots[g][t / P], t % P, a).ok());
      REQUIRE(to->read_canonical_row(g, dst.slots[g][t / P], t % P, b).ok());
      INFO("group " << g << " row " << t);
      CHECK(b == (t >= begin && t < end ? a : zero));
    }
  }
  SECTION("refusals: another layout, a row past either table; nothing written") {
    const std::vector<uint8_t> kept = whole_cache(*to);
    auto other = make_cache(model_layout("model-wide.toml"), 16);
    CHECK(copy_kv_rows(*from, src, *other, dst, 0, 1).error().code == ErrorCode::incompatible);
    const SequenceBlocks short_dst = blocks_for(layout, P, 9);
    // Rows [0, P) fit the one-block table, row P does not: none is copied.
    const Status past = copy_kv_rows(*from, src, *to, short_dst, 0, P + 1);
    CHECK(past.error().code == ErrorCode::coordinate_out_of_range);
    CHECK(past.error().field == "blocks");
    CHECK(whole_cache(*to) == kept);
  }
}
