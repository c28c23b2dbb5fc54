#pragma once
// InProcessAllocatorProbe: one allocator owner actor in a local actor system
// and a blocking caller in the same process, for `kvrt bench rpc`'s
// in-process round trip (the same decode -> call -> encode path a worker's
// message takes, without the network). CAF-free interface.
#include <cstdint>
#include <memory>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/common/result.hpp"

namespace kvrt {

class InProcessAllocatorProbe {
 public:
  static Result<std::unique_ptr<InProcessAllocatorProbe>> create(BlockAllocator allocator);
  ~InProcessAllocatorProbe();
  // Sends encoded AllocatorBatch bytes as session 1 and returns the reply bytes.
  Result<std::vector<uint8_t>> call(const std::vector<uint8_t>& batch);

 private:
  struct Impl;
  explicit InProcessAllocatorProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvrt
