#pragma once
// KV cache events of the prefix index, shaped like vLLM v1's
// vllm/distributed/kv_events.py so that a KV-aware router could consume them:
// BlockStored {block_hashes, parent_block_hash, token_ids, block_size,
// lora_name, medium}, BlockRemoved {block_hashes, medium}, AllBlocksCleared.
// Each event also names the cache group it concerns.
//
// Semantics (a deliberate tightening of vLLM, which emits BlockStored for
// every published duplicate and BlockRemoved for every evicted block even
// while another block still holds the hash): an event marks a change of the
// *set of (hash, group) keys the index can hit*. BlockStored is emitted when a
// key becomes present, BlockRemoved when its last block goes, so replaying the
// stream in order reconstructs exactly the index's present keys (tested).
// Events leave the core through a sink, in the order the index changed.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "services/prefix/block_hash.hpp"

namespace kvrt {

struct KvBlockStored {
  std::vector<BlockHash> block_hashes;         // consecutive blocks of one chain, parent first
  std::optional<BlockHash> parent_block_hash;  // nullopt: the first hash starts a chain (parent = scope root)
  std::vector<TokenId> token_ids;              // the tokens of those blocks, concatenated
  uint32_t block_size = 0;                     // P [tokens]; a partial tail lists fewer token ids
  std::optional<std::string> lora_name;
  uint32_t group_index = 0;  // cache group, in layout order
  std::string medium = "GPU";

  friend bool operator==(const KvBlockStored&, const KvBlockStored&) = default;
};

struct KvBlockRemoved {
  std::vector<BlockHash> block_hashes;
  uint32_t group_index = 0;
  std::string medium = "GPU";

  friend bool operator==(const KvBlockRemoved&, const KvBlockRemoved&) = default;
};

struct KvAllBlocksCleared {
  friend bool operator==(const KvAllBlocksCleared&, const KvAllBlocksCleared&) = default;
};

using KvEvent = std::variant<KvBlockStored, KvBlockRemoved, KvAllBlocksCleared>;

// vLLM's JSON-facing shape: {"type": "BlockStored", "block_hashes": [hex...], ...}.
std::string to_json(const KvEvent& event);

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void on_event(const KvEvent& event) = 0;
};

// A sink that keeps every event in order (tests, the actor's batching).
class KvEventRecorder final : public KvEventSink {
 public:
  void on_event(const KvEvent& event) override;
  const std::vector<KvEvent>& events() const { return events_; }
  std::vector<KvEvent> drain() {
    std::vector<KvEvent> out;
    out.swap(events_);
    return out;
  }

 private:
  std::vector<KvEvent> events_;
};

}  // namespace kvrt
