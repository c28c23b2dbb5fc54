// Addressing inside a pool segment (spec 0x03E, 0x03F: blocks are
// addressed by (pool id, pool generation, block id) -> byte offset), segment names and
// configured capacity. Every expected figure is derived here independently of
// the code under test: nested (Horner) evaluation written out per axis order,
// brute-force enumeration of row bytes, and the spec's worked address.
#include <random>
#include <utility>
#include <vector>

#include "shm/pool_capacity_config.hpp"
#include "tests/support/shm_test_fixture.hpp"

using namespace kvrt;
using namespace kvrt::shm;
using namespace kvrt::shm::test;

namespace {

using Axes = std::vector<TensorAxis>;
const Axes kSlotMajor{TensorAxis::physical_slot, TensorAxis::layer_local, TensorAxis::token_offset, TensorAxis::kv_head,
                      TensorAxis::head_dim};
const Axes kLayerMajor{TensorAxis::layer_local, TensorAxis::physical_slot, TensorAxis::token_offset,
                       TensorAxis::kv_head, TensorAxis::head_dim};

// Element index of (slot, layer, token, head, lane), written out for the two
// orders two-group-tp2.toml declares (g0 slot-major, g1 layer-major).
uint64_t expected_element(const Axes& order, uint64_t S, uint64_t L, uint64_t P, uint64_t H, uint64_t D, uint64_t slot,
                          uint64_t layer, uint64_t token, uint64_t head, uint64_t lane) {
  if (order == kSlotMajor) return (((slot * L + layer) * P + token) * H + head) * D + lane;
  REQUIRE(order == kLayerMajor);
  return (((layer * S + slot) * P + token) * H + head) * D + lane;
}

}  // namespace

TEST_CASE("segment names are injective, bounded and scoped by instance", "[shm]") {
  const auto name_of = [](std::string ns, std::string instance) {
    return pool_segment_name(
        PoolSegmentName{std::move(ns), NamespaceGeneration{3}, CacheGroupId{1}, std::move(instance)});
  };
  CHECK(name_of("tenant/a", "i1").value() == "/kvrt.tenant~2Fa.g3.c1.i1");
  // Plain replacement of '/' would collide with this one.
  CHECK(name_of("tenant_a", "i1").value() == "/kvrt.tenant_a.g3.c1.i1");
  // '~' itself is escaped, so an escape cannot be forged.
  CHECK(name_of("t~2Fa", "i1").value() == "/kvrt.t~7E2Fa.g3.c1.i1");

  CHECK(name_of({}, "i1").error().field == "namespace_name");
  CHECK(name_of("n", {}).error().field == "instance");
  auto too_long = name_of(std::string(300, 'x'), "i1");
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.error().code == ErrorCode::invalid_argument);

  const std::string a = make_instance_id(), b = make_instance_id();
  CHECK(a != b);
  CHECK(escape_name_component(a) == a);  // instance ids need no escaping
}

TEST_CASE("a byte budget buys whole bundles for every group's pool", "[shm]") {
  const auto layout = two_group_layout();
  // Bundle = P_a * sum_g L_g * H * d_h * (b_K + b_V) = 16 * (24 + 8) * 4 * 128 * 4 = 1 MiB (0x03B).
  const uint64_t bundle = 16ull * (24 + 8) * 4 * 128 * (2 + 2);
  CHECK(capacity_in_blocks(layout, PoolCapacity::bytes(11 * bundle / 2)).value() == 5);
  CHECK(capacity_in_blocks(layout, PoolCapacity::bytes(bundle)).value() == 1);
  CHECK(capacity_in_blocks(layout, PoolCapacity::blocks(9)).value() == 9);
  for (PoolCapacity bad : {PoolCapacity::bytes(bundle - 1), PoolCapacity::blocks(0),
                           PoolCapacity::blocks(uint64_t{1} << 32), PoolCapacity::bytes(UINT64_MAX)}) {
    auto r = capacity_in_blocks(layout, bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::config_field);
    CHECK(r.error().field == "capacity");
  }
}

TEST_CASE("the V tensor follows its own dtype and starts page-aligned", "[shm]") {
  auto layout = two_group_layout();
  layout.cache_groups[1].v_dtype = ScalarType::fp32;
  PoolShape shape;
  REQUIRE(pool_shape(layout, CacheGroupId{1}, 3).ok());
  shape = pool_shape(layout, CacheGroupId{1}, 3).value();
  auto g = PoolGeometry::plan(shape);
  REQUIRE(g.ok());
  const uint64_t elements = 3ull * 16 * 8 * 4 * 128;  // slots * P * L * H * d_h
  CHECK(g->tensor_bytes(TensorKind::K) == elements * 2);
  CHECK(g->tensor_bytes(TensorKind::V) == elements * 4);
  CHECK(g->tensor_offset(TensorKind::V) % kTensorAlignment == 0);
  CHECK(g->tensor_offset(TensorKind::V) >= g->tensor_offset(TensorKind::K) + g->tensor_bytes(TensorKind::K));
  CHECK(pool_shape(layout, CacheGroupId{9}, 3).error().code == ErrorCode::unknown_group);
}

TEST_CASE("byte offsets agree with an independent evaluation of 0x03E for both axis orders", "[shm]") {
  const auto layout = two_group_layout();
  REQUIRE(layout.cache_groups[0].axis_order == kSlotMajor);
  REQUIRE(layout.cache_groups[1].axis_order == kLayerMajor);
  constexpr uint32_t kSlots = 8;
  std::mt19937_64 rng(0x03E);
  for (uint32_t group = 0; group < 2; ++group) {
    const auto& gl = layout.cache_groups[group];
    auto pool = BlockPoolSegment::create(layout, pool_options(group, kSlots, /*generation=*/5, /*pool=*/group + 1));
    REQUIRE(pool.ok());
    const uint64_t L = gl.layers(), P = layout.allocator_block_size, H = gl.kv_heads_local, D = gl.head_dim;
    const uint64_t k_base = pool->geometry().tensor_offset(TensorKind::K);
    const uint64_t v_base = pool->geometry().tensor_offset(TensorKind::V);
    for (int i = 0; i < 4000; ++i) {
      // Corners first, then random interior points.
      const bool corner = i < 2;
      const uint32_t slot = corner ? (i == 0 ? 0 : kSlots - 1) : rng() % kSlots;
      const uint32_t layer = corner ? (i == 0 ? 0 : L - 1) : rng() % L;
      const uint32_t token = corner ? (i == 0 ? 0 : P - 1) : rng() % P;
      const uint32_t head = corner ? (i == 0 ? 0 : H - 1) : rng() % H;
      const uint32_t lane = corner ? (i == 0 ? 0 : D - 1) : rng() % D;
      const TensorKind kind = (i % 2 == 0) ? TensorKind::K : TensorKind::V;
      const uint64_t e = expected_element(gl.axis_order, kSlots, L, P, H, D, slot, layer, token, head, lane);
      const uint64_t expected = (kind == TensorKind::K ? k_base : v_base) + 2 * e;  // fp16
      auto got = pool->byte_offset(PoolBlockRef{PoolId{group + 1}, PoolGeneration{5}, PhysicalSlot{slot}},
                                   KvCoordinate{kind, layer, token, head, lane});
      REQUIRE(got.ok());
      REQUIRE(*got == expected);
    }
    // The last element of V ends exactly at the end of the V tensor.
    auto last = pool->byte_offset(
        PoolBlockRef{PoolId{group + 1}, PoolGeneration{5}, PhysicalSlot{kSlots - 1}},
        KvCoordinate{TensorKind::V, uint32_t(L - 1), uint32_t(P - 1), uint32_t(H - 1), uint32_t(D - 1)});
    REQUIRE(last.ok());
    CHECK(*last + 2 == v_base + pool->geometry().tensor_bytes(TensorKind::V));
  }
}

TEST_CASE("the 0x03F worked address lands on the spec's byte offset", "[shm]") {
  // g1 K shape [8 layers, 8 slots, 16 tokens, 4 heads, 128 dims]; model layer
  // 24 -> layer_local 0, slot 6, token offset 0, head 1, lane 5:
  // E = 0*65536 + 6*8192 + 0*512 + 1*128 + 5 = 49,285; O = 2 * E = 98,570 bytes.
  const auto layout = two_group_layout();
  auto pool = BlockPoolSegment::create(layout, pool_options(1, 8, 7, 2));
  REQUIRE(pool.ok());
  const auto& t = pool->geometry().tensor();
  CHECK(t.strides == std::array<uint64_t, 5>{65536, 8192, 512, 128, 1});
  auto offset = pool->byte_offset(PoolBlockRef{PoolId{2}, PoolGeneration{7}, PhysicalSlot{6}},
                                  KvCoordinate{TensorKind::K, 0, 0, 1, 5});
  REQUIRE(offset.ok());
  CHECK(*offset - pool->geometry().tensor_offset(TensorKind::K) == 98570);
}

TEST_CASE("addressing rejects other pools, stale generations and out-of-range coordinates", "[shm]") {
  const auto layout = two_group_layout();
  auto pool = BlockPoolSegment::create(layout, pool_options(1, 4, /*generation=*/3, /*pool=*/9));
  REQUIRE(pool.ok());
  const PoolBlockRef good{PoolId{9}, PoolGeneration{3}, PhysicalSlot{1}};
  const KvCoordinate c{TensorKind::K, 2, 3, 1, 4};
  REQUIRE(pool->byte_offset(good, c).ok());

  const auto error_of = [&](PoolBlockRef ref, KvCoordinate at) { return pool->byte_offset(ref, at).error(); };
  CHECK(error_of({PoolId{8}, PoolGeneration{3}, PhysicalSlot{1}}, c).code == ErrorCode::unknown_physical);
  const Error stale = error_of({PoolId{9}, PoolGeneration{2}, PhysicalSlot{1}}, c);
  CHECK(stale.code == ErrorCode::stale_generation);
  CHECK(stale.field == "pool_generation");

  const std::pair<KvCoordinate, const char*> outside[] = {
      {{TensorKind::K, 8, 3, 1, 4}, "layer_local"},    // g1 has 8 layers
      {{TensorKind::K, 2, 16, 1, 4}, "token_offset"},  // P = 16
      {{TensorKind::V, 2, 3, 4, 4}, "kv_head"},        // 4 local heads
      {{TensorKind::V, 2, 3, 1, 128}, "lane"},         // d_h = 128
  };
  for (const auto& [at, field] : outside) {
    const Error e = error_of(good, at);
    CHECK(e.code == ErrorCode::coordinate_out_of_range);
    CHECK(e.field == field);
  }
  const Error slot = error_of({PoolId{9}, PoolGeneration{3}, PhysicalSlot{4}}, c);
  CHECK(slot.code == ErrorCode::coordinate_out_of_range);
  CHECK(slot.field == "block_id");

  CHECK(pool->lanes(good, KvCoordinate{TensorKind::K, 2, 3, 1, 120}, 9).error().field == "lane_count");
  CHECK(pool->lanes(good, c, 0).error().code == ErrorCode::invalid_argument);
  CHECK(pool->lanes(good, KvCoordinate{TensorKind::K, 2, 3, 1, 120}, 8)->size() == 16);
  CHECK(pool->row_runs(good, TensorKind::K, 5, 17).error().field == "token_range");
  CHECK(pool->row_runs(good, TensorKind::K, 6, 5).error().field == "token_range");
  CHECK(pool->bytes(ByteRun{0, 8}).error().code == ErrorCode::address_out_of_tensor);  // the header
  const uint64_t end = pool->geometry().tensor_offset(TensorKind::V) + pool->geometry().tensor_bytes(TensorKind::V);
  CHECK(pool->bytes(ByteRun{end - 4, 8}).error().code == ErrorCode::address_out_of_tensor);
}

TEST_CASE("row runs cover exactly the bytes of the selected rows", "[shm]") {
  const auto layout = two_group_layout();
  struct Case {
    uint32_t block, begin, end;
  };
  const Case cases[] = {{0, 0, 16}, {2, 0, 16}, {1, 3, 11}, {2, 15, 16}, {1, 4, 4}};
  for (uint32_t group = 0; group < 2; ++group) {
    const auto& gl = layout.cache_groups[group];
    auto pool = BlockPoolSegment::create(layout, pool_options(group, 3));
    REQUIRE(pool.ok());
    const auto& g = pool->geometry();
    const uint32_t L = gl.layers(), H = gl.kv_heads_local, D = gl.head_dim;
    for (TensorKind kind : {TensorKind::K, TensorKind::V}) {
      for (const Case& sel : cases) {
        const PoolBlockRef ref{PoolId{7}, PoolGeneration{1}, PhysicalSlot{sel.block}};
        // Brute force: mark every byte of every selected element.
        std::vector<uint8_t> expected(g.segment_bytes(), 0), covered(g.segment_bytes(), 0);
        for (uint32_t layer = 0; layer < L; ++layer)
          for (uint32_t t = sel.begin; t < sel.end; ++t)
            for (uint32_t h = 0; h < H; ++h)
              for (uint32_t lane = 0; lane < D; ++lane) {
                const uint64_t o = pool->byte_offset(ref, KvCoordinate{kind, layer, t, h, lane}).value();
                expected[o] = expected[o + 1] = 1;
              }
        auto runs = pool->row_runs(ref, kind, sel.begin, sel.end);
        REQUIRE(runs.ok());
        uint64_t previous_end = 0, seen = 0;
        bool ordered = true;
        runs->for_each([&](ByteRun run) {
          ordered = ordered && run.offset >= previous_end;
          previous_end = run.offset + run.bytes;
          for (uint64_t b = run.offset; b < run.offset + run.bytes; ++b) covered[b] = 1;
          ++seen;
        });
        CHECK(ordered);
        CHECK(seen == runs->run_count());
        CHECK(covered == expected);
        CHECK(runs->total_bytes() == uint64_t{sel.end - sel.begin} * L * H * D * 2);
        // Run structure: a whole block is one run slot-major, one per layer
        // layer-major; a partial row range is one run per layer in both.
        const uint64_t rows = sel.end - sel.begin;
        const uint64_t runs_expected = rows == 0 ? 0 : (rows == 16 && group == 0) ? 1 : L;
        CHECK(runs->run_count() == runs_expected);
      }
    }
  }
}

TEST_CASE("pool capacity is read from config as blocks or bytes, never both", "[shm]") {
  const auto read = [](const std::string& text) {
    auto reader = TomlReader::parse(text, "pool.toml");
    REQUIRE(reader.ok());
    const toml::table* pool = reader->root()["pool"].as_table();
    REQUIRE(pool != nullptr);
    return read_pool_capacity(*reader, *pool, "pool");
  };
  auto blocks = read("[pool]\ncapacity_blocks = 64\n");
  REQUIRE(blocks.ok());
  CHECK(blocks->unit == PoolCapacity::Unit::blocks);
  CHECK(blocks->amount == 64);
  // 64 MiB buys 64 bundles of 1 MiB under two-group-tp2 (0x03B).
  auto bytes = read("[pool]\ncapacity_bytes = 67108864\n");
  REQUIRE(bytes.ok());
  CHECK(bytes->unit == PoolCapacity::Unit::bytes);
  CHECK(capacity_in_blocks(two_group_layout(), *bytes).value() == 64);

  const std::pair<const char*, const char*> rejected[] = {
      {"[pool]\ncapacity_blocks = 64\ncapacity_bytes = 1048576\n", "pool.capacity_bytes"},
      {"[pool]\nother = 1\n", "pool.capacity_blocks"},
      {"[pool]\ncapacity_blocks = 0\n", "pool.capacity_blocks"},
      {"[pool]\ncapacity_bytes = \"1 GiB\"\n", "pool.capacity_bytes"},
  };
  for (const auto& [text, field] : rejected) {
    auto r = read(text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::config_field);
    CHECK(r.error().field == field);
  }
}
