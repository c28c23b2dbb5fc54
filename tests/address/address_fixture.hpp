#pragma once
#include <vector>
// Shared by the [address] suites: loads the Loop 4 fixture (config/layouts/
// two-group-tp2.toml + config/snapshots/loop4-fixture.toml) and builds queries.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "services/address/address_translator.hpp"
#include "services/address/snapshot_loader.hpp"
#include "services/identity/layout_loader.hpp"

namespace kvrt::test {

inline std::string source_path(const std::string& relative) { return std::string(KVRT_SOURCE_DIR) + "/" + relative; }

inline CacheLayoutManifest loop4_layout() {
  auto m = load_layout_manifest(source_path("config/layouts/two-group-tp2.toml"));
  REQUIRE(m.ok());
  return *m;
}

inline TranslationSnapshot loop4_snapshot() {
  auto s = load_translation_snapshot(source_path("config/snapshots/loop4-fixture.toml"), loop4_layout());
  if (!s.ok()) FAIL(s.error().describe());
  return *s;
}

inline AddressTranslator translator_for(TranslationSnapshot s) {
  auto t = AddressTranslator::create(std::move(s));
  if (!t.ok()) FAIL(t.error().describe());
  return std::move(t).value();
}

inline AddressQuery query(std::string request, uint64_t token, uint32_t layer, TensorKind kind = TensorKind::K,
                          uint32_t head = 0, uint32_t lane = 0) {
  AddressQuery q;
  q.request = std::move(request);
  q.token = token;
  q.layer = layer;
  q.kind = kind;
  q.head = head;
  q.lane = lane;
  return q;
}

// Mutable access to one request version / pool of a snapshot under test.
inline RequestTables& request_version(TranslationSnapshot& s, const std::string& name, uint64_t version) {
  for (auto& r : s.requests)
    if (r.name == name && r.table_version.value == version) return r;
  FAIL("fixture has no request " << name << " v" << version);
  return s.requests.front();
}

inline GroupPool& pool_of(TranslationSnapshot& s, uint32_t group) {
  for (auto& p : s.pools)
    if (p.group.value == group) return p;
  FAIL("fixture has no pool for group " << group);
  return s.pools.front();
}

inline PoolDescriptor& descriptor_of(TranslationSnapshot& s, uint32_t group, uint32_t id) {
  for (auto& d : pool_of(s, group).descriptors)
    if (d.physical_id.value == id) return d;
  FAIL("fixture has no descriptor " << id);
  return pool_of(s, group).descriptors.front();
}

// Kernel ids touched by the tokens of each allocator block, in order: token t
// of allocator block a lies at pool row a*P_a + t, inside kernel block
// (a*P_a + t) / P_k.
inline std::vector<uint64_t> kernel_ids_by_tokens(const std::vector<uint64_t>& allocator_ids, uint32_t pa, uint32_t pk) {
  std::vector<uint64_t> out;
  for (uint64_t a : allocator_ids)
    for (uint64_t t = 0; t < pa; ++t) {
      const uint64_t k = (a * pa + t) / pk;
      if (out.empty() || out.back() != k) out.push_back(k);
    }
  return out;
}

}  // namespace kvrt::test
