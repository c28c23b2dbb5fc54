// PrefixIndex lookup (spec 0x07A-0x07E): the contiguous all-group walk, the
// four prefix lengths, the reuse policy, and the PrefixMatchReceipt.
#include <algorithm>
#include <string>

#include "services/prefix/prefix_index.hpp"

namespace kvrt {

uint32_t PrefixIndex::match_full_blocks(std::span<const BlockHash> hashes, uint32_t max_blocks,
                                        std::span<const TokenId> witness_tokens, const BlockAllocator* currency,
                                        std::vector<PhysicalBlockHandle>* handles) const {
  const uint32_t P = config_.block_tokens, G = config_.cache_groups;
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(max_blocks, hashes.size()));
  const bool witness = config_.collision_witness && !witness_tokens.empty();
  // Every identity the allocator ever dropped has been absorbed: each indexed
  // handle is then current by construction, and the per-block generation
  // fence would only repeat what the events already proved. Any event not yet
  // absorbed (or lost) makes the counts differ and the fence runs per block.
  if (currency != nullptr && currency->cache_keys_dropped() == absorbed_events_) currency = nullptr;
  constexpr uint32_t kProbeAhead = 4;  // blocks whose slots load while this one is checked
  for (uint32_t k = 0; k < std::min(n, kProbeAhead); ++k) table_.prefetch(hashes[k]);
  uint32_t i = 0;
  for (; i < n; ++i) {
    if (i + kProbeAhead < n) table_.prefetch(hashes[i + kProbeAhead]);
    // Contiguous from block 0: blocks after the first miss are not
    // independent candidates, since their digests consume the missing parent.
    const DigestSlotValue* v = table_.find(hashes[i]);
    if (v == nullptr || (v->flags & DigestSlotValue::kTail) != 0) break;
    if (witness) {
      const Record& rec = records_[v->record];
      if (witness_tokens.size() < uint64_t{i + 1} * P) break;
      if (!std::equal(rec.tokens.begin(), rec.tokens.end(), witness_tokens.begin() + uint64_t{i} * P)) break;
    }
    // One group: the slot's primary block answers unless it went stale.
    if (G == 1 && v->primary_key != kNoCacheKey &&
        (currency == nullptr || currency->holds_cache_key(v->primary, v->primary_key))) {
      if (handles != nullptr) handles->push_back(v->primary);
      continue;
    }
    // lookup_all_groups: a digest present for some groups only is no hit.
    const Record& rec = records_[v->record];
    const size_t mark = handles != nullptr ? handles->size() : 0;
    bool all_groups = true;
    for (uint32_t g = 0; g < G && all_groups; ++g) {
      const Entry* e = group_entry(rec, g, currency);
      if (e == nullptr)
        all_groups = false;
      else if (handles != nullptr)
        handles->push_back(e->handle);
    }
    if (!all_groups) {
      if (handles != nullptr) handles->resize(mark);
      break;
    }
  }
  return i;
}

PrefixIndex::Extension PrefixIndex::best_child(const BlockHash& parent, std::span<const TokenId> block_tokens,
                                               const std::optional<ExtrasKey>& extras,
                                               const BlockAllocator* currency) const {
  Extension best;
  if (block_tokens.empty()) return best;
  const auto it = children_.find(parent);
  if (it == children_.end()) return best;
  for (uint32_t r : it->second) {
    const Record& rec = records_[r];
    // Rows of another extras projection (adapter, salt, media) are not the
    // same K/V even where the token ids agree.
    if (!(rec.extras == extras)) continue;
    const size_t limit = std::min(rec.tokens.size(), block_tokens.size());
    const uint32_t rows = static_cast<uint32_t>(
        std::mismatch(rec.tokens.begin(), rec.tokens.begin() + static_cast<ptrdiff_t>(limit), block_tokens.begin())
            .first -
        rec.tokens.begin());
    if (rows <= best.rows) continue;
    bool all_groups = true;
    for (uint32_t g = 0; g < config_.cache_groups && all_groups; ++g)
      all_groups = group_entry(rec, g, currency) != nullptr;
    if (all_groups) best = Extension{rows, r};
  }
  return best;
}

Result<PrefixMatch> PrefixIndex::lookup(const PrefixScope& scope, const PrefixLookupArgs& a,
                                        const BlockAllocator* currency) const {
  KVRT_TRY(check_scope(scope));
  const uint32_t P = config_.block_tokens, G = config_.cache_groups;
  if (a.tokens.size() > UINT32_MAX / 2)
    return make_error(ErrorCode::invalid_argument, "prompt longer than 2^31 tokens", "tokens");
  const uint32_t prompt = static_cast<uint32_t>(a.tokens.size());
  if (scope.gated()) {
    // The gate authorized one covered interval; asking about other tokens
    // would probe the cache outside the authorization.
    const auto& covered = scope.covered_token_ids();
    const bool same = covered.size() == a.tokens.size() &&
                      std::equal(covered.begin(), covered.end(), a.tokens.begin(),
                                 [](uint32_t c, TokenId t) { return c == static_cast<uint32_t>(t); });
    if (!same)
      return make_error(ErrorCode::incompatible, "the lookup's tokens are not the authorized manifest's covered tokens",
                        "covered_token_ids");
  }
  uint32_t cap = 0;
  KVRT_TRY_ASSIGN(cap, reuse_cap(prompt, a.logits_path));

  BlockExtrasPlan own_plan;
  if (a.extras == nullptr) KVRT_TRY_ASSIGN(own_plan, extras_plan(scope, RequestExtras{}));
  const BlockExtrasPlan& plan = a.extras != nullptr ? *a.extras : own_plan;

  PrefixMatch m;
  const uint32_t full = prompt / P;
  if (a.block_hashes.size() >= full)
    m.block_hashes.assign(a.block_hashes.begin(), a.block_hashes.begin() + full);
  else
    hasher_.extend_chain(scope.root(), a.tokens, plan, m.block_hashes);

  // S_indexed walks every full block, past the cap: the cap limits what is
  // returned, not what the index holds (0x07E: S_indexed 48, S_cap 47).
  std::vector<PhysicalBlockHandle> walked;
  const uint32_t indexed_full = match_full_blocks(m.block_hashes, full, a.tokens, currency, &walked);
  // S_sem reaches into the first unmatched block through the child with the
  // longest common token prefix (0x07B: a change at position 37 gives 37).
  const BlockHash& parent = indexed_full == 0 ? scope.root() : m.block_hashes[indexed_full - 1];
  const uint64_t next_start = uint64_t{indexed_full} * P;
  const std::span<const TokenId> next_tokens = a.tokens.subspan(next_start, std::min<uint64_t>(P, prompt - next_start));
  const Extension ext = best_child(parent, next_tokens, plan.key(indexed_full), currency);

  PrefixLengths& l = m.lengths;
  l.prompt = prompt;
  l.semantic = indexed_full * P + ext.rows;
  l.indexed = config_.policy == ReusePolicy::full_block ? indexed_full * P : l.semantic;
  l.cap = cap;
  const uint32_t bound = std::min({l.semantic, l.indexed, l.cap});
  const uint32_t k = std::min(indexed_full, bound / P);
  uint32_t partial_rows = 0;
  if (config_.policy == ReusePolicy::immutable_partial_tail) partial_rows = bound - k * P;
  KVRT_ASSERT(partial_rows < P, "a partial hit covers fewer rows than a block");
  l.runtime = k * P + partial_rows;
  l.recompute = prompt - l.runtime;
  KVRT_TRY(check_lengths(l));

  m.full_hit_blocks = k;
  m.hit_handles.assign(walked.begin(), walked.begin() + uint64_t{k} * G);
  PrefixMatchReceipt& r = m.receipt;
  for (uint32_t i = 0; i < k; ++i)
    r.matched_group_handles.push_back(MatchedBlockBundle{
        i, std::vector<PhysicalBlockHandle>(walked.begin() + uint64_t{i} * G, walked.begin() + uint64_t{i + 1} * G)});
  if (partial_rows > 0) {
    // The hit ends inside a published block: its leading rows are shared and
    // immutable, so the request gets them through a copy-rows intent (the
    // allocator copies them on the first divergent write, 0x07D).
    MatchedBlockBundle partial{k, {}};
    if (k < indexed_full) {
      partial.handles.assign(walked.begin() + uint64_t{k} * G, walked.begin() + uint64_t{k + 1} * G);
    } else {
      for (uint32_t g = 0; g < G; ++g)
        partial.handles.push_back(group_entry(records_[ext.record], g, currency)->handle);
    }
    m.hit_handles.insert(m.hit_handles.end(), partial.handles.begin(), partial.handles.end());
    m.copy_intent = CopyRowsIntent{k, partial.handles, partial_rows};
    r.matched_group_handles.push_back(std::move(partial));
  }
  r.request_id = a.request_id;
  r.request_generation = a.request_generation;
  r.index_snapshot_id = config_.snapshot_id;
  r.index_publication_generation = publication_generation_;
  r.compatibility_manifest_sha256 = scope.compatibility_manifest_sha256();
  r.namespace_id = scope.namespace_id();
  r.namespace_generation = scope.namespace_generation();
  r.policy_id = std::string(policy_id(config_.policy));
  r.alignment_tokens = P;
  r.logits_path = a.logits_path;
  r.prompt_tokens = l.prompt;
  r.semantic_match_tokens = l.semantic;
  r.indexed_match_tokens = l.indexed;
  r.reuse_cap_tokens = l.cap;
  r.runtime_hit_tokens = l.runtime;
  r.prompt_rows_recomputed = l.recompute;
  r.new_block_bundles = new_block_bundles(l.prompt, l.runtime, P);
  r.copy_valid_partial_rows = partial_rows;
  r.lease_id = LeaseId{0};  // no lease: the handles are generation-fenced; the allocator takes references
  r.receipt_sha256 = canonical_digest(r);
  return m;
}

Status PrefixIndex::check_receipt(const PrefixMatchReceipt& r, const BlockAllocator* currency) const {
  const uint32_t P = config_.block_tokens, G = config_.cache_groups;
  if (r.receipt_sha256 != canonical_digest(r))
    return make_error(ErrorCode::receipt_tampered, "receipt_sha256 does not cover the receipt's fields",
                      "receipt_sha256");
  if (r.index_snapshot_id != config_.snapshot_id)
    return make_error(ErrorCode::invalid_argument,
                      "receipt names index " + std::to_string(r.index_snapshot_id.value) + ", not this index (" +
                          std::to_string(config_.snapshot_id.value) + ")",
                      "index_snapshot_id");
  if (r.index_publication_generation > publication_generation_)
    return make_error(ErrorCode::invalid_argument, "receipt names a publication generation this index never had",
                      "index_publication_generation");
  ReusePolicy policy = ReusePolicy::full_block;
  KVRT_TRY_ASSIGN(policy, reuse_policy_from_id(r.policy_id));
  if (policy != config_.policy)
    return make_error(ErrorCode::invalid_argument, "receipt names another reuse policy than this index's", "policy_id");
  if (r.alignment_tokens != P)
    return make_error(ErrorCode::invalid_argument, "alignment is not the index's block size", "alignment_tokens");
  KVRT_TRY(check_lengths(PrefixLengths{r.prompt_tokens, r.semantic_match_tokens, r.indexed_match_tokens,
                                       r.reuse_cap_tokens, r.runtime_hit_tokens, r.prompt_rows_recomputed}));
  uint32_t cap = 0;
  KVRT_TRY_ASSIGN(cap, reuse_cap(r.prompt_tokens, r.logits_path));
  if (cap != r.reuse_cap_tokens)
    return make_error(ErrorCode::invalid_argument, "S_cap does not follow from S_prompt and the logits path (0x07A)",
                      "reuse_cap_tokens");
  if (r.copy_valid_partial_rows != r.runtime_hit_tokens % P ||
      (policy == ReusePolicy::full_block && r.copy_valid_partial_rows != 0))
    return make_error(ErrorCode::invalid_argument, "copy rows do not match the hit's position inside its block",
                      "copy_valid_partial_rows");
  const uint32_t bundles = r.runtime_hit_tokens / P + (r.copy_valid_partial_rows > 0 ? 1 : 0);
  if (r.matched_group_handles.size() != bundles)
    return make_error(ErrorCode::path_slot_mismatch,
                      std::to_string(r.matched_group_handles.size()) + " matched bundles for a " +
                          std::to_string(r.runtime_hit_tokens) + "-token hit",
                      "matched_group_handles");
  if (r.new_block_bundles != new_block_bundles(r.prompt_tokens, r.runtime_hit_tokens, P))
    return make_error(ErrorCode::invalid_argument, "N_new does not follow from S_prompt and S_runtime (0x07G)",
                      "new_block_bundles");
  if (!r.namespace_id.empty()) {
    if (config_.registry == nullptr)
      return make_error(ErrorCode::invalid_argument, "receipt names a namespace; this index has no registry",
                        "namespace_id");
    const GenerationRecord* current = config_.registry->current(r.namespace_id);
    if (current == nullptr || current->generation() != r.namespace_generation)
      return make_error(ErrorCode::stale_generation, "the receipt's namespace generation is no longer current",
                        "namespace_generation");
  }
  for (uint32_t i = 0; i < bundles; ++i) {
    const MatchedBlockBundle& b = r.matched_group_handles[i];
    const std::string where = "matched_group_handles[" + std::to_string(i) + "]";
    if (b.logical_block != i || b.handles.size() != G)
      return make_error(ErrorCode::path_slot_mismatch,
                        "bundle is not logical block " + std::to_string(i) + " with one handle per cache group", where);
    for (uint32_t g = 0; g < G; ++g) {
      // Still indexed, in this group, and (with the allocator) current.
      const PhysicalBlockHandle& h = b.handles[g];
      bool indexed = false;
      if (currency != nullptr) {
        // The block's cache key names the entry directly.
        const Result<BlockMeta> meta = currency->block(h);
        const std::optional<uint32_t> slot = meta.ok() ? entry_keyed(meta->cache_key) : std::nullopt;
        indexed = slot && entries_[*slot].group_index == g && entries_[*slot].handle == h;
      } else {
        for (const Entry& e : entries_)
          if (e.live && e.group_index == g && e.handle == h) {
            indexed = true;
            break;
          }
      }
      if (!indexed)
        return make_error(ErrorCode::stale_generation,
                          "block " + std::to_string(h.block.value) + "@" + std::to_string(h.generation.value) +
                              " is no longer indexed (evicted or recycled since the receipt)",
                          where + ".handles[" + std::to_string(g) + "]");
    }
  }
  return Status::success();
}

}  // namespace kvrt
