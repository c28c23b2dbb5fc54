#pragma once
// FaultPointBacking: a PageBacking between the mapper core and the real one
// whose map() and unmap() consult the fault points "os_map" and "os_unmap"
// first and, when one fires, fail as mmap does under ENOMEM
// (os_mapping_failed), without calling the real backing. The node's mapper
// always runs over one, so a fault-injection run arms "mapper.os_map" or
// "mapper.os_unmap" through the fault_arm route and a step fails part-way,
// with the earlier pages of the same step already mapped: the core must undo
// the whole step (0x06D: a frontier is never half mapped). Disarmed, a call
// costs one atomic load.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/common/fault_points.hpp"
#include "services/mapper/page_backing.hpp"

namespace kvrt {

class FaultPointBacking final : public PageBacking {
 public:
  // `faults` must outlive the backing.
  FaultPointBacking(std::unique_ptr<PageBacking> inner, FaultPoints& faults)
      : inner_(std::move(inner)), faults_(faults) {}
  static std::vector<std::string> fault_point_names() { return {"os_map", "os_unmap"}; }

  Status create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) override {
    return inner_->create(reserved_bytes, pool_bytes, page_group_bytes);
  }
  Status map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) override;
  Status unmap(uint64_t va_offset, uint64_t bytes) override;
  void release() override { inner_->release(); }
  std::byte* reservation_base() const override { return inner_->reservation_base(); }

  uint64_t maps() const { return maps_; }      // calls, refused ones included
  uint64_t unmaps() const { return unmaps_; }  // calls, refused ones included
  uint64_t refused() const { return refused_; }

 private:
  std::unique_ptr<PageBacking> inner_;
  FaultPoints& faults_;
  uint64_t maps_ = 0, unmaps_ = 0, refused_ = 0;
};

}  // namespace kvrt
