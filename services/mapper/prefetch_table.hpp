#pragma once
// PrefetchTable: the owner thread's record of prefetched pages (see
// prefetching_backing.hpp): at most one entry per reservation address and
// per pool offset. It holds about one step's plan (one bundle of 2L pages per
// request crossing a page edge), and the decode step that follows consumes
// those entries one map() at a time on the owner thread, which is exactly the
// time asynchronous mapping tries to save. So the hit path is a binary search
// and a tombstone; no node allocation, no memmove:
// - by_va_ is sorted by va_offset and may hold dead entries (consumed or
//   revoked) until the next batch is inserted;
// - the pool index (pool -> va) is rebuilt only when asked for, which happens
//   on the misprediction paths (a map() that is not a hit).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "services/mapper/page_backing.hpp"

namespace kvrt {

class PrefetchTable {
 public:
  size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }

  // Live entries, sorted by va_offset.
  std::vector<PlannedMapping> entries() const {
    std::vector<PlannedMapping> out;
    out.reserve(live_);
    for (const Entry& e : by_va_)
      if (e.live) out.push_back(e.mapping);
    return out;
  }

  const PlannedMapping* at_va(uint64_t va_offset) const {
    auto it = find_va(va_offset);
    return it != by_va_.end() && it->live && it->mapping.va_offset == va_offset ? &it->mapping : nullptr;
  }

  // The address currently showing pool page `pool_offset`, if any.
  std::optional<uint64_t> va_of_pool(uint64_t pool_offset) {
    if (!pool_index_current_) rebuild_pool_index();
    auto it = std::lower_bound(by_pool_.begin(), by_pool_.end(), pool_offset,
                               [](const PoolEntry& e, uint64_t p) { return e.first < p; });
    for (; it != by_pool_.end() && it->first == pool_offset; ++it) {
      const PlannedMapping* m = at_va(it->second);
      if (m != nullptr && m->pool_offset == pool_offset) return it->second;
    }
    return std::nullopt;
  }

  // Records a batch of new mappings; an old entry at one of their addresses
  // or showing one of their pool pages is replaced (the batch ran after it).
  void insert(std::vector<PlannedMapping> batch) {
    if (batch.empty()) return;
    const auto by_va = [](const PlannedMapping& a, const PlannedMapping& b) { return a.va_offset < b.va_offset; };
    if (!std::is_sorted(batch.begin(), batch.end(), by_va)) std::sort(batch.begin(), batch.end(), by_va);
    if (live_ == 0) {  // steady decode: the previous plan was consumed in full
      by_va_.clear();
      for (const PlannedMapping& m : batch) by_va_.push_back(Entry{m, true});
    } else {
      std::vector<uint64_t> new_pools;
      for (const PlannedMapping& m : batch) new_pools.push_back(m.pool_offset);
      std::sort(new_pools.begin(), new_pools.end());
      std::vector<Entry> merged;
      merged.reserve(live_ + batch.size());
      auto next = batch.begin();
      for (const Entry& e : by_va_) {
        if (!e.live) continue;
        for (; next != batch.end() && next->va_offset <= e.mapping.va_offset; ++next)
          merged.push_back(Entry{*next, true});
        const bool replaced = (!merged.empty() && merged.back().mapping.va_offset == e.mapping.va_offset) ||
                              std::binary_search(new_pools.begin(), new_pools.end(), e.mapping.pool_offset);
        if (!replaced) merged.push_back(e);
      }
      for (; next != batch.end(); ++next) merged.push_back(Entry{*next, true});
      by_va_ = std::move(merged);
    }
    live_ = by_va_.size();
    pool_index_current_ = false;
  }

  void erase_va(uint64_t va_offset) {
    auto it = find_va(va_offset);
    if (it != by_va_.end() && it->live && it->mapping.va_offset == va_offset) {
      it->live = false;
      --live_;
    }
  }
  // Forgets every entry whose address lies in [va_offset, va_offset + bytes).
  void erase_range(uint64_t va_offset, uint64_t bytes) {
    for (auto it = find_va(va_offset); it != by_va_.end() && it->mapping.va_offset < va_offset + bytes; ++it)
      if (it->live) {
        it->live = false;
        --live_;
      }
  }
  void clear() {
    by_va_.clear();
    by_pool_.clear();
    live_ = 0;
    pool_index_current_ = true;
  }

 private:
  struct Entry {
    PlannedMapping mapping;
    bool live = true;
  };
  using PoolEntry = std::pair<uint64_t, uint64_t>;  // (pool_offset, va_offset)

  std::vector<Entry>::iterator find_va(uint64_t va) {
    return std::lower_bound(by_va_.begin(), by_va_.end(), va,
                            [](const Entry& e, uint64_t v) { return e.mapping.va_offset < v; });
  }
  std::vector<Entry>::const_iterator find_va(uint64_t va) const {
    return std::lower_bound(by_va_.begin(), by_va_.end(), va,
                            [](const Entry& e, uint64_t v) { return e.mapping.va_offset < v; });
  }
  void rebuild_pool_index() {
    by_pool_.clear();
    for (const Entry& e : by_va_)
      if (e.live) by_pool_.emplace_back(e.mapping.pool_offset, e.mapping.va_offset);
    std::sort(by_pool_.begin(), by_pool_.end());
    pool_index_current_ = true;
  }

  std::vector<Entry> by_va_;        // sorted by va_offset; dead entries until the next insert
  std::vector<PoolEntry> by_pool_;  // sorted by pool_offset; valid when pool_index_current_
  bool pool_index_current_ = true;
  size_t live_ = 0;
};

}  // namespace kvrt
