#pragma once
// BlockResidue: which namespaces' rows may still be in each block's bytes.
// A purge with overwrite (0x0CE step 5: stale bytes never become visible to
// a new owner) must have every block that may hold the purged namespace's
// rows zeroed before its next owner. The allocator core does not know
// namespaces, so without this it marks the whole pool, every tenant's
// blocks included.
//
// A block gains the namespace of every request that takes a first reference
// to it (a fresh or copy-on-write block, a revived cached one): from then on
// that request may write it. It loses them all when it is marked for
// overwrite, since the mark zeroes whatever is in it before its next owner.
// Over-approximate by design: a bit is never cleared by a write that
// happened to cover the rows, and a reference taken without a namespace
// (an op that names none, on a node without quotas) or by a namespace beyond
// the 63 tracked sets the unknown bit, which every purge marks.
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "schema/allocator_types.hpp"
#include "services/allocator/allocator_config.hpp"

namespace kvrt {

class BlockResidue {
 public:
  static constexpr uint32_t kUnknown = 63;  // the bit of an unnamed or untracked namespace

  explicit BlockResidue(const BlockAllocatorConfig& config);

  // A committed transaction of a request of namespace `ns` (an index of the
  // node's namespaces; nullopt: none named): every block whose reference
  // count rose from 0 may now hold its rows.
  void record(std::optional<uint32_t> ns, std::span<const RefcountDelta> deltas);
  // The blocks that may hold rows of namespace `ns` (or of an unknown one),
  // as (group index, slot), each forgotten: the caller marks them for
  // overwrite, which covers everything in them.
  std::vector<std::pair<uint32_t, uint32_t>> take(uint32_t ns);
  // Every block forgotten (the caller marked the whole pool).
  void clear();
  // Blocks that may hold rows of some namespace.
  uint64_t blocks_with_residue() const;

 private:
  struct Group {
    CacheGroupId group;
    uint32_t block_id_base = 0;
    std::vector<uint64_t> bits;  // [slot]: bit i = namespace i, bit 63 = unknown
  };
  std::vector<Group> groups_;
};

}  // namespace kvrt
