#pragma once
// The naive baseline of `kvrt bench allocator`: a rectangular per-request
// reservation allocator (spec 0x00A, 0x02B). Each request reserves T_max
// contiguous rows of one arena, first fit over a coalescing free-extent map;
// append only bumps a length; fork reserves a second full range (no sharing);
// release returns the extent. It keeps no refcounts, generations, receipts or
// digests, so it is the cheapest bookkeeping a runtime can do.
#include <cstdint>
#include <map>
#include <vector>

namespace kvrt::bench {

class RectangularReservationAllocator {
 public:
  explicit RectangularReservationAllocator(uint64_t arena_rows) { free_[0] = arena_rows; }

  // Returns a request index, or -1 when no contiguous extent fits.
  int64_t reserve(uint32_t t_max, uint32_t rows) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < t_max) continue;
      const uint64_t offset = it->first;
      const uint64_t rest = it->second - t_max;
      free_.erase(it);
      if (rest != 0) free_[offset + t_max] = rest;
      uint32_t index;
      if (!free_slots_.empty()) {
        index = free_slots_.back();
        free_slots_.pop_back();
      } else {
        index = static_cast<uint32_t>(requests_.size());
        requests_.emplace_back();
      }
      requests_[index] = Reservation{offset, t_max, rows, true};
      return index;
    }
    return -1;
  }

  bool append(uint32_t index) {
    Reservation& r = requests_[index];
    if (r.length == r.t_max) return false;  // would need relocation
    ++r.length;
    return true;
  }

  int64_t fork(uint32_t index) { return reserve(requests_[index].t_max, requests_[index].length); }

  void release(uint32_t index) {
    Reservation& r = requests_[index];
    uint64_t offset = r.offset, length = r.t_max;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + length) {
      length += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        length += prev->second;
        free_.erase(prev);
      }
    }
    free_[offset] = length;
    r.live = false;
    free_slots_.push_back(index);
  }

  static constexpr uint64_t metadata_bytes_per_request() { return sizeof(Reservation); }

 private:
  struct Reservation {
    uint64_t offset = 0;
    uint32_t t_max = 0;
    uint32_t length = 0;
    bool live = false;
  };
  std::map<uint64_t, uint64_t> free_;
  std::vector<Reservation> requests_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace kvrt::bench
