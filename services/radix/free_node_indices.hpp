#pragma once
// FreeNodeIndices: the arena slots of removed radix nodes, handed out lowest
// index first (a binary min-heap).
//
// Why not last-freed-first: eviction frees nodes in victim order, so a stack
// hands their slots back reversed and interleaved with whatever was freed
// before; after a few fill-and-drain cycles the nodes of one stretch of
// traffic lie scattered over the arena, and every eviction, match and lock
// walk pays a cold line per node. Lowest-first keeps live nodes packed at the
// arena's start and gives a burst of new nodes ascending slots, so the nodes
// an LRU eviction later walks lie in the order it walks them. Measured on
// `kvrt bench index` (docs/benchmarks.md, "Rerun, session 8"), the two
// binaries alternated: radix_evict_per_node 73-110 ns/node with a stack,
// 47-78 ns lowest-first; match and insert unchanged. The price is O(log n)
// per allocation and per free instead of O(1).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "services/common/assert.hpp"

namespace kvrt {

class FreeNodeIndices {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  void release(uint32_t index) {
    heap_.push_back(index);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
  }
  uint32_t take_lowest() {
    KVRT_ASSERT(!heap_.empty(), "no free node index to take");
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    const uint32_t index = heap_.back();
    heap_.pop_back();
    return index;
  }
  void clear() { heap_.clear(); }
  // Min-heap order holds (validate()).
  bool consistent() const { return std::is_heap(heap_.begin(), heap_.end(), std::greater<>{}); }

 private:
  std::vector<uint32_t> heap_;
};

}  // namespace kvrt
