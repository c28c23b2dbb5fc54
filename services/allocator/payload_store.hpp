#pragma once
// BlockPayloadStore: where the allocator reads and writes K/V row bytes when a
// transaction moves data (the copy-on-write copy of 0x05C steps 5-6, the zero
// on recycle). The allocator owns metadata; the store owns bytes. A store over
// POSIX shared memory lets other processes read the same rows (shm/).
//
// Row bytes cross this interface token-major: `rows` consecutive token rows of
// one cache group, each of B_row,g bytes in the store's canonical row order.
#include <cstdint>
#include <span>
#include <vector>

namespace kvrt {

class BlockPayloadStore {
 public:
  virtual ~BlockPayloadStore() = default;
  // Copies rows [0, rows) of block src_slot into block dst_slot of one group.
  virtual void copy_rows(uint32_t group_index, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) = 0;
  // Writes rows [first_row, first_row + rows) of a block from `bytes`.
  virtual void write_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                          std::span<const uint8_t> bytes) = 0;
  virtual void read_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                         std::span<uint8_t> out) const = 0;
  virtual void zero_block(uint32_t group_index, uint32_t slot) = 0;
};

// Process-local store: one contiguous slot-major buffer per group. Used by
// tests and single-process runs; shm/ provides the shared-memory store.
class HostPayloadStore final : public BlockPayloadStore {
 public:
  // row_bytes[g] = B_row,g; every group has `blocks` blocks of `block_size` rows.
  HostPayloadStore(std::vector<uint64_t> row_bytes, uint32_t blocks, uint32_t block_size);
  void copy_rows(uint32_t group_index, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) override;
  void write_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                  std::span<const uint8_t> bytes) override;
  void read_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                 std::span<uint8_t> out) const override;
  void zero_block(uint32_t group_index, uint32_t slot) override;

 private:
  uint8_t* row_ptr(uint32_t g, uint32_t slot, uint32_t row);
  std::vector<uint64_t> row_bytes_;
  uint32_t block_size_;
  std::vector<std::vector<uint8_t>> bytes_;
};

}  // namespace kvrt
