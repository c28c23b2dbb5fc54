#pragma once
// Shared by the [executor] suites: plain process-local pools filled with
// seeded random K/V rows, poisoned buffers, and the error metric the suites
// compare kernels with the FP64 reference by.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "services/executor/attention_args.hpp"
#include "services/executor/kv_view.hpp"
#include "services/executor/scalar_convert.hpp"

namespace kvrt::test {

using executor::KvTensorBytes;
using executor::PagedKvView;
using executor::PlainPoolShape;

// A [slot][token][head][lane] pool in process memory. Every element starts as
// NaN (in its storage dtype), so a kernel that reads a padding row, or a row
// it was never given, turns its output into NaN and fails the comparison.
class PlainPool {
 public:
  explicit PlainPool(const PlainPoolShape& shape)
      : shape_(shape),
        k_(shape.k_elements() * scalar_bytes(shape.k_dtype)),
        v_(shape.v_elements() * scalar_bytes(shape.v_dtype)) {
    poison(k_, shape.k_dtype, shape.k_elements());
    poison(v_, shape.v_dtype, shape.v_elements());
  }
  const PlainPoolShape& shape() const { return shape_; }
  PagedKvView view() const {
    auto v = executor::plain_kv_view(shape_, KvTensorBytes{k_.data(), k_.size(), shape_.k_dtype},
                                     KvTensorBytes{v_.data(), v_.size(), shape_.v_dtype});
    REQUIRE(v.ok());
    return *v;
  }
  // Writes row `row` of `slot` for every head from uniform values in [-1, 1).
  void fill_row(uint32_t slot, uint32_t row, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (uint32_t h = 0; h < shape_.kv_heads; ++h) {
      std::vector<float> kx(shape_.qk_dim), vx(shape_.v_dim);
      for (float& x : kx) x = u(rng);
      for (float& x : vx) x = u(rng);
      set_row(slot, row, h, kx, vx);
    }
  }
  void set_row(uint32_t slot, uint32_t row, uint32_t head, std::span<const float> k, std::span<const float> v) {
    const uint64_t token = uint64_t{slot} * shape_.block_tokens + row;
    executor::narrow_scalars(
        shape_.k_dtype, k.data(), k.size(),
        k_.data() + ((token * shape_.kv_heads + head) * shape_.qk_dim) * scalar_bytes(shape_.k_dtype));
    executor::narrow_scalars(
        shape_.v_dtype, v.data(), v.size(),
        v_.data() + ((token * shape_.kv_heads + head) * shape_.v_dim) * scalar_bytes(shape_.v_dtype));
  }
  // Fills rows [0, rows) of a slot.
  void fill_block(uint32_t slot, uint32_t rows, std::mt19937_64& rng) {
    for (uint32_t r = 0; r < rows; ++r) fill_row(slot, r, rng);
  }
  std::vector<std::byte>& k_bytes() { return k_; }
  std::vector<std::byte>& v_bytes() { return v_; }

 private:
  static void poison(std::vector<std::byte>& bytes, ScalarType dtype, uint64_t elements) {
    const std::vector<float> nan(elements, std::numeric_limits<float>::quiet_NaN());
    executor::narrow_scalars(dtype, nan.data(), elements, bytes.data());
  }
  PlainPoolShape shape_;
  std::vector<std::byte> k_, v_;
};

// Requests over one pool, with physically scattered blocks: each request's
// table takes slots from a seeded permutation, its visible rows are filled,
// and (when extra_valid) its tail block carries further committed rows, as a
// block shared with a longer request does (0x03G). Unfilled rows stay NaN.
struct PagedScenario {
  explicit PagedScenario(const PlainPoolShape& shape) : pool(shape) {}
  PlainPool pool;
  std::vector<std::vector<uint32_t>> slots, valid;
  std::vector<uint64_t> contexts;

  std::vector<executor::DecodeRequest> decode_requests() const {
    std::vector<executor::DecodeRequest> out(contexts.size());
    for (size_t r = 0; r < out.size(); ++r) out[r].table = executor::KvBlockTable{slots[r], valid[r], contexts[r]};
    return out;
  }
};

inline uint32_t blocks_for(const std::vector<uint64_t>& contexts, uint32_t block_tokens) {
  uint64_t n = 0;
  for (uint64_t c : contexts) n += (c + block_tokens - 1) / block_tokens;
  return static_cast<uint32_t>(n);
}

inline PagedScenario make_paged_scenario(PlainPoolShape shape, const std::vector<uint64_t>& contexts,
                                         std::mt19937_64& rng, bool extra_valid) {
  shape.slot_count = std::max(1u, blocks_for(contexts, shape.block_tokens) + 2);  // two never-used slots
  PagedScenario sc(shape);
  std::vector<uint32_t> order(shape.slot_count);
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  for (uint64_t ctx : contexts) {
    std::vector<uint32_t> slots, valid;
    for (uint64_t done = 0; done < ctx; done += shape.block_tokens) {
      const uint32_t slot = order[next++];
      const uint32_t visible = static_cast<uint32_t>(std::min<uint64_t>(shape.block_tokens, ctx - done));
      const uint32_t committed =
          extra_valid && visible < shape.block_tokens && (rng() & 1) ? shape.block_tokens : visible;
      sc.pool.fill_block(slot, committed, rng);
      slots.push_back(slot);
      valid.push_back(committed);
    }
    sc.slots.push_back(std::move(slots));
    sc.valid.push_back(std::move(valid));
    sc.contexts.push_back(ctx);
  }
  return sc;
}

template <class T>
std::vector<T> random_values(uint64_t n, std::mt19937_64& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<T> out(n);
  for (T& x : out) x = T(u(rng));
  return out;
}

template <class T>
std::vector<T> poisoned(uint64_t n) {
  return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
}

template <class T>
std::vector<double> widened(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Largest per-row error of `got` against `want`, relative to the row's
// infinity norm: max_rows max_x |got - want| / max_x |want|. A NaN anywhere
// (an unwritten or poisoned element) yields +inf.
template <class T>
double max_row_relative_error(std::span<const T> got, std::span<const double> want, uint64_t width) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (uint64_t r = 0; r * width < want.size(); ++r) {
    double err = 0, norm = 0;
    for (uint64_t x = 0; x < width; ++x) {
      const double g = double(got[r * width + x]), w = want[r * width + x];
      if (std::isnan(g) || std::isnan(w)) return std::numeric_limits<double>::infinity();
      err = std::max(err, std::abs(g - w));
      norm = std::max(norm, std::abs(w));
    }
    worst = std::max(worst, err / std::max(norm, 1e-300));
  }
  return worst;
}

// Largest absolute error (LSE values, binary64 agreement).
template <class T>
double max_abs_error(std::span<const T> got, std::span<const double> want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]);
    if (std::isnan(g) || std::isnan(want[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(g - want[i]));
  }
  return worst;
}

}  // namespace kvrt::test
