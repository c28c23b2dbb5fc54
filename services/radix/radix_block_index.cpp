#include "services/radix/radix_block_index.hpp"

#include <string>

namespace kvrt {
namespace {

// Collects the cached pages of evicted edges (each page once: at its row 0).
// With fault points, an eviction stops before a victim when the point
// "evict" fires (RadixBlockService::kEvictFaultPoint).
class PageSink final : public RadixEvictionSink {
 public:
  explicit PageSink(uint32_t block_tokens, FaultPoints* faults = nullptr) : p_(block_tokens), faults_(faults) {}
  void evicted(const RadixEvictedEdge& edge) override {
    for (const TokenSlotId s : edge.slots)
      if ((s.value - 1) % p_ == 0) pages.push_back(static_cast<uint32_t>((s.value - 1) / p_));
  }
  bool interrupted() override { return faults_ != nullptr && faults_->reached(kRadixEvictFaultPoint); }
  std::vector<uint32_t> pages;

 private:
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
  options.page_size = config.block_tokens;
  options.eviction = config.eviction;
  auto tree = RadixTree::create(options);
  if (!tree.ok()) return tree.error();
  return RadixBlockIndex(config, std::move(tree).value());
}

uint32_t RadixBlockIndex::new_page(std::span<const PhysicalBlockHandle> handles) {
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
  --live_pages_;
}

RadixBlockMatch RadixBlockIndex::match(uint64_t extra_key, std::span<const TokenId> tokens, uint32_t cap_tokens) {
  const uint32_t P = config_.block_tokens;
  const uint32_t usable = std::min<uint64_t>(tokens.size(), cap_tokens) / P * P;
  std::vector<TokenSlotId> slots;
  const RadixMatchResult m = tree_.match(RadixKeyView{tokens.first(usable), extra_key}, &slots);
  RadixBlockMatch out;
  out.hit_tokens = m.matched;
  out.terminal = m.terminal;
  for (uint32_t j = 0; j < m.matched / P; ++j) {
    const uint32_t id = static_cast<uint32_t>((slots[uint64_t{j} * P].value - 1) / P);
    out.bundles.push_back(MatchedBlockBundle{j, pages_.at(id).handles});
  }
  return out;
}

Result<RadixAdoption> RadixBlockIndex::adopt(uint64_t extra_key, std::span<const TokenId> tokens,
                                             const std::vector<std::vector<PhysicalBlockHandle>>& pages) {
  const uint32_t P = config_.block_tokens;
  if (tokens.size() != pages.size() * uint64_t{P})
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(tokens.size()) + " tokens are not " + std::to_string(pages.size()) +
                          " whole pages of " + std::to_string(P),
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
  for (size_t j = 0; j < pages.size(); ++j) {
    const uint32_t id = new_page(pages[j]);
    ids.push_back(id);
    for (uint32_t o = 0; o < P; ++o) slots[j * P + o] = TokenSlotId{uint64_t{id} * P + o + 1};
  }
  auto inserted = tree_.insert(RadixKeyView{tokens, extra_key}, slots, 0, &out.undo);
  if (!inserted.ok()) {
    std::vector<LeaseId> none;
    for (uint32_t id : ids) free_page(id, none);
    return inserted.error();
  }
  const uint32_t held = inserted->prefix_len / P;
  std::vector<LeaseId> none;
  for (uint32_t j = 0; j < held; ++j) free_page(ids[j], none);
  out.duplicates = held;
  out.pages.assign(ids.begin() + held, ids.end());
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
  PageSink sink(config_.block_tokens);
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
  PageSink sink(config_.block_tokens, faults);
  tree_.evict(target_tokens, &sink);
  if (!sink.pages.empty()) ++retraction_version_;
  std::vector<LeaseId> release;
  for (uint32_t id : sink.pages) free_page(id, release);
  evicted_pages_ += sink.pages.size();
  return release;
}

std::vector<LeaseId> RadixBlockIndex::enforce_budget(FaultPoints* faults) {
  if (live_pages_ <= config_.budget_pages) return {};
  return evict_tokens(uint64_t{live_pages_ - config_.budget_pages} * config_.block_tokens, faults);
}

std::vector<LeaseId> RadixBlockIndex::evict_pages(uint32_t pages, FaultPoints* faults) {
  return evict_tokens(uint64_t{pages} * config_.block_tokens, faults);
}

std::vector<LeaseId> RadixBlockIndex::evict_all() { return evict_tokens(UINT64_MAX, nullptr); }

std::vector<LeaseId> RadixBlockIndex::evict_extra_key(uint64_t extra_key) {
  PageSink sink(config_.block_tokens);
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
      if (id >= pages_.size() || !pages_[id].live || s % P != k % P) {
        bad = make_error(ErrorCode::invariant_violated, "tree slot " + std::to_string(s + 1) + " at depth " +
                                                            std::to_string(k) + " names no live page at its row");
        return;
      }
      ++seen[id];
    }
  });
  KVRT_TRY(bad);
  uint32_t live = 0;
  for (size_t id = 0; id < pages_.size(); ++id) {
    if (!pages_[id].live) continue;
    ++live;
    if (seen[id] != P)
      return make_error(ErrorCode::invariant_violated, "cached page " + std::to_string(id) + " is named by " +
                                                           std::to_string(seen[id]) + " slots, not " +
                                                           std::to_string(P));
    if (pages_[id].handles.size() != config_.groups)
      return make_error(ErrorCode::invariant_violated,
                        "cached page " + std::to_string(id) + " has a bundle of the wrong width");
    if (!pages_[id].leases.empty() && pages_[id].leases.size() != config_.groups)
      return make_error(ErrorCode::invariant_violated,
                        "cached page " + std::to_string(id) + " holds a partial set of leases");
  }
  if (live != live_pages_)
    return make_error(ErrorCode::invariant_violated, "live page count disagrees with the registry");
  if (uint64_t{live} * P != tree_.ledger().total_tokens)
    return make_error(ErrorCode::invariant_violated, std::to_string(live) + " cached pages but " +
                                                         std::to_string(tree_.ledger().total_tokens) + " tree tokens");
  return Status::success();
}

}  // namespace kvrt
