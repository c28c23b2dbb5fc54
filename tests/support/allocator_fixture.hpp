#pragma once
// Test helpers for allocator suites: deterministic K/V row bytes that encode
// (lineage, token, group), so a test can tell exactly whose row a block holds.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "services/allocator/payload_store.hpp"
#include "services/common/splitmix64.hpp"

namespace kvrt::test {

class RowWriter {
 public:
  explicit RowWriter(std::vector<uint64_t> row_bytes) : row_bytes_(std::move(row_bytes)) {
    for (uint64_t b : row_bytes_) buffers_.emplace_back(b);
    spans_.resize(row_bytes_.size());
  }

  static void fill(std::span<uint8_t> out, uint64_t lineage, uint64_t token, uint64_t group) {
    const uint64_t seed = splitmix64(lineage * 0x100000001b3ull ^ (token << 20) ^ (group << 56));
    for (size_t k = 0; k < out.size(); k += 8) {
      const uint64_t v = splitmix64(seed + k);
      std::memcpy(out.data() + k, &v, std::min<size_t>(8, out.size() - k));
    }
  }

  // One token's rows for every group; valid until the next call.
  std::span<const std::span<const uint8_t>> rows_for(uint64_t lineage, uint64_t token) {
    for (size_t g = 0; g < row_bytes_.size(); ++g) {
      fill(buffers_[g], lineage, token, g);
      spans_[g] = std::span<const uint8_t>(buffers_[g]);
    }
    return spans_;
  }

  // True when rows [first_row, first_row + n) of a block hold the rows of
  // tokens first_token.. written under `lineage`.
  bool matches(const BlockPayloadStore& store, uint32_t group, uint32_t slot, uint32_t first_row, uint32_t n,
               uint64_t lineage, uint64_t first_token) const {
    std::vector<uint8_t> got(row_bytes_[group]), want(row_bytes_[group]);
    for (uint32_t i = 0; i < n; ++i) {
      store.read_rows(group, slot, first_row + i, 1, got);
      fill(want, lineage, first_token + i, group);
      if (got != want) return false;
    }
    return true;
  }

 private:
  std::vector<uint64_t> row_bytes_;
  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<std::span<const uint8_t>> spans_;
};

}  // namespace kvrt::test
