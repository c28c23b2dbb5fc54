// PrefixIndex: creation, the gate, the chain, and the record/entry mechanics
// shared by publication (prefix_publish.cpp), lookup (prefix_lookup.cpp) and
// validate() (prefix_index_validate.cpp).
#include "services/prefix/prefix_index.hpp"

#include <algorithm>
#include <string>

#include "services/identity/compatibility_digest.hpp"

namespace kvrt {

Result<PrefixIndexConfig> PrefixIndexConfig::from_layout(const CacheLayoutManifest& layout) {
  KVRT_TRY(layout.validate());
  // vLLM may hash at a granularity finer than a group's block; this index
  // keys physical blocks directly, so one hash block is one allocator block.
  if (layout.hash_block_size != layout.allocator_block_size)
    return make_error(ErrorCode::config_field,
                      "hash_block_size " + std::to_string(layout.hash_block_size) +
                          " must equal allocator_block_size " + std::to_string(layout.allocator_block_size) +
                          " (the prefix index keys whole allocator blocks)",
                      "hash_block_size");
  PrefixIndexConfig c;
  c.hash_family = layout.hash_family;
  c.block_tokens = layout.hash_block_size;
  c.cache_groups = static_cast<uint32_t>(layout.cache_groups.size());
  c.layout_sha256 = layout.digest();
  return c;
}

Result<PrefixIndex> PrefixIndex::create(PrefixIndexConfig config) {
  if (config.cache_groups == 0)
    return make_error(ErrorCode::config_field, "at least one cache group is required", "cache_groups");
  if (config.snapshot_id.value == 0)
    return make_error(ErrorCode::config_field, "snapshot id 0 is reserved", "snapshot_id");
  PrefixIndex ix;
  KVRT_TRY_ASSIGN(ix.hasher_, ChainHasher::create(config.hash_family, config.block_tokens, config.sha256_path));
  ix.config_ = config;
  return ix;
}

// --- the gate ----------------------------------------------------------------

Result<PrefixScope> PrefixIndex::open_scope(const CacheCompatibilityManifest& consumer) const {
  if (config_.registry == nullptr)
    return make_error(ErrorCode::invalid_argument, "this index has no namespace registry; use local_scope()",
                      "registry");
  // 0x01A steps 1-2 before any digest is derived or probed: a rejected
  // consumer learns nothing about what the index holds.
  KVRT_TRY(config_.registry->authorize_lookup(consumer));
  if (consumer.cache_layout_sha256 != config_.layout_sha256)
    return make_error(ErrorCode::incompatible,
                      "consumer layout " + consumer.cache_layout_sha256.hex() +
                          " is not the layout this index serves (" + config_.layout_sha256.hex() + ")",
                      "cache_layout_sha256");
  PrefixScope s;
  s.namespace_id_ = consumer.cache_isolation_namespace;
  s.namespace_generation_ = consumer.namespace_generation;
  s.compatibility_sha256_ = compatibility_digest(consumer);
  s.cache_salt_ = consumer.cache_salt;
  s.gated_ = true;
  s.covered_token_ids_ = consumer.covered_token_ids;
  CanonicalWriter w("kvrt.prefix.scope.v1");
  w.u8("hash_family", static_cast<uint8_t>(config_.hash_family))
      .u32("block_tokens", config_.block_tokens)
      .digest("index_layout_sha256", config_.layout_sha256)
      .str("namespace", consumer.cache_isolation_namespace)
      .u64("namespace_generation", consumer.namespace_generation.value)
      .str("cache_abi_sha256", consumer.cache_abi_sha256)
      .digest("cache_layout_sha256", consumer.cache_layout_sha256)
      .u64("model_generation", consumer.model_generation)
      .str("adapter_identity", consumer.adapter_identity)
      .str("weight_transform_identity", consumer.weight_transform_identity)
      .str("position_contract_sha256", consumer.position_contract_sha256)
      .u64("publication_generation", consumer.publication_generation);
  s.root_ = hasher_.root(w.buffer());
  return s;
}

Result<PrefixScope> PrefixIndex::local_scope() const {
  if (config_.registry != nullptr)
    return make_error(ErrorCode::invalid_argument,
                      "this index sits behind a namespace registry; scopes come only from open_scope(manifest)",
                      "registry");
  PrefixScope s;
  CanonicalWriter w("kvrt.prefix.scope.v1");
  w.u8("hash_family", static_cast<uint8_t>(config_.hash_family))
      .u32("block_tokens", config_.block_tokens)
      .digest("index_layout_sha256", config_.layout_sha256)
      .str("scope", "local");
  s.root_ = hasher_.root(w.buffer());
  return s;
}

Status PrefixIndex::check_scope(const PrefixScope& scope) const {
  if (!scope.gated()) {
    if (config_.registry != nullptr)
      return make_error(ErrorCode::invalid_argument, "a local scope cannot be used on a gated index", "scope");
    return Status::success();
  }
  if (config_.registry == nullptr)
    return make_error(ErrorCode::invalid_argument, "a gated scope needs the index's namespace registry", "scope");
  // The generation may have moved since the scope was opened (invalidation,
  // 0x01A): old scopes stop looking up and publishing at once.
  const GenerationRecord* current = config_.registry->current(scope.namespace_id());
  if (current == nullptr || current->generation() != scope.namespace_generation())
    return make_error(ErrorCode::stale_generation,
                      "namespace '" + scope.namespace_id() + "' generation " +
                          std::to_string(scope.namespace_generation().value) + " is no longer current",
                      "namespace_generation");
  return Status::success();
}

// --- the chain ---------------------------------------------------------------

Result<BlockExtrasPlan> PrefixIndex::extras_plan(const PrefixScope& scope, RequestExtras extras) const {
  KVRT_TRY(extras.validate());
  if (!scope.cache_salt().empty()) {
    if (!extras.cache_salt.empty() && extras.cache_salt != scope.cache_salt())
      return make_error(ErrorCode::incompatible, "the request's cache salt is not its namespace's salt", "cache_salt");
    extras.cache_salt = scope.cache_salt();
  }
  return BlockExtrasPlan(extras, config_.block_tokens);
}

void PrefixIndex::extend_hashes(const PrefixScope& scope, std::span<const TokenId> tokens,
                                const BlockExtrasPlan& extras, std::vector<BlockHash>& hashes) const {
  hasher_.extend_chain(scope.root(), tokens, extras, hashes);
}

// --- records and entries -----------------------------------------------------

const PrefixIndex::Entry* PrefixIndex::group_entry(const Record& r, uint32_t group,
                                                   const BlockAllocator* currency) const {
  for (uint32_t slot : r.entries) {
    const Entry& e = entries_[slot];
    if (e.group_index == group && entry_current(e, currency)) return &e;
  }
  return nullptr;
}

bool PrefixIndex::group_present(const Record& r, uint32_t group) const {
  for (uint32_t slot : r.entries)
    if (entries_[slot].group_index == group) return true;
  return false;
}

bool PrefixIndex::contains(const BlockHash& digest) const {
  const uint32_t r = table_.record_of(digest);
  if (r == DigestTable::kMissing) return false;
  for (uint32_t g = 0; g < config_.cache_groups; ++g)
    if (!group_present(records_[r], g)) return false;
  return true;
}

std::vector<std::pair<BlockHash, uint32_t>> PrefixIndex::present_keys() const {
  std::vector<std::pair<BlockHash, uint32_t>> out;
  for (const Record& r : records_)
    if (r.live)
      for (uint32_t g = 0; g < config_.cache_groups; ++g)
        if (group_present(r, g)) out.emplace_back(r.digest, g);
  std::sort(out.begin(), out.end());
  return out;
}

uint32_t PrefixIndex::new_record(const BlockHash& digest, const BlockHash& parent, std::span<const TokenId> tokens,
                                 const std::optional<ExtrasKey>& extras, uint32_t valid_rows, Published kind,
                                 bool root_child) {
  uint32_t r;
  if (!free_records_.empty()) {
    r = free_records_.back();
    free_records_.pop_back();
  } else {
    r = static_cast<uint32_t>(records_.size());
    records_.emplace_back();
  }
  Record& rec = records_[r];
  rec.digest = digest;
  rec.parent = parent;
  rec.tokens.assign(tokens.begin(), tokens.end());
  rec.extras = extras;
  rec.valid_rows = valid_rows;
  const bool tail = kind == Published::partial_tail;
  rec.tail = tail;
  rec.root_child = root_child;
  rec.entries.clear();
  rec.live = true;
  table_.insert(digest, DigestSlotValue{r, tail ? DigestSlotValue::kTail : 0u, {}, kNoCacheKey});
  children_[parent].push_back(r);
  ++live_records_;
  return r;
}

uint32_t PrefixIndex::new_entry(uint32_t record, uint32_t group, const PhysicalBlockHandle& handle) {
  uint32_t slot;
  if (!free_entries_.empty()) {
    slot = free_entries_.back();
    free_entries_.pop_back();
  } else {
    slot = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[slot];
  e.record = record;
  e.group_index = group;
  e.handle = handle;
  e.cache_key = key_of(slot, e.generation);
  e.sequence = next_sequence_++;
  e.live = true;
  records_[record].entries.push_back(slot);
  ++live_entries_;
  // Entries join in publication order: the first group-0 block stays the
  // slot's primary until it goes.
  DigestSlotValue* v = table_.find_mutable(records_[record].digest);
  if (group == 0 && v->primary_key == kNoCacheKey) {
    v->primary = handle;
    v->primary_key = e.cache_key;
  }
  return slot;
}

void PrefixIndex::remove_entry(uint32_t slot) {
  Entry& e = entries_[slot];
  Record& rec = records_[e.record];
  rec.entries.erase(std::find(rec.entries.begin(), rec.entries.end(), slot));
  DigestSlotValue* v = table_.find_mutable(rec.digest);
  if (v->primary_key == e.cache_key) {
    v->primary_key = kNoCacheKey;
    for (uint32_t other : rec.entries)
      if (entries_[other].group_index == 0) {
        v->primary = entries_[other].handle;
        v->primary_key = entries_[other].cache_key;
        break;
      }
  }
  e.live = false;
  ++e.generation;  // the slot's next key differs: a late event for this one is unknown
  free_entries_.push_back(slot);
  --live_entries_;
  if (!group_present(rec, e.group_index)) {
    KvBlockRemoved removed;
    removed.block_hashes.push_back(rec.digest);
    removed.group_index = e.group_index;
    emit(removed);
  }
  if (!rec.entries.empty()) return;
  table_.erase(rec.digest);
  auto it = children_.find(rec.parent);
  auto& siblings = it->second;
  siblings.erase(std::find(siblings.begin(), siblings.end(), e.record));
  if (siblings.empty()) children_.erase(it);
  rec.live = false;
  rec.tokens.clear();
  free_records_.push_back(e.record);
  --live_records_;
}

void PrefixIndex::emit(KvEvent event) {
  if (config_.events != nullptr) config_.events->on_event(event);
}

// --- weak identity -----------------------------------------------------------

AbsorbOutcome PrefixIndex::absorb(std::span<const AllocatorEvent> events) {
  AbsorbOutcome out;
  absorbed_events_ += events.size();
  for (const AllocatorEvent& ev : events) {
    if (ev.kind != AllocatorEvent::Kind::cache_key_evicted) continue;
    const std::optional<uint32_t> slot = entry_keyed(ev.cache_key);
    if (!slot || !(entries_[*slot].handle == ev.handle)) {
      ++out.unknown;
      continue;
    }
    remove_entry(*slot);
    ++out.removed;
  }
  if (out.removed > 0) ++publication_generation_;
  return out;
}

Status PrefixIndex::clear(BlockAllocator& allocator) {
  // Evictions the allocator already made are absorbed first, so that every
  // remaining entry names a block that still carries its key.
  absorb(allocator.drain_events());
  for (uint32_t slot = 0; slot < entries_.size(); ++slot) {
    const Entry& e = entries_[slot];
    if (!e.live || !entry_current(e, &allocator)) continue;
    const Result<AllocationReceipt> evicted = allocator.evict(e.handle);
    KVRT_ASSERT(evicted.ok(), "evicting a current indexed block failed: " + evicted.error().describe());
  }
  absorbed_events_ += allocator.drain_events().size();  // exactly the keys evicted above
  for (Record& r : records_) r = Record{};
  records_.clear();
  free_records_.clear();
  for (Entry& e : entries_) e.live = false;
  free_entries_.clear();
  for (uint32_t slot = static_cast<uint32_t>(entries_.size()); slot-- > 0;) {
    ++entries_[slot].generation;
    free_entries_.push_back(slot);
  }
  table_.clear();
  children_.clear();
  live_entries_ = 0;
  live_records_ = 0;
  ++publication_generation_;
  emit(KvAllBlocksCleared{});
  return Status::success();
}

}  // namespace kvrt
