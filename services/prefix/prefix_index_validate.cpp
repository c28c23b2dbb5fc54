// PrefixIndex::validate(): re-derives the laws listed in prefix_index.hpp
// from scratch (docs/conventions.md habit 2). O(records + entries + allocator blocks);
// tests call it after every transition.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "services/prefix/prefix_index.hpp"

namespace kvrt {

namespace {
Error broken(const std::string& what) {
  return make_error(ErrorCode::invariant_violated, "prefix index invariant: " + what, "validate");
}
}  // namespace

Status PrefixIndex::validate(const BlockAllocator* allocator) const {
  const uint32_t P = config_.block_tokens, G = config_.cache_groups;

  // Digest table <-> live records.
  if (!table_.probe_sequences_intact()) return broken("a digest-table probe sequence has a gap");
  size_t live_records = 0;
  for (uint32_t r = 0; r < records_.size(); ++r) {
    const Record& rec = records_[r];
    if (!rec.live) continue;
    ++live_records;
    const std::string at = "record " + std::to_string(r);
    const DigestSlotValue* v = table_.find(rec.digest);
    if (v == nullptr || v->record != r) return broken(at + " is not in the digest table under its digest");
    if (((v->flags & DigestSlotValue::kTail) != 0) != rec.tail) return broken(at + " has the wrong tail flag");
    const auto group0 = std::find_if(rec.entries.begin(), rec.entries.end(),
                                     [&](uint32_t slot) { return entries_[slot].group_index == 0; });
    const bool primary_ok = group0 == rec.entries.end() ? v->primary_key == kNoCacheKey
                                                        : v->primary_key == entries_[*group0].cache_key &&
                                                              v->primary == entries_[*group0].handle;
    if (!primary_ok) return broken(at + " has a primary block that is not its earliest group-0 block");
    if (rec.entries.empty()) return broken(at + " has no block");
    if (rec.tokens.size() != rec.valid_rows) return broken(at + " keeps a witness of the wrong length");
    if (!rec.tail && rec.valid_rows != P) return broken(at + " is a full block without P rows");
    if (rec.tail &&
        (rec.valid_rows == 0 || rec.valid_rows >= P || config_.policy != ReusePolicy::immutable_partial_tail))
      return broken(at + " is a tail outside 0 < v < P or outside the partial-tail policy");
    uint64_t last_sequence = 0;
    for (uint32_t slot : rec.entries) {
      if (slot >= entries_.size() || !entries_[slot].live || entries_[slot].record != r)
        return broken(at + " lists entry " + std::to_string(slot) + " that is not its live entry");
      if (entries_[slot].sequence <= last_sequence) return broken(at + " lists entries out of publication order");
      last_sequence = entries_[slot].sequence;
    }
    const auto siblings = children_.find(rec.parent);
    if (siblings == children_.end() || std::count(siblings->second.begin(), siblings->second.end(), r) != 1)
      return broken(at + " is not listed once among its parent's children");
  }
  if (live_records != live_records_ || table_.size() != live_records_)
    return broken("live record count " + std::to_string(live_records) + ", table " + std::to_string(table_.size()) +
                  ", ledger " + std::to_string(live_records_));
  size_t listed_children = 0;
  for (const auto& [parent, list] : children_) {
    if (list.empty()) return broken("an empty child list is kept");
    for (uint32_t r : list)
      if (r >= records_.size() || !records_[r].live || !(records_[r].parent == parent))
        return broken("a child list names a record of another parent");
    listed_children += list.size();
  }
  if (listed_children != live_records_) return broken("child lists and live records disagree");

  // Live entries and their keys.
  size_t live_entries = 0;
  std::unordered_set<uint64_t> handles_seen;
  for (uint32_t slot = 0; slot < entries_.size(); ++slot) {
    const Entry& e = entries_[slot];
    if (!e.live) continue;
    ++live_entries;
    const std::string at = "entry " + std::to_string(slot);
    if (e.record >= records_.size() || !records_[e.record].live) return broken(at + " names a dead record");
    const auto& list = records_[e.record].entries;
    if (std::count(list.begin(), list.end(), slot) != 1) return broken(at + " is not listed once by its record");
    if (e.group_index >= G) return broken(at + " names group " + std::to_string(e.group_index));
    if (e.cache_key != key_of(slot, e.generation)) return broken(at + " carries a key that does not decode to it");
    const uint64_t handle_id = uint64_t{e.handle.group.value} << 32 | e.handle.block.value;
    if (!handles_seen.insert(handle_id).second) return broken(at + " names a block another entry names");
  }
  if (live_entries != live_entries_) return broken("live entry count disagrees with the ledger");
  if (free_entries_.size() + live_entries_ != entries_.size()) return broken("free entry list is incomplete");
  if (free_records_.size() + live_records_ != records_.size()) return broken("free record list is incomplete");

  if (allocator == nullptr) return Status::success();
  // Weak identities agree both ways with the allocator (events absorbed).
  if (allocator->group_count() != G) return broken("the allocator serves another number of groups");
  for (uint32_t slot = 0; slot < entries_.size(); ++slot) {
    const Entry& e = entries_[slot];
    if (!e.live) continue;
    const Result<BlockMeta> meta = allocator->block(e.handle);
    const std::string at = "entry " + std::to_string(slot) + " (block " + std::to_string(e.handle.block.value) + ")";
    if (!meta.ok()) return broken(at + " names a stale handle: " + meta.error().reason);
    if (meta->cache_key != e.cache_key) return broken(at + " is not tagged with its key in the allocator");
    if (meta->valid_rows < records_[e.record].valid_rows) return broken(at + " covers uncommitted rows");
    if (meta->state != BlockState::live && meta->state != BlockState::evictable)
      return broken(at + " names a block that holds no committed K/V");
  }
  size_t keyed = 0;
  for (uint32_t g = 0; g < G; ++g)
    for (uint32_t s = 0; s < allocator->capacity_blocks(); ++s) {
      const PhysicalBlockHandle h = allocator->handle_of(g, s);
      const BlockMeta meta = allocator->block(h).value();
      if (meta.cache_key == kNoCacheKey) continue;
      ++keyed;
      const std::optional<uint32_t> slot = entry_keyed(meta.cache_key);
      if (!slot || !(entries_[*slot].handle == h))
        return broken("allocator block " + std::to_string(h.block.value) + " carries a key this index does not hold");
    }
  if (keyed != live_entries_) return broken("keyed allocator blocks and index entries differ in number");
  return Status::success();
}

Sha256Digest PrefixIndex::state_digest() const {
  std::vector<uint32_t> order;
  for (uint32_t r = 0; r < records_.size(); ++r)
    if (records_[r].live) order.push_back(r);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return records_[a].digest < records_[b].digest; });
  CanonicalWriter w("kvrt.PrefixIndex.state.v1");
  w.u64("publication_generation", publication_generation_).begin_list("records", order.size());
  for (uint32_t r : order) {
    const Record& rec = records_[r];
    w.bytes("digest", rec.digest.bytes).bytes("parent", rec.parent.bytes).u32("valid_rows", rec.valid_rows);
    w.u8("tail", rec.tail ? 1 : 0).begin_list("entries", rec.entries.size());
    for (uint32_t slot : rec.entries) {
      const Entry& e = entries_[slot];
      w.u32("group", e.group_index).u32("pool", e.handle.pool.value).u32("block", e.handle.block.value);
      w.u32("generation", e.handle.generation.value).u64("cache_key", e.cache_key.value).u64("sequence", e.sequence);
    }
  }
  return w.finish();
}

}  // namespace kvrt
