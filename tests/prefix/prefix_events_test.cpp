// KV events: vLLM-shaped BlockStored / BlockRemoved /
// AllBlocksCleared, emitted in order through the sink. Folding the stream
// reconstructs the index's present (digest, group) keys after every
// operation of a random workload, with and without duplicate publication.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "services/common/units.hpp"
#include "services/prefix/request_identity.hpp"
#include "tests/prefix/prefix_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// A router's view: the keys the event stream says are present.
void fold(std::set<std::pair<BlockHash, uint32_t>>& keys, const std::vector<KvEvent>& events) {
  for (const KvEvent& ev : events) {
    if (const auto* s = std::get_if<KvBlockStored>(&ev)) {
      for (const auto& h : s->block_hashes) REQUIRE(keys.emplace(h, s->group_index).second);  // never stored twice
    } else if (const auto* r = std::get_if<KvBlockRemoved>(&ev)) {
      for (const auto& h : r->block_hashes) REQUIRE(keys.erase({h, r->group_index}) == 1);
    } else {
      keys.clear();
    }
  }
}

}  // namespace

TEST_CASE("a request identity's adapter reaches BlockStored by its name, without its version", "[prefix][events]") {
  RequestIdentity id;
  id.adapter_id = "adapter-x";
  id.adapter_version = "3";
  const Result<RequestExtras> extras = identity_extras(id, "salt");
  REQUIRE(extras.ok());
  PrefixRig rig;
  rig.produce(iota_tokens(32), *extras);
  const std::vector<KvEvent> ev = rig.events.drain();
  REQUIRE(ev.size() == 1);
  // The version still keys the blocks (another version's chain differs),
  // but vLLM's lora_name is the adapter's name.
  CHECK(std::get<KvBlockStored>(ev[0]).lora_name == std::optional<std::string>("adapter-x"));
  RequestIdentity v4 = id;
  v4.adapter_version = "4";
  CHECK(rig.chain(iota_tokens(32), identity_extras(v4, "salt").value()) != rig.chain(iota_tokens(32), *extras));
}

TEST_CASE("BlockStored carries the chain, its parent, the tokens and the adapter", "[prefix][events]") {
  PrefixRig rig;
  RequestExtras lora;
  lora.lora_name = "adapter-x";
  const std::vector<TokenId> a = iota_tokens(48);
  rig.produce(a, lora);
  const auto chain = rig.chain(a, lora);
  std::vector<KvEvent> ev = rig.events.drain();
  REQUIRE(ev.size() == 1);
  const auto& s = std::get<KvBlockStored>(ev[0]);
  CHECK(s.block_hashes == chain);
  CHECK_FALSE(s.parent_block_hash.has_value());  // the chain starts at the scope root
  CHECK(s.token_ids == a);
  CHECK(s.block_size == 16);
  CHECK(s.lora_name == std::optional<std::string>("adapter-x"));
  CHECK(s.group_index == 0);

  // A continuation publishes only its new block, naming its parent.
  const std::vector<TokenId> b = iota_tokens(64);
  rig.produce(b, lora);
  ev = rig.events.drain();
  REQUIRE(ev.size() == 1);
  const auto& s2 = std::get<KvBlockStored>(ev[0]);
  REQUIRE(s2.block_hashes.size() == 1);
  CHECK(s2.block_hashes[0] == rig.chain(b, lora)[3]);
  CHECK(s2.parent_block_hash == std::optional<BlockHash>(chain[2]));
  CHECK(s2.token_ids == std::vector<TokenId>(b.begin() + 48, b.end()));

  const nlohmann::json j = nlohmann::json::parse(to_json(ev[0]));
  CHECK(j["type"] == "BlockStored");
  CHECK(j["block_hashes"][0] == rig.chain(b, lora)[3].hex());
  CHECK(j["parent_block_hash"] == chain[2].hex());
  CHECK(j["block_size"] == 16);
  CHECK(j["lora_name"] == "adapter-x");
  CHECK(j["medium"] == "GPU");
  CHECK(nlohmann::json::parse(to_json(KvAllBlocksCleared{}))["type"] == "AllBlocksCleared");
  CHECK(nlohmann::json::parse(to_json(KvBlockRemoved{{chain[0]}, 1, "GPU"}))["group_idx"] == 1);
}

TEST_CASE("duplicates emit nothing, the last block of a key emits BlockRemoved, clear emits AllBlocksCleared",
          "[prefix][events]") {
  PrefixRigOptions o;
  o.publish_duplicates = true;
  PrefixRig rig(o);
  const std::vector<TokenId> a = iota_tokens(32);
  const RequestId first = rig.produce(a);
  // A second 32-token request hits block 0 (cap 31) and publishes a
  // duplicate of block 1: the key is already present, no event.
  const RequestId second = rig.produce(a);
  CHECK(rig.index.cached_blocks() == 3);
  CHECK(rig.index.hash_keys() == 2);
  std::vector<KvEvent> ev = rig.events.drain();
  REQUIRE(ev.size() == 1);
  CHECK(std::get<KvBlockStored>(ev[0]).block_hashes.size() == 2);

  const auto t1 = rig.alloc.table(first, 0).value();
  REQUIRE(rig.alloc.evict(t1[1]).ok());
  rig.absorb();
  CHECK(rig.events.drain().empty());  // the duplicate still holds the key
  const auto t2 = rig.alloc.table(second, 0).value();
  REQUIRE(rig.alloc.evict(t2[1]).ok());
  rig.absorb();
  ev = rig.events.drain();
  REQUIRE(ev.size() == 1);
  CHECK(std::get<KvBlockRemoved>(ev[0]).block_hashes == std::vector<BlockHash>{rig.chain(a)[1]});

  REQUIRE(rig.index.clear(rig.alloc).ok());
  ev = rig.events.drain();
  REQUIRE(ev.size() == 1);
  CHECK(std::holds_alternative<KvAllBlocksCleared>(ev[0]));
  CHECK(rig.index.cached_blocks() == 0);
  CHECK(rig.alloc.block(t1[0]).value().cache_key == kNoCacheKey);  // the allocator dropped every weak identity
  REQUIRE(rig.index.validate(&rig.alloc).ok());
}

TEST_CASE("folding the event stream reconstructs the present keys after every operation", "[prefix][events]") {
  for (bool duplicates : {false, true}) {
    for (uint32_t groups : {1u, 2u}) {
      INFO("duplicates " << duplicates << " groups " << groups);
      PrefixRigOptions o;
      o.groups = groups;
      o.blocks = 20;
      o.block_tokens = 4;
      o.publish_duplicates = duplicates;
      o.queue = FreeQueuePolicy::single_lru_queue;
      PrefixRig rig(o);
      std::mt19937_64 rng(duplicates * 10 + groups);
      std::set<std::pair<BlockHash, uint32_t>> keys;
      std::vector<RequestId> running;
      for (int step = 0; step < 400; ++step) {
        const int op = static_cast<int>(rng() % 10);
        if (op < 5) {
          std::vector<TokenId> t(1 + rng() % 20);
          for (auto& x : t) x = static_cast<TokenId>(rng() % 3);
          const uint64_t needed = ceil_div(t.size(), 4);
          const auto c = rig.alloc.counts(0);
          if (c.free + c.evictable < needed + 2) continue;
          running.push_back(rig.produce(t));
        } else if (op < 8 && !running.empty()) {
          const size_t k = rng() % running.size();
          rig.release(running[k]);
          running.erase(running.begin() + static_cast<ptrdiff_t>(k));
        } else if (op == 8) {
          // An explicit eviction of a random tagged block.
          for (uint32_t s = 0; s < 20; ++s) {
            const PhysicalBlockHandle h = rig.alloc.handle_of(static_cast<uint32_t>(rng() % groups), s);
            if (rig.alloc.block(h).value().cache_key != kNoCacheKey && rng() % 3 == 0) {
              REQUIRE(rig.alloc.evict(h).ok());
              rig.absorb();
              break;
            }
          }
        } else if (op == 9 && rng() % 8 == 0) {
          REQUIRE(rig.index.clear(rig.alloc).ok());
        }
        fold(keys, rig.events.drain());
        const auto present = rig.index.present_keys();
        REQUIRE(std::vector<std::pair<BlockHash, uint32_t>>(keys.begin(), keys.end()) == present);
        REQUIRE(rig.index.validate(&rig.alloc).ok());
      }
    }
  }
}
