#pragma once
// External fragmentation of a contiguous arena (spec 0x02F). It is a property of
// where the free extents lie and of the next request's size, not an additive
// byte quantity: it is never added to reservation slack or tail waste.
//
//   F_ext = 1 - M_largest_free_extent / M_total_free      (defined only when M_total_free > 0)
//
// A full arena has no free-extent distribution to summarize, so the ratio is
// reported as not_applicable rather than divided by zero or scored as perfect.
#include <cstdint>
#include <optional>
#include <vector>

#include "services/common/result.hpp"
#include "tools/ledger/exact_fraction.hpp"

namespace kvrt {

struct Extent {
  uint64_t offset = 0;  // [bytes from the arena base]
  uint64_t bytes = 0;   // [bytes], > 0
  friend bool operator==(const Extent&, const Extent&) = default;
};

enum class FragmentationState : uint8_t { applicable, not_applicable };

struct ExternalFragmentation {
  FragmentationState state = FragmentationState::not_applicable;
  uint64_t total_free_bytes = 0;
  uint64_t largest_free_bytes = 0;
  // (total - largest) / total, in lowest terms; present only when applicable.
  std::optional<ExactFraction> ratio;
};

struct ContiguousFit {
  uint64_t candidate_bytes = 0;
  uint64_t largest_free_bytes = 0;
  std::optional<Extent> placement;  // first free extent that holds the candidate (first fit)
  bool accepted() const { return placement.has_value(); }
};

struct BlockPoolFit {
  uint64_t candidate_bytes = 0;
  uint64_t block_bytes = 0;    // P * B_row [bytes / block]
  uint64_t blocks_needed = 0;  // ceil(candidate / block)
  uint64_t free_blocks = 0;    // interchangeable idle blocks
  bool accepted() const { return blocks_needed <= free_blocks; }
};

class ContiguousArena {
 public:
  // Allocated extents may come in any order; they must be non-empty, inside
  // [0, arena_bytes) and pairwise disjoint. Free extents are the maximal gaps
  // between them (adjacent free space is one extent). Errors name the field
  // ("allocated[1]").
  static Result<ContiguousArena> create(uint64_t arena_bytes, std::vector<Extent> allocated);

  uint64_t arena_bytes() const { return arena_bytes_; }
  const std::vector<Extent>& allocated() const { return allocated_; }  // ascending offset
  const std::vector<Extent>& free_extents() const { return free_; }    // ascending offset
  uint64_t allocated_bytes() const;
  uint64_t total_free_bytes() const;
  uint64_t largest_free_bytes() const;

  ExternalFragmentation external_fragmentation() const;
  // A contiguous allocator accepts the candidate only if one free extent holds
  // it. A zero-byte candidate is an invalid_argument ("candidate_bytes").
  Result<ContiguousFit> fit_contiguous(uint64_t candidate_bytes) const;

 private:
  ContiguousArena(uint64_t arena_bytes, std::vector<Extent> allocated, std::vector<Extent> free)
      : arena_bytes_(arena_bytes), allocated_(std::move(allocated)), free_(std::move(free)) {}
  uint64_t arena_bytes_ = 0;
  std::vector<Extent> allocated_;
  std::vector<Extent> free_;
};

// A block pool needs ceil(candidate / block_bytes) interchangeable blocks and no
// contiguity (0x02F). Zero candidate or block size is an invalid_argument.
Result<BlockPoolFit> fit_block_pool(uint64_t candidate_bytes, uint64_t block_bytes, uint64_t free_blocks);

}  // namespace kvrt
