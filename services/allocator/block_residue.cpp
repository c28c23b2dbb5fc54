#include "services/allocator/block_residue.hpp"

#include <algorithm>

namespace kvrt {

BlockResidue::BlockResidue(const BlockAllocatorConfig& config) {
  for (const GroupPoolConfig& g : config.groups)
    groups_.push_back(Group{g.group, g.block_id_base, std::vector<uint64_t>(g.capacity_blocks, 0)});
}

void BlockResidue::record(std::optional<uint32_t> ns, std::span<const RefcountDelta> deltas) {
  const uint64_t bit = uint64_t{1} << (ns && *ns < kUnknown ? *ns : kUnknown);
  for (const RefcountDelta& d : deltas) {
    if (d.refs_before != 0 || d.refs_after == 0) continue;
    for (Group& g : groups_) {
      if (g.group != d.handle.group) continue;
      // A block id below the base wraps to a huge slot and fails the bound.
      const uint64_t slot = uint64_t{d.handle.block.value} - g.block_id_base;
      if (slot < g.bits.size()) g.bits[slot] |= bit;
      break;
    }
  }
}

std::vector<std::pair<uint32_t, uint32_t>> BlockResidue::take(uint32_t ns) {
  const uint64_t wanted = (uint64_t{1} << (ns < kUnknown ? ns : kUnknown)) | (uint64_t{1} << kUnknown);
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t g = 0; g < groups_.size(); ++g)
    for (uint32_t slot = 0; slot < groups_[g].bits.size(); ++slot)
      if ((groups_[g].bits[slot] & wanted) != 0) {
        out.emplace_back(g, slot);
        groups_[g].bits[slot] = 0;
      }
  return out;
}

void BlockResidue::clear() {
  for (Group& g : groups_) std::fill(g.bits.begin(), g.bits.end(), 0);
}

uint64_t BlockResidue::blocks_with_residue() const {
  uint64_t n = 0;
  for (const Group& g : groups_)
    for (uint64_t b : g.bits) n += b != 0 ? 1 : 0;
  return n;
}

}  // namespace kvrt
