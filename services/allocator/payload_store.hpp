#pragma once
// BlockPayloadStore: where the allocator reads and writes K/V row bytes when a
// transaction moves data (the copy-on-write copy of 0x05C steps 5-6, the zero
// on recycle). The allocator owns metadata; the store owns bytes. A store over
// POSIX shared memory lets other processes read the same rows (shm/).
//
// Row bytes cross this interface token-major: `rows` consecutive token rows of
// one cache group, each of B_row,g bytes in the canonical row order below.
//
// Canonical row order (every store means the same bytes by it, so a row
// written through one store reads back identically through any other):
// one token row of cache group g is
//
//   [ K: L_g * H_kv,g * d_h scalars of b_K bytes ][ V: same count, b_V bytes ]
//
// and inside K (and inside V) the scalars run layer_local-major, then kv_head,
// then head_dim lane:  K scalar (l, h, x) sits at byte
//   b_K * ((l * H_kv,g + h) * d_h + x)                   from the row start,
// V scalar (l, h, x) at k_row_bytes + b_V * ((l * H_kv,g + h) * d_h + x),
// with k_row_bytes = L_g * H_kv,g * d_h * b_K, so B_row,g = k_row_bytes +
// v_row_bytes (0x02A). This is the logical order only: a physical pool lays K
// and V out in the group's declared axis order (0x03E), and a store that is
// not token-major translates (shm/shm_payload_store.hpp). HostPayloadStore
// keeps the canonical bytes as they are, slot-major.
#include <cstdint>
#include <span>
#include <vector>

namespace kvrt {

// Slots are pool-local block indices (the allocator's slot; its block id is
// block_id_base + slot). Arguments out of range are kvrt bugs (KVRT_ASSERT):
// only the allocator calls a store, with slots it owns.
class BlockPayloadStore {
 public:
  virtual ~BlockPayloadStore() = default;
  // Copies rows [0, rows) of block src_slot into block dst_slot of one group,
  // K and V (the copy-on-write copy of 0x05C steps 5-6).
  virtual void copy_rows(uint32_t group_index, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) = 0;
  // Writes rows [first_row, first_row + rows) of a block from `bytes`.
  virtual void write_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                          std::span<const uint8_t> bytes) = 0;
  virtual void read_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                         std::span<uint8_t> out) const = 0;
  // Zeroes every row of a block, K and V (zero-on-recycle).
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
