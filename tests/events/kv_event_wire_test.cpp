// The msgpack bytes of vLLM's EventBatch, derived by hand from the msgpack
// specification for msgspec's array-like, tagged encoding (the format
// vllm/distributed/kv_events.py sends), against encode_event_batch.
#include "events/kv_event_wire.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

namespace kvrt::events {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string out;
  for (int v : b) out.push_back(static_cast<char>(v));
  return out;
}

BlockHash hash_of(uint8_t first) {
  BlockHash h;
  for (size_t i = 0; i < h.bytes.size(); ++i) h.bytes[i] = static_cast<uint8_t>(first + i);
  return h;
}

std::string str(const std::string& s) { return std::string(1, static_cast<char>(0xa0 | s.size())) + s; }

}  // namespace

TEST_CASE("a batch of AllBlocksCleared is [ts, [[tag]], rank] in msgpack", "[events]") {
  const std::vector<KvEvent> events{KvAllBlocksCleared{}};
  // fixarray 3, float64 1.5 (0x3FF8000000000000), fixarray 1 of fixarray 1
  // of fixstr 16 "AllBlocksCleared", positive fixint 0.
  const std::string want =
      bytes({0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x91}) + str("AllBlocksCleared") + bytes({0x00});
  CHECK(encode_event_batch(events, 1.5, KvEventWireOptions{}) == want);
  KvEventWireOptions no_rank;
  no_rank.data_parallel_rank = std::nullopt;  // its default: omitted as a trailing default
  CHECK(encode_event_batch(events, 1.5, no_rank) ==
        bytes({0x92, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x91}) + str("AllBlocksCleared"));
}

TEST_CASE("BlockStored and BlockRemoved carry vLLM's fields in order, hashes as bin 32 or uint 64", "[events]") {
  KvBlockStored stored;
  stored.block_hashes = {hash_of(1)};
  stored.token_ids = {7, 300};
  stored.block_size = 2;
  stored.medium = "CPU";
  stored.lora_name = "ad";
  stored.group_index = 1;
  KvBlockRemoved removed;
  removed.block_hashes = {hash_of(1)};
  removed.medium = "CPU";
  const std::vector<KvEvent> events{stored, removed};
  const std::string h = bytes({0xc4, 32}) + std::string(reinterpret_cast<const char*>(hash_of(1).bytes.data()), 32);
  // ["BlockStored", [h], nil, [7, 300], 2, nil (lora_id), "CPU", "ad", nil (extra_keys), 1]
  const std::string stored_bytes = bytes({0x9a}) + str("BlockStored") + bytes({0x91}) + h + bytes({0xc0, 0x92, 0x07}) +
                                   bytes({0xcd, 0x01, 0x2c, 0x02, 0xc0}) + str("CPU") + str("ad") + bytes({0xc0, 0x01});
  // ["BlockRemoved", [h], "CPU", 0]
  const std::string removed_bytes = bytes({0x94}) + str("BlockRemoved") + bytes({0x91}) + h + str("CPU") + bytes({0});
  const std::string head = bytes({0x93, 0xcb, 0x40, 0x00, 0, 0, 0, 0, 0, 0, 0x92});  // ts 2.0, 2 events
  CHECK(encode_event_batch(events, 2.0, KvEventWireOptions{}) == head + stored_bytes + removed_bytes + bytes({0}));

  // Int hashes: the digest as a big-endian integer, modulo 2^64 = its last
  // eight bytes (25..32 here), as vLLM's maybe_convert_block_hash.
  CHECK(block_hash_int64(hash_of(1)) == 0x191a1b1c1d1e1f20ULL);
  KvEventWireOptions ints;
  ints.hash_format = BlockHashFormat::int64;
  const std::vector<KvEvent> one{removed};
  CHECK(encode_event_batch(one, 2.0, ints) ==
        head.substr(0, head.size() - 1) + bytes({0x91, 0x94}) + str("BlockRemoved") +
            bytes({0x91, 0xcf, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20}) + str("CPU") + bytes({0, 0}));
}

}  // namespace kvrt::events
