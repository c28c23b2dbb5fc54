#include "services/radix/radix_block_index.hpp"

#include <string>

namespace kvrt {
namespace {

// Collects the cached pages that evicted edges leave unnamed: a page goes
// with the last tree slot that named it (with page-aligned edges, all its P
// slots leave in one edge). With fault points, an eviction stops before a
// victim when the point "evict" fires (RadixBlockService::kEvictFaultPoint).
class PageSink final : public RadixEvictionSink {
 public:
  PageSink(std::vector<CachedPage>& cache, uint32_t block_tokens, FaultPoints* faults = nullptr)
      : cache_(cache), p_(block_tokens), faults_(faults) {}
  void evicted(const RadixEvictedEdge& edge) override {
    for (const TokenSlotId s : edge.slots) {
      const uint32_t id = static_cast<uint32_t>((s.value - 1) / p_);
      KVRT_ASSERT(cache_.at(id).named > 0, "an evicted slot names a page no slot names");
      if (--cache_[id].named == 0) pages.push_back(id);
    }
  }
  bool interrupted() override { return faults_ != nullptr && faults_->reached(kRadixEvictFaultPoint); }
  std::vector<uint32_t> pages;

 private:
  std::vector<CachedPage>& cache_;
  uint32_t p_;
  FaultPoints* faults_;
};

}  // namespace

Result<RadixBlockIndex> RadixBlockIndex::create(const RadixBlockIndexConfig& config) {
  if (config.block_tokens == 0)
    return make_error(ErrorCode::invalid_argument, "the page size P_a must be positive", "block_tokens");
  if (config.groups == 0) return make_error(ErrorCode::invalid_argument, "no cache group", "groups");
  if (config.budget_pages == 0)
    return make_error(ErrorCode::invalid_argument, "a radix cache of zero pages caches nothing", "budget_pages");
  RadixOptions options;
  options.page_size = config.partial_tails ? 1 : config.block_tokens;
  options.eviction = config.eviction;
  auto tree = RadixTree::create(options);
  if (!tree.ok()) return tree.error();
  return RadixBlockIndex(config, std::move(tree).value());
}

uint32_t RadixBlockIndex::new_page(std::span<const PhysicalBlockHandle> handles, uint32_t rows) {
  uint32_t id = 0;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<uint32_t>(pages_.size());
    pages_.emplace_back();
  }
  CachedPage& p = pages_[id];
  p.handles.assign(handles.begin(), handles.end());
  p.leases.clear();
  p.rows = rows;
  p.named = 0;
  p.live = true;
  ++live_pages_;
  return id;
}

void RadixBlockIndex::free_page(uint32_t id, std::vector<LeaseId>& leases_out) {
  CachedPage& p = pages_.at(id);
  KVRT_ASSERT(p.live, "freeing a cached page twice");
  leases_out.insert(leases_out.end(), p.leases.begin(), p.leases.end());
  p = CachedPage{};
  free_ids_.push_back(id);
  if (track_freed_) freed_.push_back(id);
  --live_pages_;
}

RadixBlockMatch RadixBlockIndex::match(uint64_t extra_key, std::span<const TokenId> tokens, uint32_t cap_tokens) {
  std::vector<TokenSlotId> slots;
  const RadixMatchResult m = tree_.match(RadixKeyView{usable_prefix(tokens, cap_tokens), extra_key}, &slots);
  RadixBlockMatch out = bundles_of(m.matched, slots);
  out.terminal = m.terminal;
  return out;
}

RadixBlockMatch RadixBlockIndex::peek(uint64_t extra_key, std::span<const TokenId> tokens, uint32_t cap_tokens) const {
  std::vector<TokenSlotId> slots;
  const uint32_t matched = tree_.peek(RadixKeyView{usable_prefix(tokens, cap_tokens), extra_key}, &slots);
  return bundles_of(matched, slots);
}

std::span<const TokenId> RadixBlockIndex::usable_prefix(std::span<const TokenId> tokens, uint32_t cap_tokens) const {
  const uint32_t P = config_.block_tokens;
  const uint64_t capped = std::min<uint64_t>(tokens.size(), cap_tokens);
  return tokens.first(config_.partial_tails ? capped : capped / P * P);
}

RadixBlockMatch RadixBlockIndex::bundles_of(uint32_t matched, const std::vector<TokenSlotId>& slots) const {
  const uint32_t P = config_.block_tokens;
  RadixBlockMatch out;
  out.hit_tokens = matched;
  out.tail_rows = matched % P;
  // Each page position's rows come from the page of its deepest matched
  // slot (its whole page when aligned; see RadixBlockIndexConfig).
  for (uint32_t j = 0; uint64_t{j} * P < matched; ++j) {
    const uint64_t deepest = std::min<uint64_t>(uint64_t{j + 1} * P, matched) - 1;
    const uint32_t id = static_cast<uint32_t>((slots[deepest].value - 1) / P);
    out.bundles.push_back(MatchedBlockBundle{j, pages_.at(id).handles});
  }
  return out;
}

Result<RadixAdoption> RadixBlockIndex::adopt(uint64_t extra_key, std::span<const TokenId> tokens,
                                             const std::vector<std::vector<PhysicalBlockHandle>>& pages) {
  const uint32_t P = config_.block_tokens;
  const uint64_t whole = pages.size() * uint64_t{P};
  // With partial tails the last page may hold 0 < v < P rows.
  const bool fits = tokens.size() == whole ||
                    (config_.partial_tails && !pages.empty() && tokens.size() < whole && tokens.size() > whole - P);
  if (!fits)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(tokens.size()) + " tokens are not " + std::to_string(pages.size()) +
                          " whole pages of " + std::to_string(P) +
                          (config_.partial_tails ? " (the last one may be a partial tail)" : ""),
                      "tokens");
  for (size_t j = 0; j < pages.size(); ++j)
    if (pages[j].size() != config_.groups)
      return make_error(ErrorCode::invalid_argument,
                        "page " + std::to_string(j) + " names " + std::to_string(pages[j].size()) +
                            " blocks; every page needs one per cache group (" + std::to_string(config_.groups) + ")",
                        "pages");
  RadixAdoption out;
  if (pages.empty()) return out;
  // Provisional cached pages for every page; the ones the tree already holds
  // are duplicates and go back at once.
  std::vector<uint32_t> ids;
  std::vector<TokenSlotId> slots(tokens.size());
  auto rows_of = [&](size_t j) { return static_cast<uint32_t>(std::min<uint64_t>(P, tokens.size() - j * P)); };
  for (size_t j = 0; j < pages.size(); ++j) {
    const uint32_t id = new_page(pages[j], rows_of(j));
    ids.push_back(id);
    for (uint32_t o = 0; o < rows_of(j); ++o) slots[j * P + o] = TokenSlotId{uint64_t{id} * P + o + 1};
  }
  auto inserted = tree_.insert(RadixKeyView{tokens, extra_key}, slots, 0, &out.undo);
  if (!inserted.ok()) {
    std::vector<LeaseId> none;
    for (uint32_t id : ids) free_page(id, none);
    return inserted.error();
  }
  // A page whose every row the tree held already is a duplicate; the others
  // are named by the slots the tree took (token by token, a page may be
  // named in part: its leading rows were cached by another request).
  const uint64_t held_tokens = inserted->prefix_len;
  std::vector<LeaseId> none;
  for (size_t j = 0; j < pages.size(); ++j) {
    const uint64_t begin = j * uint64_t{P}, end = begin + rows_of(j);
    if (end <= held_tokens) {
      free_page(ids[j], none);
      ++out.duplicates;
      continue;
    }
    pages_[ids[j]].named = static_cast<uint32_t>(end - std::max(begin, held_tokens));
    out.pages.push_back(ids[j]);
  }
  if (inserted->new_leaf) out.leaf = tree_.node(*inserted->new_leaf).id;
  return out;
}

std::vector<LeaseId> RadixBlockIndex::confirm(const RadixAdoption& adoption,
                                              const std::vector<std::vector<std::optional<LeaseId>>>& leases,
                                              bool withdrawn) {
  bool all = !withdrawn && leases.size() == adoption.pages.size();
  for (size_t i = 0; all && i < leases.size(); ++i)
    for (const auto& l : leases[i]) all = all && l.has_value();
  std::vector<LeaseId> release;
  if (all) {
    for (size_t i = 0; i < adoption.pages.size(); ++i) {
      CachedPage& p = pages_.at(adoption.pages[i]);
      p.leases.clear();
      for (const auto& l : leases[i]) p.leases.push_back(*l);
    }
    return release;
  }
  // Withdraw: the granted leases go back, and the adoption's leaf (exactly
  // the adopted pages) leaves the tree.
  for (const auto& page : leases)
    for (const auto& l : page)
      if (l) release.push_back(*l);
  PageSink sink(pages_, config_.block_tokens);
  if (tree_.undo_insert(adoption.undo, &sink)) {
    // Nothing walked the tree since the adoption, so no candidate can have
    // named its leaf: the retraction version stays, as in a tree that never
    // adopted.
  } else if (adoption.leaf) {
    ++retraction_version_;
    (void)tree_.evict_leaf(*adoption.leaf, &sink);
  }
  std::vector<LeaseId> none;  // never confirmed: no lease recorded
  for (uint32_t id : sink.pages) free_page(id, none);
  return release;
}

std::vector<LeaseId> RadixBlockIndex::evict_tokens(uint64_t target_tokens, FaultPoints* faults) {
  PageSink sink(pages_, config_.block_tokens, faults);
  // Any cached token taken out retracts (a page named in part loses rows a
  // candidate may have counted on), whether or not a whole page left.
  if (tree_.evict(target_tokens, &sink).evicted_tokens > 0) ++retraction_version_;
  std::vector<LeaseId> release;
  for (uint32_t id : sink.pages) free_page(id, release);
  evicted_pages_ += sink.pages.size();
  return release;
}

std::vector<LeaseId> RadixBlockIndex::enforce_budget(FaultPoints* faults) {
  std::vector<LeaseId> release;
  // Page-aligned edges free a page per P tokens evicted, so one round
  // suffices; token by token, an evicted leaf may take only part of a page's
  // slots (its leading rows stay named above it), so it takes rounds until
  // the budget holds, the tree is empty or the fault point stopped it.
  while (live_pages_ > config_.budget_pages) {
    const uint64_t before = tree_.ledger().total_tokens;
    std::vector<LeaseId> leases =
        evict_tokens(uint64_t{live_pages_ - config_.budget_pages} * config_.block_tokens, faults);
    release.insert(release.end(), leases.begin(), leases.end());
    if (tree_.ledger().total_tokens == before) break;
  }
  return release;
}

std::vector<LeaseId> RadixBlockIndex::evict_pages(uint32_t pages, FaultPoints* faults) {
  return evict_tokens(uint64_t{pages} * config_.block_tokens, faults);
}

std::vector<LeaseId> RadixBlockIndex::evict_all() { return evict_tokens(UINT64_MAX, nullptr); }

std::vector<LeaseId> RadixBlockIndex::evict_extra_key(uint64_t extra_key) {
  PageSink sink(pages_, config_.block_tokens);
  tree_.evict_extra_key(extra_key, &sink);
  ++retraction_version_;
  std::vector<LeaseId> release;
  for (uint32_t id : sink.pages) free_page(id, release);
  evicted_pages_ += sink.pages.size();
  return release;
}

Status RadixBlockIndex::lock_path(RadixNodeRef terminal) {
  Result<int64_t> r = tree_.inc_lock(terminal);
  return r.ok() ? Status::success() : Status(r.error());
}

Status RadixBlockIndex::unlock_path(RadixNodeRef terminal) {
  Result<int64_t> r = tree_.dec_lock(terminal);
  return r.ok() ? Status::success() : Status(r.error());
}

Status RadixBlockIndex::validate() const {
  KVRT_TRY(tree_.validate());
  const uint32_t P = config_.block_tokens;
  std::vector<uint32_t> seen(pages_.size(), 0);
  Status bad;
  tree_.for_each_node([&](RadixNodeRef ref, const RadixNode&) {
    if (!bad.ok()) return;
    const std::vector<TokenSlotId> slots = tree_.path_slots(ref);
    const RadixNode& n = tree_.node(ref);
    // This node's own edge: the last n.length() slots of its path.
    for (size_t k = slots.size() - n.length(); k < slots.size(); ++k) {
      const uint64_t s = slots[k].value - 1;
      const uint32_t id = static_cast<uint32_t>(s / P);
      if (id >= pages_.size() || !pages_[id].live || s % P != k % P || s % P >= pages_[id].rows) {
        bad = make_error(ErrorCode::invariant_violated, "tree slot " + std::to_string(s + 1) + " at depth " +
                                                            std::to_string(k) + " names no live page at its row");
        return;
      }
      ++seen[id];
    }
  });
  KVRT_TRY(bad);
  uint32_t live = 0;
  uint64_t named = 0;
  for (size_t id = 0; id < pages_.size(); ++id) {
    if (!pages_[id].live) continue;
    ++live;
    named += pages_[id].named;
    if (seen[id] != pages_[id].named || seen[id] == 0 || (!config_.partial_tails && seen[id] != P))
      return make_error(ErrorCode::invariant_violated, "cached page " + std::to_string(id) + " is named by " +
                                                           std::to_string(seen[id]) + " slots; it counts " +
                                                           std::to_string(pages_[id].named) + " of its " +
                                                           std::to_string(pages_[id].rows) + " rows");
    if (pages_[id].rows == 0 || pages_[id].rows > P || (!config_.partial_tails && pages_[id].rows != P))
      return make_error(ErrorCode::invariant_violated,
                        "cached page " + std::to_string(id) + " holds " + std::to_string(pages_[id].rows) + " rows");
    if (pages_[id].handles.size() != config_.groups)
      return make_error(ErrorCode::invariant_violated,
                        "cached page " + std::to_string(id) + " has a bundle of the wrong width");
    if (!pages_[id].leases.empty() && pages_[id].leases.size() != config_.groups)
      return make_error(ErrorCode::invariant_violated,
                        "cached page " + std::to_string(id) + " holds a partial set of leases");
  }
  if (live != live_pages_)
    return make_error(ErrorCode::invariant_violated, "live page count disagrees with the registry");
  if (named != tree_.ledger().total_tokens)
    return make_error(ErrorCode::invariant_violated, std::to_string(live) + " cached pages name " +
                                                         std::to_string(named) + " slots but the tree holds " +
                                                         std::to_string(tree_.ledger().total_tokens) + " tokens");
  return Status::success();
}

}  // namespace kvrt
