#pragma once
// KV cache events on vLLM's wire (vllm/distributed/kv_events.py, the format
// vLLM's ZmqEventPublisher sends and KV-aware routers read): one msgpack
// payload per EventBatch, msgspec's encoding of vLLM's structs, which are
// array-like (fields in declaration order), tagged (an event's first
// element is its class name) and omit trailing fields equal to their
// defaults:
//
//   EventBatch       [ts: float64, events: [...], data_parallel_rank: int]
//   BlockStored      ["BlockStored", block_hashes, parent_block_hash | nil,
//                     token_ids, block_size, lora_id (nil), medium,
//                     lora_name | nil, extra_keys (nil), group_idx]
//   BlockRemoved     ["BlockRemoved", block_hashes, medium, group_idx]
//   AllBlocksCleared ["AllBlocksCleared"]
//
// A block hash is the 32 digest bytes (msgpack bin), or as vLLM's
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES gives it, the digest read as a
// big-endian integer, low 64 bits (msgpack uint). group_idx is written
// always (kvrt's pools are per cache group), and so extra_keys before it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "services/prefix/kv_events.hpp"

namespace kvrt::events {

enum class BlockHashFormat : uint8_t { bytes = 0, int64 = 1 };

struct KvEventWireOptions {
  BlockHashFormat hash_format = BlockHashFormat::bytes;
  std::optional<int32_t> data_parallel_rank = 0;  // nullopt: omitted (its default)
};

// The hash as vLLM's int form carries it: the digest as a big-endian
// integer, modulo 2^64.
uint64_t block_hash_int64(const BlockHash& hash);

// One EventBatch's msgpack bytes.
std::string encode_event_batch(std::span<const KvEvent> events, double ts, const KvEventWireOptions& options);

}  // namespace kvrt::events
