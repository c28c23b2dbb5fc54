#pragma once
// ComputeBackend: the one interface through which owners touch backend memory
// (host shared memory or a CUDA device). The CPU implementation is always
// built; the CUDA one lives in gpu/ and is reached only through this interface,
// so nothing outside gpu/ includes a CUDA header (STACK.md: nvcc cannot parse
// Cap'n Proto or fmt headers, and g++ builds must not need a driver).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "services/common/result.hpp"

namespace kvrt {

// One byte range copy inside a buffer: the copy-on-write block copy of
// spec 0x05C copies r valid rows of a source block into a private block.
struct ByteRangeCopy {
  uint64_t src_offset = 0;  // [bytes from buffer start]
  uint64_t dst_offset = 0;  // [bytes from buffer start]
  uint64_t bytes = 0;
};

// A buffer in the backend's memory. Move-only; freed by its destructor.
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  virtual uint64_t size_bytes() const = 0;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual std::string_view name() const = 0;
  virtual Result<std::unique_ptr<BackendBuffer>> allocate(uint64_t bytes) = 0;
  virtual Status write(BackendBuffer& buffer, uint64_t offset, std::span<const uint8_t> data) = 0;
  virtual Status read(const BackendBuffer& buffer, uint64_t offset, std::span<uint8_t> out) = 0;
  // Every range is checked against the buffer before anything is copied, so a
  // rejected call changes nothing. Source and destination ranges must not
  // overlap (a COW destination is always a fresh private block).
  virtual Status copy_ranges(BackendBuffer& buffer, std::span<const ByteRangeCopy> copies) = 0;
};

// Validates copies against a buffer size; shared by every backend.
Status check_copy_ranges(uint64_t buffer_bytes, std::span<const ByteRangeCopy> copies);

std::unique_ptr<ComputeBackend> make_cpu_backend();

// What the CUDA side reports about the machine. `available` is false (with a
// reason) when kvrt was built without CUDA, when no driver is loaded, or when
// there is no device: all three mean "run the CPU path".
struct CudaDeviceProbe {
  bool built_with_cuda = false;
  bool available = false;
  int device_count = 0;
  std::string device_name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  std::string reason;  // why not available
};

CudaDeviceProbe probe_cuda_device();
// Returns the CUDA backend on device 0, or a typed error when unavailable.
Result<std::unique_ptr<ComputeBackend>> make_cuda_backend();

}  // namespace kvrt
