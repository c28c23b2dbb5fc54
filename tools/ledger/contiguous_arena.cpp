#include "tools/ledger/contiguous_arena.hpp"

#include <algorithm>
#include <string>

namespace kvrt {

Result<ContiguousArena> ContiguousArena::create(uint64_t arena_bytes, std::vector<Extent> allocated) {
  if (arena_bytes == 0) return make_error(ErrorCode::invalid_argument, "an arena has at least one byte", "arena_bytes");
  for (size_t i = 0; i < allocated.size(); ++i) {
    const Extent& e = allocated[i];
    const std::string field = "allocated[" + std::to_string(i) + "]";
    if (e.bytes == 0) return make_error(ErrorCode::invalid_argument, "an allocated extent is not empty", field);
    if (e.offset >= arena_bytes || e.bytes > arena_bytes - e.offset)
      return make_error(ErrorCode::invalid_argument,
                        "extent [" + std::to_string(e.offset) + ", +" + std::to_string(e.bytes) +
                            ") leaves the arena of " + std::to_string(arena_bytes) + " bytes",
                        field);
  }
  std::vector<size_t> order(allocated.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return allocated[a].offset < allocated[b].offset; });
  std::vector<Extent> sorted;
  std::vector<Extent> free;
  uint64_t cursor = 0;  // first byte not yet covered by an earlier extent
  for (size_t k = 0; k < order.size(); ++k) {
    const Extent& e = allocated[order[k]];
    if (e.offset < cursor)
      return make_error(
          ErrorCode::invalid_argument,
          "extent at offset " + std::to_string(e.offset) + " overlaps the extent ending at " + std::to_string(cursor),
          "allocated[" + std::to_string(order[k]) + "]");
    if (e.offset > cursor) free.push_back(Extent{cursor, e.offset - cursor});
    sorted.push_back(e);
    cursor = e.offset + e.bytes;
  }
  if (cursor < arena_bytes) free.push_back(Extent{cursor, arena_bytes - cursor});
  return ContiguousArena(arena_bytes, std::move(sorted), std::move(free));
}

uint64_t ContiguousArena::allocated_bytes() const {
  uint64_t sum = 0;
  for (const Extent& e : allocated_) sum += e.bytes;
  return sum;
}

uint64_t ContiguousArena::total_free_bytes() const {
  uint64_t sum = 0;
  for (const Extent& e : free_) sum += e.bytes;
  return sum;
}

uint64_t ContiguousArena::largest_free_bytes() const {
  uint64_t largest = 0;
  for (const Extent& e : free_) largest = std::max(largest, e.bytes);
  return largest;
}

ExternalFragmentation ContiguousArena::external_fragmentation() const {
  ExternalFragmentation f;
  f.total_free_bytes = total_free_bytes();
  f.largest_free_bytes = largest_free_bytes();
  if (f.total_free_bytes == 0) return f;  // not_applicable: nothing free to summarize
  f.state = FragmentationState::applicable;
  f.ratio = ExactFraction::of(f.total_free_bytes - f.largest_free_bytes, f.total_free_bytes);
  return f;
}

Result<ContiguousFit> ContiguousArena::fit_contiguous(uint64_t candidate_bytes) const {
  if (candidate_bytes == 0)
    return make_error(ErrorCode::invalid_argument, "a candidate allocation has at least one byte", "candidate_bytes");
  ContiguousFit fit;
  fit.candidate_bytes = candidate_bytes;
  fit.largest_free_bytes = largest_free_bytes();
  for (const Extent& e : free_)
    if (e.bytes >= candidate_bytes) {
      fit.placement = Extent{e.offset, candidate_bytes};
      break;
    }
  return fit;
}

Result<BlockPoolFit> fit_block_pool(uint64_t candidate_bytes, uint64_t block_bytes, uint64_t free_blocks) {
  if (candidate_bytes == 0)
    return make_error(ErrorCode::invalid_argument, "a candidate allocation has at least one byte", "candidate_bytes");
  if (block_bytes == 0)
    return make_error(ErrorCode::invalid_argument, "a pool block has at least one byte", "block_bytes");
  BlockPoolFit fit;
  fit.candidate_bytes = candidate_bytes;
  fit.block_bytes = block_bytes;
  fit.blocks_needed = candidate_bytes / block_bytes + (candidate_bytes % block_bytes != 0 ? 1 : 0);
  fit.free_blocks = free_blocks;
  return fit;
}

}  // namespace kvrt
