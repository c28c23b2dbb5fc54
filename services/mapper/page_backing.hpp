#pragma once
// The OS side of the mapper (0x06B init / map / unmap / shutdown), kept apart
// from the page-group arithmetic so that the 0x06F teaching fixture (G = 64 B,
// smaller than any OS page) runs through the ledgers with LedgerOnlyBacking
// while MemfdBacking performs real mappings at a multiple of the OS page.
// Offsets are bytes from the reservation base / from the pool's start.
#include <cstdint>

#include "services/common/result.hpp"

namespace kvrt {

// One OS-level mapping the owner has decided: reservation bytes
// [va_offset, va_offset + bytes) backed by pool bytes [pool_offset, ...).
// The core plans these (VmmMapper::plan_frontier_mappings); a background
// thread may only execute them (0x06D).
struct PlannedMapping {
  uint64_t va_offset = 0;    // [bytes from the reservation base]
  uint64_t pool_offset = 0;  // [bytes from the pool start]; handle = pool_offset / G
  uint64_t bytes = 0;        // one page group G [bytes]

  friend bool operator==(const PlannedMapping&, const PlannedMapping&) = default;
};

// Thread contract: a backing is used by one thread at a time. The owner calls
// it directly; PrefetchingBacking hands it to its background thread only
// between submit and await, during which the owner does not touch it.
class PageBacking {
 public:
  virtual ~PageBacking() = default;
  // Reserve `reserved_bytes` of address space and create a pool of `pool_bytes`.
  virtual Status create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) = 0;
  // Back [va_offset, va_offset + bytes) with the pool's [pool_offset, ...),
  // replacing whatever the range showed before (MAP_FIXED semantics; a
  // backing whose OS call refuses a mapped range unmaps it first).
  virtual Status map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) = 0;
  // Return [va_offset, va_offset + bytes) to reserved, inaccessible address space.
  virtual Status unmap(uint64_t va_offset, uint64_t bytes) = 0;
  // Release the reservation and the pool; idempotent.
  virtual void release() = 0;
  // Base of the reservation, or nullptr when nothing is really mapped. For a
  // device backing (gpu/cuda_vmm_backing.hpp) this is a device virtual
  // address: device code may dereference it, host code may not.
  virtual std::byte* reservation_base() const = 0;
};

// Arithmetic only: every call succeeds and nothing is mapped. Used where G is
// a teaching size below the OS page (0x06C: "an executable algebra oracle").
class LedgerOnlyBacking final : public PageBacking {
 public:
  Status create(uint64_t, uint64_t, uint64_t) override { return Status::success(); }
  Status map(uint64_t, uint64_t, uint64_t) override { return Status::success(); }
  Status unmap(uint64_t, uint64_t) override { return Status::success(); }
  void release() override {}
  std::byte* reservation_base() const override { return nullptr; }
};

}  // namespace kvrt
