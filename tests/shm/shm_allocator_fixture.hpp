#pragma once
// Helpers for the [shm][allocator] suites: shared pools with a fresh instance
// per call, the seeded canonical rows the tests write, and an independent
// reader that rebuilds a canonical row element by element from the pool's
// byte_offset() (0x03E), placing each scalar where payload_store.hpp's
// canonical order says it goes. That reader shares no code with
// ShmPayloadStore's row plans, so agreement between the two is evidence.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "shm/shared_block_pools.hpp"
#include "tests/support/allocator_fixture.hpp"
#include "tests/support/shm_test_fixture.hpp"

namespace kvrt::shm::test {

// Two-group pools of `blocks` blocks per group in namespace "shm-alloc-test",
// pool ids 20 and 21, block ids 1000+ and 2000+ (0x05B's naming), so a slot is
// never confused with a block id.
inline SharedBlockPoolsOptions shared_options(uint32_t blocks, uint32_t pool_generation = 1) {
  SharedBlockPoolsOptions o;
  o.namespace_name = "shm-alloc-test";
  o.namespace_generation = NamespaceGeneration{5};
  o.instance = make_instance_id();
  o.capacity = PoolCapacity::blocks(blocks);
  o.first_pool_id = PoolId{20};
  o.pool_generation = PoolGeneration{pool_generation};
  o.block_id_bases = {1000, 2000};
  return o;
}

inline std::vector<uint64_t> layout_row_bytes(const CacheLayoutManifest& m) {
  std::vector<uint64_t> out;
  for (const CacheGroupLayout& g : m.cache_groups) out.push_back(g.row_bytes());
  return out;
}

// The canonical row the tests put at `token` of a request of `lineage`.
inline std::vector<uint8_t> seeded_row(uint64_t row_bytes, uint64_t lineage, uint64_t token, uint32_t group) {
  std::vector<uint8_t> row(row_bytes);
  kvrt::test::RowWriter::fill(row, lineage, token, group);
  return row;
}

// Pool slot of a handle under a config (block id = block_id_base + slot).
inline uint32_t slot_of(const BlockAllocatorConfig& config, const PhysicalBlockHandle& h) {
  for (const GroupPoolConfig& pool : config.groups)
    if (pool.group == h.group) return h.block.value - pool.block_id_base;
  FAIL("handle of no configured group");
  return 0;
}

// One token row of a block, rebuilt scalar by scalar: for K then V, layer,
// head and lane, the pool's byte_offset names the scalar's bytes and the
// canonical formula of payload_store.hpp names where they go in the row.
inline std::vector<uint8_t> row_by_elements(const BlockPoolSegment& pool, const PoolBlockRef& ref, uint32_t row,
                                            const CacheGroupLayout& layout) {
  const uint64_t L = layout.layers(), H = layout.kv_heads_local, D = layout.head_dim;
  const uint64_t b_k = scalar_bytes(layout.k_dtype), b_v = scalar_bytes(layout.v_dtype);
  const uint64_t k_row = L * H * D * b_k;
  std::vector<uint8_t> out(k_row + L * H * D * b_v);
  for (TensorKind kind : {TensorKind::K, TensorKind::V}) {
    const uint64_t b = kind == TensorKind::K ? b_k : b_v;
    const uint64_t base = kind == TensorKind::K ? 0 : k_row;
    for (uint32_t l = 0; l < L; ++l)
      for (uint32_t h = 0; h < H; ++h)
        for (uint32_t x = 0; x < D; ++x) {
          auto offset = pool.byte_offset(ref, KvCoordinate{kind, l, row, h, x});
          if (!offset.ok()) FAIL(offset.error().describe());
          auto bytes = pool.bytes(ByteRun{*offset, b});
          if (!bytes.ok()) FAIL(bytes.error().describe());
          std::memcpy(out.data() + base + ((l * H + h) * D + x) * b, bytes->data(), b);
        }
  }
  return out;
}

// Whether every K and V byte of a block is zero, read through the pool's runs.
inline bool block_is_zero(const BlockPoolSegment& pool, const PoolBlockRef& ref) {
  bool zero = true;
  for (TensorKind kind : {TensorKind::K, TensorKind::V}) {
    auto runs = pool.row_runs(ref, kind, 0, pool.geometry().shape().block_tokens);
    REQUIRE(runs.ok());
    runs->for_each([&](ByteRun run) {
      const std::span<const uint8_t> bytes = pool.bytes(run).value();
      for (uint8_t byte : bytes) zero &= byte == 0;
    });
  }
  return zero;
}

}  // namespace kvrt::shm::test
