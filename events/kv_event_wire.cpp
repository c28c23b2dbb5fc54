#include "events/kv_event_wire.hpp"

#include <cstring>
#include <msgpack.hpp>
#include <variant>

namespace kvrt::events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_string(Packer& p, const std::string& s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// Always a float64 (0xcb): msgpack-cxx's pack_double writes a whole number
// as an integer, and vLLM's ts is a float.
void pack_float64(msgpack::sbuffer& buffer, double d) {
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  char out[9];
  out[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buffer.write(out, sizeof out);
}

void pack_hash(Packer& p, const BlockHash& h, BlockHashFormat format) {
  if (format == BlockHashFormat::int64) {
    p.pack_uint64(block_hash_int64(h));
    return;
  }
  p.pack_bin(static_cast<uint32_t>(h.bytes.size()));
  p.pack_bin_body(reinterpret_cast<const char*>(h.bytes.data()), static_cast<uint32_t>(h.bytes.size()));
}

void pack_hashes(Packer& p, const std::vector<BlockHash>& hashes, BlockHashFormat format) {
  p.pack_array(static_cast<uint32_t>(hashes.size()));
  for (const BlockHash& h : hashes) pack_hash(p, h, format);
}

struct PackEvent {
  Packer& p;
  BlockHashFormat format;

  void operator()(const KvBlockStored& e) const {
    p.pack_array(10);
    pack_string(p, "BlockStored");
    pack_hashes(p, e.block_hashes, format);
    if (e.parent_block_hash)
      pack_hash(p, *e.parent_block_hash, format);
    else
      p.pack_nil();
    p.pack_array(static_cast<uint32_t>(e.token_ids.size()));
    for (const TokenId t : e.token_ids) p.pack_int64(t);
    p.pack_uint32(e.block_size);
    p.pack_nil();  // lora_id: deprecated in vLLM, lora_name names the adapter
    pack_string(p, e.medium);
    if (e.lora_name)
      pack_string(p, *e.lora_name);
    else
      p.pack_nil();
    p.pack_nil();  // extra_keys: none beyond the adapter (the salt stays in the hash)
    p.pack_uint32(e.group_index);
  }
  void operator()(const KvBlockRemoved& e) const {
    p.pack_array(4);
    pack_string(p, "BlockRemoved");
    pack_hashes(p, e.block_hashes, format);
    pack_string(p, e.medium);
    p.pack_uint32(e.group_index);
  }
  void operator()(const KvAllBlocksCleared&) const {
    p.pack_array(1);
    pack_string(p, "AllBlocksCleared");
  }
};

}  // namespace

uint64_t block_hash_int64(const BlockHash& hash) {
  uint64_t v = 0;
  for (size_t i = hash.bytes.size() - 8; i < hash.bytes.size(); ++i) v = (v << 8) | hash.bytes[i];
  return v;
}

std::string encode_event_batch(std::span<const KvEvent> events, double ts, const KvEventWireOptions& options) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  p.pack_array(options.data_parallel_rank ? 3 : 2);
  pack_float64(buffer, ts);
  p.pack_array(static_cast<uint32_t>(events.size()));
  for (const KvEvent& e : events) std::visit(PackEvent{p, options.hash_format}, e);
  if (options.data_parallel_rank) p.pack_int32(*options.data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace kvrt::events
