#include "services/allocator/payload_store.hpp"

#include <cstring>

#include "services/common/assert.hpp"

namespace kvrt {

HostPayloadStore::HostPayloadStore(std::vector<uint64_t> row_bytes, uint32_t blocks, uint32_t block_size)
    : row_bytes_(std::move(row_bytes)), block_size_(block_size) {
  for (uint64_t rb : row_bytes_) bytes_.emplace_back(rb * block_size * blocks, 0);
}

uint8_t* HostPayloadStore::row_ptr(uint32_t g, uint32_t slot, uint32_t row) {
  return bytes_[g].data() + (uint64_t{slot} * block_size_ + row) * row_bytes_[g];
}

void HostPayloadStore::copy_rows(uint32_t g, uint32_t src, uint32_t dst, uint32_t rows) {
  KVRT_ASSERT(src != dst && rows <= block_size_, "copy_rows: bad arguments");
  std::memcpy(row_ptr(g, dst, 0), row_ptr(g, src, 0), rows * row_bytes_[g]);
}

void HostPayloadStore::write_rows(uint32_t g, uint32_t slot, uint32_t first, uint32_t rows,
                                  std::span<const uint8_t> bytes) {
  KVRT_ASSERT(first + rows <= block_size_ && bytes.size() == rows * row_bytes_[g], "write_rows: bad span");
  std::memcpy(row_ptr(g, slot, first), bytes.data(), bytes.size());
}

void HostPayloadStore::read_rows(uint32_t g, uint32_t slot, uint32_t first, uint32_t rows,
                                 std::span<uint8_t> out) const {
  KVRT_ASSERT(first + rows <= block_size_ && out.size() == rows * row_bytes_[g], "read_rows: bad span");
  const uint8_t* p = bytes_[g].data() + (uint64_t{slot} * block_size_ + first) * row_bytes_[g];
  std::memcpy(out.data(), p, out.size());
}

void HostPayloadStore::zero_block(uint32_t g, uint32_t slot) {
  std::memset(row_ptr(g, slot, 0), 0, block_size_ * row_bytes_[g]);
}

}  // namespace kvrt
