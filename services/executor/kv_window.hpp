#pragma once
// Gathers one window of K/V rows of one K/V head for the inner kernels: row
// runs named by (slot, first row, rows) become row pointers of element type T.
// A run points straight into the pool when it can be read as T in place
// (T = float, fp32 storage, contiguous lanes: the bandwidth-bound decode path
// copies nothing); otherwise each row is widened into scratch owned by the
// window (fp16/bf16 storage, strided lanes, or the binary64 reference mode).
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
    for (uint32_t i = 0; i < rows; ++i, ++n_) {
      k_ptr_[n_] = row_of(view_->k, k_direct_, k_buf_, slot, first_row + i);
      v_ptr_[n_] = row_of(view_->v, v_direct_, v_buf_, slot, first_row + i);
    }
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
  const T* row_of(const KvTensorView& t, bool is_direct, std::vector<T>& buf, uint64_t slot, uint64_t row) {
    const std::byte* src = t.row(slot, row, head_);
    if (is_direct) return reinterpret_cast<const T*>(src);
    T* dst = buf.data() + uint64_t{n_} * t.head_dim;
    widen_scalars(t.dtype, src, static_cast<std::ptrdiff_t>(t.lane_stride), t.head_dim, dst);
    return dst;
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
