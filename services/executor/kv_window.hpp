#pragma once
// Gathers one window of K/V rows of one K/V head for the inner kernels: row
// runs named by (slot, first row, rows) become row pointers of element type T.
// A run points straight into the pool when it can be read as T in place
// (T = float, fp32 storage, contiguous lanes: the bandwidth-bound decode path
// copies nothing); otherwise the run is widened into scratch owned by the
// window (fp16/bf16 storage, strided lanes, or the binary64 reference mode),
// one widen_rows() call per run and tensor: a run is one kernel block's rows
// of one head, P_k rows token_stride apart, so the conversion's vector loop
// and dispatch are paid per block, not per row. Widening is exact, so a
// window of fp16 rows holds the same binary32 values a window over fp32
// storage of those values would point at.
// One window per worker thread; append() never allocates after bind().
#include <cstdint>
#include <type_traits>
#include <vector>

#include "services/common/assert.hpp"
#include "services/executor/attention_kernels.hpp"
#include "services/executor/kv_view.hpp"
#include "services/executor/scalar_convert.hpp"

namespace kvrt::executor {

template <class T>
class KvWindow {
 public:
  // Prepares for rows of `kv_head` of `view`, at most `capacity` rows per window.
  void bind(const PagedKvView& view, uint32_t kv_head, uint32_t capacity) {
    view_ = &view;
    head_ = kv_head;
    capacity_ = capacity;
    k_direct_ = direct(view.k);
    v_direct_ = direct(view.v);
    k_ptr_.resize(capacity);
    v_ptr_.resize(capacity);
    if (!k_direct_) k_buf_.resize(uint64_t{capacity} * view.k.head_dim);
    if (!v_direct_) v_buf_.resize(uint64_t{capacity} * view.v.head_dim);
    n_ = 0;
  }
  void set_head(uint32_t kv_head) { head_ = kv_head; }
  void clear(uint64_t first_position) {
    n_ = 0;
    first_position_ = first_position;
  }
  uint32_t size() const { return n_; }
  uint32_t room() const { return capacity_ - n_; }

  // Appends rows [first_row, first_row + rows) of slot `slot`; rows <= room().
  void append(uint64_t slot, uint64_t first_row, uint32_t rows) {
    KVRT_ASSERT(rows <= room(), "KvWindow::append past capacity");
    run_of(view_->k, k_direct_, k_buf_, k_ptr_, slot, first_row, rows);
    run_of(view_->v, v_direct_, v_buf_, v_ptr_, slot, first_row, rows);
    n_ += rows;
  }
  // Appends a run of any length, calling flush(rows()) whenever the window
  // fills and starting the next window at the following position.
  template <class Flush>
  void feed(uint64_t slot, uint64_t first_row, uint32_t rows, Flush&& flush) {
    while (rows > 0) {
      const uint32_t take = rows < room() ? rows : room();
      append(slot, first_row, take);
      first_row += take;
      rows -= take;
      if (room() == 0) finish(flush);
    }
  }
  // Flushes a partial window, if any.
  template <class Flush>
  void finish(Flush&& flush) {
    if (n_ == 0) return;
    flush(this->rows());
    clear(first_position_ + n_);
  }
  kernels::KvRows<T> rows() const { return kernels::KvRows<T>{k_ptr_.data(), v_ptr_.data(), n_, first_position_}; }

 private:
  static bool direct(const KvTensorView& t) {
    return std::is_same_v<T, float> && t.dtype == ScalarType::fp32 && t.lane_stride == 1;
  }
  // Row pointers [n_, n_ + rows) of one tensor for rows first_row.. of `slot`.
  void run_of(const KvTensorView& t, bool is_direct, std::vector<T>& buf, std::vector<const T*>& ptr, uint64_t slot,
              uint64_t first_row, uint32_t rows) {
    const std::byte* src = t.row(slot, first_row, head_);
    const uint64_t row_bytes = t.token_stride * t.scalar_bytes();
    if (is_direct) {
      for (uint32_t i = 0; i < rows; ++i) ptr[n_ + i] = reinterpret_cast<const T*>(src + i * row_bytes);
      return;
    }
    T* dst = buf.data() + uint64_t{n_} * t.head_dim;
    widen_rows(t.dtype, src, static_cast<std::ptrdiff_t>(t.token_stride), static_cast<std::ptrdiff_t>(t.lane_stride),
               rows, t.head_dim, dst);
    for (uint32_t i = 0; i < rows; ++i) ptr[n_ + i] = dst + uint64_t{i} * t.head_dim;
  }

  const PagedKvView* view_ = nullptr;
  uint32_t head_ = 0;
  uint32_t capacity_ = 0;
  uint32_t n_ = 0;
  uint64_t first_position_ = 0;
  bool k_direct_ = false;
  bool v_direct_ = false;
  std::vector<const T*> k_ptr_, v_ptr_;
  std::vector<T> k_buf_, v_buf_;
};

}  // namespace kvrt::executor
