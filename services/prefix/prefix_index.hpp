#pragma once
// PrefixIndex: the prefix (hash-chain) index owner of spec 0x07 (docs/architecture.md
// "prefix index"). It answers "which exact prefix already exists, and which
// physical rows realise it" with an immutable PrefixMatchReceipt; it proposes
// candidates, the compatibility gate and the allocator decide, and nothing
// here schedules (0x07C).
//
// What it owns: a map from block digest to a record (parent digest, token ids,
// extras fingerprint, valid rows) and, per record, the blocks that realise it
// in each cache group, in publication order. What it does not own: the
// blocks. The index holds only *weak* identity: it asks the allocator to tag
// a committed block with a 64-bit cache key, and drops the entry when the
// allocator reports that key evicted (absorb). Eviction order is the
// allocator's; the index never frees anything.
//
// Laws (validate()):
//   - every record is in the digest table under its own digest, and the table
//     holds nothing else; every record has >= 1 live entry;
//   - every live entry is listed exactly once by its record, in publication
//     order, and its cache key decodes to it;
//   - every record is a child of its parent digest in the child lists;
//   - full records hold P token ids, tails 0 < v < P (partial-tail policy);
//   - with the allocator: each entry's handle is current, carries the entry's
//     key and at least the record's valid rows, and every keyed block of the
//     allocator is an entry (the weak identities agree both ways).
// A rejected operation returns a typed Error and changes nothing (0x04F).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"
#include "services/identity/namespace_registry.hpp"
#include "services/prefix/digest_table.hpp"
#include "services/prefix/hash_chain.hpp"
#include "services/prefix/kv_events.hpp"
#include "services/prefix/prefix_lengths.hpp"
#include "services/prefix/prefix_match_receipt.hpp"
#include "services/prefix/prefix_scope.hpp"
#include "services/prefix/publication_target.hpp"

namespace kvrt {

struct PrefixIndexConfig {
  HashFamily hash_family = HashFamily::sha256;
  uint32_t block_tokens = 16;  // P: hash block = allocator block [tokens]
  uint32_t cache_groups = 1;   // G: groups every hit must cover (0x07C)
  Sha256Digest layout_sha256;  // the layout the index serves (a scope root fact)
  ReusePolicy policy = ReusePolicy::full_block;
  // 0x07F optional secondary witness: compare stored token ids on every
  // publication and hit, rejecting an equal digest over different tokens.
  bool collision_witness = true;
  // vLLM keeps publishing a full block whose digest is already present (no
  // de-duplication); kvrt by default leaves such a duplicate untagged, so it
  // returns to the free pool instead of occupying cache.
  bool publish_duplicates = false;
  IndexSnapshotId snapshot_id{1};  // names this index in receipts
  Sha256Path sha256_path = Sha256Path::automatic;
  // The gate: when set, scopes come only from open_scope(manifest).
  const CacheNamespaceRegistry* registry = nullptr;
  KvEventSink* events = nullptr;  // nullptr: no events

  // Family, P (hash_block_size, which must equal allocator_block_size here),
  // group count and digest of a layout manifest.
  static Result<PrefixIndexConfig> from_layout(const CacheLayoutManifest& layout);
};

struct PrefixLookupArgs {
  RequestId request_id;
  RequestGeneration request_generation;
  std::span<const TokenId> tokens;          // the prompt, S_prompt tokens
  const BlockExtrasPlan* extras = nullptr;  // nullptr: no extras (the scope's salt still applies)
  LogitsPath logits_path = LogitsPath::logits_required;
  // The request's chain if already computed (vLLM keeps request.block_hashes);
  // empty: computed here.
  std::span<const BlockHash> block_hashes;
};

// A hit that ends inside a published block (partial-tail policy, 0x07D): its
// first `rows` rows are shared and immutable under the block's key. The
// allocator (Loop 5) carries the intent out transactionally: the request maps
// the source bundle by reference with S_runtime rows, and its first divergent
// append copies exactly these rows into a private bundle (copy-on-write).
struct CopyRowsIntent {
  uint32_t logical_block = 0;               // j of the shared block in the request [blocks]
  std::vector<PhysicalBlockHandle> source;  // one handle per cache group
  uint32_t rows = 0;                        // valid rows to copy, 0 < rows < P [rows]

  friend bool operator==(const CopyRowsIntent&, const CopyRowsIntent&) = default;
};

struct PrefixMatch {
  PrefixMatchReceipt receipt;
  PrefixLengths lengths;
  // Hit bundles, bundle-major (entry i*G + g), ready for AllocateArgs::prefix_hit:
  // full_hit_blocks full bundles, then the partial bundle when copy rows > 0.
  std::vector<PhysicalBlockHandle> hit_handles;
  uint32_t full_hit_blocks = 0;
  std::optional<CopyRowsIntent> copy_intent;  // set when the receipt's copy rows > 0
  std::vector<BlockHash> block_hashes;        // the prompt's full-block chain
};

struct PrefixPublishArgs {
  RequestId request;                  // allocator request whose tables hold the blocks
  std::span<const TokenId> tokens;    // the request's tokens from position 0
  std::span<const BlockHash> hashes;  // its chain, at least through end_block
  const BlockExtrasPlan* extras = nullptr;
  uint32_t first_block = 0;  // publish full blocks [first_block, end_block)
  uint32_t end_block = 0;
};

struct PrefixTailArgs {
  RequestId request;
  std::span<const TokenId> tokens;    // the request's tokens from position 0
  std::span<const BlockHash> hashes;  // its chain through block - 1
  const BlockExtrasPlan* extras = nullptr;
  uint32_t block = 0;       // logical block holding the tail
  uint32_t valid_rows = 0;  // v: 0 < v < P committed rows [rows]
};

struct PublishOutcome {
  uint32_t published = 0;   // (block, group) entries added
  uint32_t duplicates = 0;  // left untagged because the digest was present (publish_duplicates off)
  uint32_t already = 0;     // already tagged with this digest by this index
};

struct AbsorbOutcome {
  uint32_t removed = 0;  // entries dropped
  uint32_t unknown = 0;  // events for keys this index does not hold (already dropped)
};

class PrefixIndex {
 public:
  static Result<PrefixIndex> create(PrefixIndexConfig config);

  // --- the gate (prefix_scope.hpp) -----------------------------------------
  // Authorizes the consumer manifest against the registry (namespace,
  // generation, ABI/layout/model/adapter/transform/position/salt facts),
  // checks its layout digest against this index's, and derives the root.
  Result<PrefixScope> open_scope(const CacheCompatibilityManifest& consumer) const;
  // The one scope of an index without a registry (the pinned vLLM path:
  // isolation by process lifetime and cache salt only, 0x07B).
  Result<PrefixScope> local_scope() const;

  // --- the chain -------------------------------------------------------------
  // The per-block extras of a request in a scope: the scope's salt is the
  // block-0 extra. Error when the request names another salt (0x07F).
  Result<BlockExtrasPlan> extras_plan(const PrefixScope& scope, RequestExtras extras) const;
  void extend_hashes(const PrefixScope& scope, std::span<const TokenId> tokens, const BlockExtrasPlan& extras,
                     std::vector<BlockHash>& hashes) const;
  const ChainHasher& hasher() const { return hasher_; }

  // --- lookup (0x07C) -------------------------------------------------------
  // The hot walk: the longest run h_0.. of at most max_blocks digests whose
  // every required group has a current block (and, with the witness and
  // witness_tokens given, equal token ids). Appends G handles per matched
  // block to `handles` when non-null. `currency` (the allocator) fences each
  // handle's generation; without it the index trusts its absorbed events.
  uint32_t match_full_blocks(std::span<const BlockHash> hashes, uint32_t max_blocks,
                             std::span<const TokenId> witness_tokens, const BlockAllocator* currency,
                             std::vector<PhysicalBlockHandle>* handles) const;
  // The whole lookup: gate checks, the four lengths, policy, receipt.
  Result<PrefixMatch> lookup(const PrefixScope& scope, const PrefixLookupArgs& args,
                             const BlockAllocator* currency) const;
  // A consumer's check of a receipt (0x07G failure closure): digest,
  // snapshot, internal consistency of lengths and bundles, namespace
  // generation, and that every matched block is still indexed and current.
  Status check_receipt(const PrefixMatchReceipt& receipt, const BlockAllocator* currency) const;

  // --- publication (after the K/V rows are committed) -----------------------
  // Into a PublicationTarget (publication_target.hpp): an in-process
  // allocator (AllocatorPublicationTarget), or a table snapshot of the
  // allocator owner behind an actor (BlockTableSnapshotTarget).
  Result<PublishOutcome> publish_blocks(const PrefixScope& scope, PublicationTarget& target,
                                        const PrefixPublishArgs& args);
  Result<PublishOutcome> publish_tail(const PrefixScope& scope, PublicationTarget& target, const PrefixTailArgs& args);

  // --- weak identity --------------------------------------------------------
  // Drops the entries whose cache keys the allocator evicted (drain_events()).
  AbsorbOutcome absorb(std::span<const AllocatorEvent> events);
  // Drops every identity: the allocator evicts each key (live mappings stay),
  // the index empties and emits AllBlocksCleared.
  Status clear(BlockAllocator& allocator);

  // --- queries ---------------------------------------------------------------
  uint32_t block_tokens() const { return config_.block_tokens; }
  uint32_t cache_groups() const { return config_.cache_groups; }
  const PrefixIndexConfig& config() const { return config_; }
  size_t cached_blocks() const { return live_entries_; }  // (block, group) entries
  size_t hash_keys() const { return live_records_; }      // distinct digests
  uint64_t publication_generation() const { return publication_generation_; }
  // Whether `digest` is indexed with a block in every group.
  bool contains(const BlockHash& digest) const;
  // Every indexed (digest, group index) key (tests: KV events reconstruct it).
  std::vector<std::pair<BlockHash, uint32_t>> present_keys() const;

  Status validate(const BlockAllocator* allocator = nullptr) const;
  // Canonical digest of the whole index state (records, their blocks and
  // keys, the publication generation): a rejected operation leaves it unchanged.
  Sha256Digest state_digest() const;

 private:
  struct Entry {
    uint32_t record = 0;
    uint32_t group_index = 0;
    PhysicalBlockHandle handle;
    CacheKey cache_key;       // key_of(slot, generation)
    uint64_t sequence = 0;    // publication order
    uint32_t generation = 0;  // of this entry slot
    bool live = false;
  };
  // Hot fields (read by every walk step) first, so a step touches one line.
  struct Record {
    std::vector<uint32_t> entries;  // live entry slots, publication order
    bool tail = false;
    bool live = false;
    bool root_child = false;      // parent is a scope root
    uint32_t valid_rows = 0;      // P, or v for a tail [rows]
    std::vector<TokenId> tokens;  // the witness: valid_rows token ids
    BlockHash digest;
    BlockHash parent;
    std::optional<ExtrasKey> extras;
  };
  // Pre-checked publication of one (record, group, handle).
  struct PendingEntry {
    uint32_t block = 0;
    uint32_t group = 0;
    PhysicalBlockHandle handle;
  };

  PrefixIndex() = default;
  Status check_scope(const PrefixScope& scope) const;
  // 0x07C generations_are_current: the handle's generation (and the key the
  // block carries) fences a block recycled before the index absorbed its
  // eviction. Without an allocator the absorbed events are trusted.
  bool entry_current(const Entry& e, const BlockAllocator* currency) const {
    return currency == nullptr || currency->holds_cache_key(e.handle, e.cache_key);
  }
  // First current entry of `group` in the record, or nullptr.
  const Entry* group_entry(const Record& r, uint32_t group, const BlockAllocator* currency) const;
  // Best partial extension under `parent` for the request's block `block`
  // (0x07A S_sem, 0x07D): the child with the longest common token prefix.
  struct Extension {
    uint32_t rows = 0;
    uint32_t record = DigestTable::kMissing;
  };
  Extension best_child(const BlockHash& parent, std::span<const TokenId> block_tokens,
                       const std::optional<ExtrasKey>& extras, const BlockAllocator* currency) const;
  // What publish_blocks and publish_tail hand the one publication path:
  // digests[k], the child of parents[k] with extras[k], is logical block
  // first_block + k of `request`, covering valid_rows rows of `tokens`.
  enum class Published : uint8_t { full_blocks, partial_tail };
  struct PublishEntries {
    RequestId request;
    std::span<const TokenId> tokens;
    std::span<const BlockHash> digests;
    std::span<const BlockHash> parents;
    std::span<const std::optional<ExtrasKey>> extras;
    uint32_t first_block = 0;  // [blocks]
    uint32_t valid_rows = 0;   // of each block [rows]
    Published kind = Published::full_blocks;
    std::string lora;  // the adapter the extras name; empty: none
  };
  Result<PublishOutcome> publish(const PrefixScope& scope, PublicationTarget& target, const PublishEntries& entries);
  uint32_t new_record(const BlockHash& digest, const BlockHash& parent, std::span<const TokenId> tokens,
                      const std::optional<ExtrasKey>& extras, uint32_t valid_rows, Published kind, bool root_child);
  uint32_t new_entry(uint32_t record, uint32_t group, const PhysicalBlockHandle& handle);
  // Removes a live entry (and its record when it was the last); emits BlockRemoved
  // when the (digest, group) key leaves the index.
  void remove_entry(uint32_t slot);
  bool group_present(const Record& r, uint32_t group) const;
  void emit(KvEvent event);
  // The key this index gives entry `slot` in its `generation`: slot + 1 in the
  // high word (so no key is kNoCacheKey), the generation in the low word, so
  // an allocator event naming a key finds its entry without a lookup table.
  static CacheKey key_of(uint32_t slot, uint32_t generation) {
    return CacheKey{(uint64_t{slot} + 1) << 32 | generation};
  }
  // The live entry that carries exactly `key` (the one decoder of key_of).
  std::optional<uint32_t> entry_keyed(CacheKey key) const {
    const uint64_t slot = (key.value >> 32) - 1;  // kNoCacheKey wraps past every slot
    if (slot >= entries_.size() || !entries_[slot].live || entries_[slot].cache_key != key) return std::nullopt;
    return static_cast<uint32_t>(slot);
  }

  PrefixIndexConfig config_;
  ChainHasher hasher_;
  DigestTable table_;
  std::vector<Record> records_;
  std::vector<uint32_t> free_records_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_entries_;
  std::unordered_map<BlockHash, std::vector<uint32_t>, BlockHashHasher> children_;  // parent -> records
  size_t live_entries_ = 0;
  size_t live_records_ = 0;
  // Allocator events absorbed [events]: equal to the allocator's
  // cache_keys_dropped() when every dropped identity has reached this index.
  uint64_t absorbed_events_ = 0;
  uint64_t next_sequence_ = 1;
  uint64_t publication_generation_ = 1;
};

}  // namespace kvrt
