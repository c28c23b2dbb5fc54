// PrefixIndex publication: a block's identity is published only after its
// K/V rows are committed (the allocator's valid-row frontier covers them),
// and only as a weak identity (the allocator's cache key). Every check runs
// before the first mutation, so a rejected publication changes nothing.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "services/prefix/prefix_index.hpp"

namespace kvrt {

Result<PublishOutcome> PrefixIndex::publish_blocks(const PrefixScope& scope, PublicationTarget& allocator,
                                                   const PrefixPublishArgs& a) {
  const uint32_t P = config_.block_tokens;
  if (a.first_block > a.end_block)
    return make_error(ErrorCode::invalid_argument, "first_block after end_block", "first_block");
  if (uint64_t{a.end_block} * P > a.tokens.size())
    return make_error(ErrorCode::invalid_argument,
                      "block " + std::to_string(a.end_block - 1) + " is not full in " +
                          std::to_string(a.tokens.size()) + " tokens (only full blocks are published)",
                      "end_block");
  if (a.hashes.size() < a.end_block)
    return make_error(ErrorCode::invalid_argument,
                      "the chain has " + std::to_string(a.hashes.size()) + " digests; blocks up to " +
                          std::to_string(a.end_block) + " are published",
                      "hashes");
  const uint32_t n = a.end_block - a.first_block;
  std::vector<BlockHash> parents(n);
  std::vector<std::optional<ExtrasKey>> extras(n);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t j = a.first_block + k;
    parents[k] = j == 0 ? scope.root() : a.hashes[j - 1];
    if (a.extras != nullptr) extras[k] = a.extras->key(j);
  }
  const std::string lora = a.extras != nullptr ? a.extras->extras().lora_name : std::string();
  return publish(scope, allocator,
                 PublishEntries{a.request, a.tokens, a.hashes.subspan(a.first_block, n), parents, extras, a.first_block,
                                P, Published::full_blocks, lora});
}

Result<PublishOutcome> PrefixIndex::publish_tail(const PrefixScope& scope, PublicationTarget& allocator,
                                                 const PrefixTailArgs& a) {
  const uint32_t P = config_.block_tokens;
  if (config_.policy != ReusePolicy::immutable_partial_tail)
    return make_error(ErrorCode::invalid_argument,
                      "partial tails are published only under the immutable partial-tail policy (0x07D)", "policy");
  if (a.valid_rows == 0 || a.valid_rows >= P)
    return make_error(ErrorCode::invalid_argument,
                      "a partial tail holds 0 < v < P rows; got " + std::to_string(a.valid_rows), "valid_rows");
  if (uint64_t{a.block} * P + a.valid_rows > a.tokens.size())
    return make_error(ErrorCode::invalid_argument, "the tail's rows lie beyond the request's tokens", "valid_rows");
  if (a.hashes.size() < a.block)
    return make_error(ErrorCode::invalid_argument, "the chain does not reach the tail's parent", "hashes");
  const BlockHash parent = a.block == 0 ? scope.root() : a.hashes[a.block - 1];
  const std::optional<ExtrasKey> extras = a.extras != nullptr ? a.extras->key(a.block) : std::nullopt;
  const std::span<const TokenId> rows = a.tokens.subspan(uint64_t{a.block} * P, a.valid_rows);
  // h_tail = H(parent, X_tail[0:v], v, policy, E_tail): valid_rows and the
  // policy id are in the message, so a 2-row and a 3-row frontier never share
  // an identity (0x07D).
  const BlockHash digest =
      hasher_.partial_tail(parent, rows, static_cast<uint8_t>(ReusePolicy::immutable_partial_tail), extras);
  const BlockHash parents[1] = {parent};
  const std::optional<ExtrasKey> extras_list[1] = {extras};
  const BlockHash digests[1] = {digest};
  const std::string lora = a.extras != nullptr ? a.extras->extras().lora_name : std::string();
  return publish(scope, allocator,
                 PublishEntries{a.request, a.tokens, digests, parents, extras_list, a.block, a.valid_rows,
                                Published::partial_tail, lora});
}

Result<PublishOutcome> PrefixIndex::publish(const PrefixScope& scope, PublicationTarget& allocator,
                                            const PublishEntries& e) {
  const RequestId request = e.request;
  const std::span<const TokenId> tokens = e.tokens;
  const std::span<const BlockHash> digests = e.digests;
  const std::span<const BlockHash> parents = e.parents;
  const std::span<const std::optional<ExtrasKey>> extras = e.extras;
  const uint32_t first_block = e.first_block, valid_rows = e.valid_rows;
  const Published kind = e.kind;
  const std::string& lora = e.lora;
  KVRT_TRY(check_scope(scope));
  const uint32_t P = config_.block_tokens, G = config_.cache_groups;
  if (allocator.group_count() != G || allocator.block_size() != P)
    return make_error(ErrorCode::invalid_argument,
                      "the allocator serves " + std::to_string(allocator.group_count()) + " groups of block size " +
                          std::to_string(allocator.block_size()) + "; the index " + std::to_string(G) + " x " +
                          std::to_string(P),
                      "allocator");
  std::vector<std::vector<PhysicalBlockHandle>> tables(G);
  for (uint32_t g = 0; g < G; ++g) KVRT_TRY_ASSIGN(tables[g], allocator.table(request, g));

  PublishOutcome out;
  std::vector<PendingEntry> pending;
  // Digest -> block of this call, to hold the witness and duplicate rules
  // among the call's own blocks as well.
  std::unordered_map<BlockHash, uint32_t, BlockHashHasher> in_call;
  const uint32_t n = static_cast<uint32_t>(digests.size());
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t j = first_block + k;
    const std::span<const TokenId> block_tokens = tokens.subspan(uint64_t{j} * P, valid_rows);
    const uint32_t existing = table_.record_of(digests[k]);
    if (config_.collision_witness) {
      // 0x07F: an equal digest over different token ids is a collision, and
      // the block is refused rather than aliased.
      const bool differs_from_index =
          existing != DigestTable::kMissing &&
          (records_[existing].valid_rows != valid_rows ||
           !std::equal(block_tokens.begin(), block_tokens.end(), records_[existing].tokens.begin()));
      const auto earlier = in_call.find(digests[k]);
      const bool differs_in_call =
          earlier != in_call.end() &&
          !std::equal(block_tokens.begin(), block_tokens.end(), tokens.begin() + uint64_t{earlier->second} * P);
      if (differs_from_index || differs_in_call)
        return make_error(ErrorCode::digest_collision,
                          "block " + std::to_string(j) + " digest " + digests[k].hex() +
                              " is already indexed over different token ids",
                          "hashes[" + std::to_string(j) + "]");
    }
    in_call.emplace(digests[k], j);
    for (uint32_t g = 0; g < G; ++g) {
      if (j >= tables[g].size())
        return make_error(ErrorCode::table_out_of_bounds,
                          "request maps " + std::to_string(tables[g].size()) + " blocks in group " + std::to_string(g) +
                              "; block " + std::to_string(j) + " is published",
                          "end_block");
      const PhysicalBlockHandle& h = tables[g][j];
      BlockMeta meta;
      KVRT_TRY_ASSIGN(meta, allocator.block(h));
      // Publication only after the rows are committed.
      if (meta.valid_rows < valid_rows)
        return make_error(ErrorCode::row_not_valid,
                          "block " + std::to_string(h.block.value) + " has " + std::to_string(meta.valid_rows) +
                              " committed rows; its identity covers " + std::to_string(valid_rows),
                          "end_block");
      if (meta.cache_key != kNoCacheKey) {
        const std::optional<uint32_t> slot = entry_keyed(meta.cache_key);
        const bool ours = slot && records_[entries_[*slot].record].digest == digests[k];
        if (!ours)
          return make_error(ErrorCode::invalid_argument,
                            "block " + std::to_string(h.block.value) +
                                " already carries another cache identity (an immutable block keeps one)",
                            "end_block");
        ++out.already;
        continue;
      }
      bool present = false;
      if (!config_.publish_duplicates) {
        present =
            existing != DigestTable::kMissing && group_entry(records_[existing], g, allocator.currency()) != nullptr;
        for (const PendingEntry& p : pending) present |= p.group == g && digests[p.block - first_block] == digests[k];
      }
      if (present) {
        ++out.duplicates;
        continue;
      }
      pending.push_back(PendingEntry{j, g, h});
    }
  }

  // Mutation. Per group, blocks whose (digest, group) key becomes present are
  // gathered into one BlockStored per run of consecutive blocks (vLLM batches
  // the blocks of one cache_full_blocks call the same way).
  std::vector<KvBlockStored> batches(G);
  std::vector<uint32_t> batch_next(G, UINT32_MAX);  // block the open batch would continue with
  auto flush = [&](uint32_t g) {
    if (!batches[g].block_hashes.empty()) emit(batches[g]);
    batches[g] = KvBlockStored{};
    batch_next[g] = UINT32_MAX;
  };
  for (const PendingEntry& p : pending) {
    const uint32_t k = p.block - first_block;
    uint32_t r = table_.record_of(digests[k]);
    if (r == DigestTable::kMissing)
      r = new_record(digests[k], parents[k], tokens.subspan(uint64_t{p.block} * P, valid_rows), extras[k], valid_rows,
                     kind, p.block == 0);
    const bool newly_present = !group_present(records_[r], p.group);
    const uint32_t slot = new_entry(r, p.group, p.handle);
    const Status tagged = allocator.publish_cache_key(p.handle, entries_[slot].cache_key);
    KVRT_ASSERT(tagged.ok(), "a pre-checked cache-key publication failed: " + tagged.error().describe());
    ++out.published;
    if (!newly_present || batch_next[p.group] != p.block) flush(p.group);
    if (!newly_present) continue;
    KvBlockStored& b = batches[p.group];
    if (b.block_hashes.empty()) {
      if (!records_[r].root_child) b.parent_block_hash = parents[k];
      b.block_size = P;
      b.group_index = p.group;
      // The adapter's name, as vLLM's lora_name: the identity keeps its
      // version after a unit separator, which keys blocks but names nothing.
      if (!lora.empty()) b.lora_name = lora.substr(0, lora.find('\x1f'));
    }
    b.block_hashes.push_back(digests[k]);
    b.token_ids.insert(b.token_ids.end(), records_[r].tokens.begin(), records_[r].tokens.end());
    batch_next[p.group] = p.block + 1;
  }
  for (uint32_t g = 0; g < G; ++g) flush(g);
  if (out.published > 0) ++publication_generation_;
  return out;
}

}  // namespace kvrt
