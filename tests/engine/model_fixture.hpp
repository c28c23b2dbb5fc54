#pragma once
// Helpers of the [model] suite (tests/model_test.cpp): the small layout,
// seeded token sequences, block tables, and bitwise dumps of what a forward()
// left in a cache.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model/reference_model.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt::model::test {

inline CacheLayoutManifest model_layout(const char* file = "small-two-group.toml") {
  auto m = load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/" + file);
  REQUIRE(m.ok());
  return *m;
}

inline ModelConfig seeded_config(uint64_t seed, uint32_t threads = 1) {
  ModelConfig c;
  c.seed = seed;
  c.threads = threads;
  return c;
}

inline ReferenceModel make_model(const ModelConfig& config, const CacheLayoutManifest& layout) {
  auto m = ReferenceModel::create(config, layout);
  REQUIRE(m.ok());
  return std::move(*m);
}

inline std::unique_ptr<LocalModelKvCache> make_cache(const CacheLayoutManifest& layout, uint32_t slots = 64) {
  auto c = LocalModelKvCache::create(layout, slots);
  REQUIRE(c.ok());
  return std::move(*c);
}

// Token ids of a test sequence: a 64-bit LCG (Knuth's MMIX constants), top
// bits modulo vocab.
inline std::vector<TokenId> seeded_tokens(uint64_t seed, uint32_t n, uint32_t vocab) {
  std::vector<TokenId> t(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<TokenId>((s >> 33) % vocab);
  }
  return t;
}

// A table for `tokens` rows: group 0 uses slots first, first+1, ...; the
// other groups walk `first + blocks - 1` downwards, so physical order differs
// per group (nothing may assume equal slots across groups).
inline SequenceBlocks blocks_for(const CacheLayoutManifest& layout, uint32_t tokens, uint32_t first) {
  const uint32_t p = layout.allocator_block_size;
  const uint32_t blocks = (tokens + p - 1) / p;
  SequenceBlocks b;
  b.slots.resize(layout.cache_groups.size());
  for (size_t g = 0; g < b.slots.size(); ++g)
    for (uint32_t j = 0; j < blocks; ++j) b.slots[g].push_back(g == 0 ? first + j : first + blocks - 1 - j);
  return b;
}

// Every canonical row [0, tokens) of a sequence, group by group.
inline std::vector<uint8_t> canonical_rows(const ModelKvCache& cache, const SequenceBlocks& blocks, uint32_t tokens) {
  const CacheLayoutManifest& layout = cache.layout();
  const uint32_t p = layout.allocator_block_size;
  std::vector<uint8_t> all;
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
    std::vector<uint8_t> row(layout.cache_groups[g].row_bytes());
    for (uint32_t t = 0; t < tokens; ++t) {
      REQUIRE(cache.read_canonical_row(g, blocks.slots[g][t / p], t % p, row).ok());
      all.insert(all.end(), row.begin(), row.end());
    }
  }
  return all;
}

// Every canonical row of every slot: the whole cache, to show a refused
// call wrote nothing.
inline std::vector<uint8_t> whole_cache(const ModelKvCache& cache) {
  const CacheLayoutManifest& layout = cache.layout();
  std::vector<uint8_t> all;
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
    std::vector<uint8_t> row(layout.cache_groups[g].row_bytes());
    for (uint32_t s = 0; s < cache.slot_count(); ++s)
      for (uint32_t t = 0; t < layout.allocator_block_size; ++t) {
        REQUIRE(cache.read_canonical_row(g, s, t, row).ok());
        all.insert(all.end(), row.begin(), row.end());
      }
  }
  return all;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One chunk's forward; returns its logits.
inline std::vector<float> forward_rows(const ReferenceModel& model, ModelKvCache& cache, const SequenceBlocks& blocks,
                                       std::span<const TokenId> tokens, uint32_t first_row) {
  const ForwardChunk chunk{&blocks, tokens, first_row};
  auto out = model.forward(cache, std::span<const ForwardChunk>(&chunk, 1));
  REQUIRE(out.ok());
  REQUIRE(out->size() == 1);
  return std::move((*out)[0]);
}

// Shared-memory pools of every group of `layout` (owned: removed with the store).
inline shm::ShmPayloadStore make_shm_store(const CacheLayoutManifest& layout, uint32_t slots) {
  std::vector<shm::BlockPoolSegment> segments;
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
    shm::PoolSegmentOptions o;
    o.name = shm::PoolSegmentName{"model-test", NamespaceGeneration{1}, layout.cache_groups[g].group_id,
                                  shm::make_instance_id()};
    o.pool_id = PoolId{g + 1};
    o.pool_generation = PoolGeneration{1};
    o.capacity = shm::PoolCapacity::blocks(slots);
    auto segment = shm::BlockPoolSegment::create(layout, o);
    REQUIRE(segment.ok());
    segments.push_back(std::move(*segment));
  }
  auto store = shm::ShmPayloadStore::create(std::move(segments));
  REQUIRE(store.ok());
  return std::move(*store);
}

}  // namespace kvrt::model::test
