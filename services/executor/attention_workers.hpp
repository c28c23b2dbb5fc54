#pragma once
// Per-thread scratch for the two inner kernels, and the loop that feeds them
// row runs (internal to the executor). A schedule (decode, prefill, Hydragen,
// ChunkAttention) decides which query rows meet which row runs; a worker only
// gathers runs into windows and advances the rows' online-softmax states.
//
//   RowsWorker: the H_q query rows of one sequence, rows kernel per K/V head
//               (decode, private chunks)
//   TileWorker: many query rows of one K/V head, tile kernel
//               (prefill, shared chunks)
//
// Both keep their states in a PartialStates block that the schedule reads
// after finish(): finalise it (O = u / l) or hand it to a merge.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "services/executor/attention_kernels.hpp"
#include "services/executor/kv_window.hpp"
#include "services/executor/online_softmax.hpp"

namespace kvrt::executor {

// Key rows per rows-kernel step [rows]. One P = 16 block: every head of a
// window's rows is consumed before the next window starts, so a token-major
// block is read while its DRAM pages and cache sets are still open; on the
// development machine 16 beat 8, 32 and 64 (decode bench, 16K context).
inline constexpr uint32_t kRowsWindow = 16;
// Key rows per tile-kernel step [rows]: 64 rows x 2W query columns of scores
// stay in L1 between the two products.
inline constexpr uint32_t kTileWindow = 64;

// Every query head of one sequence against its rows, K/V head by K/V head
// within each window: a window's token rows are consumed whole (all heads)
// while they are hot, so a token-major pool ([token][head][lane] inside a
// block, as both shipped slot-major layouts and the mapper's tensors are) is
// streamed once, in address order, instead of once per head with a
// page-sized stride.
template <class T>
class RowsWorker {
 public:
  // q: [H_q][d_qk] of one sequence, scaled here by `scale`; query head j
  // reads K/V head j / G (G = H_q / H_kv of the view).
  void start(const PagedKvView& view, const T* q, uint32_t q_heads, T scale, uint64_t first_position) {
    if (view_ != &view) {
      window_.bind(view, 0, kRowsWindow);
      view_ = &view;
    }
    dk_ = view.k.head_dim;
    dv_ = view.v.head_dim;
    group_ = q_heads / view.kv_heads;
    scores_.resize(kernels::rows_scratch_elements(kRowsWindow, dv_));
    q_.resize(uint64_t{q_heads} * dk_);
    for (uint64_t i = 0; i < q_.size(); ++i) q_[i] = q[i] * scale;
    state_.reset(q_heads, dv_);
    filling_.clear();
    ready_.clear();
    filling_rows_ = 0;
    position_ = first_position;
  }
  void feed(uint64_t slot, uint64_t first_row, uint32_t rows) {
    while (rows > 0) {
      const uint32_t take = std::min(rows, kRowsWindow - filling_rows_);
      filling_.push_back(Run{slot, first_row, take});
      filling_rows_ += take;
      first_row += take;
      rows -= take;
      if (filling_rows_ == kRowsWindow) rotate();
    }
  }
  PartialStates<T>& finish() {
    rotate();
    rotate();
    return state_;
  }

 private:
  struct Run {
    uint64_t slot, first_row;
    uint32_t rows;
  };
  // One K/V head of lookahead: while the rows kernel computes head h of the
  // window filled before (ready_), it streams in head h + 1 of that window,
  // and during the last head, head 0 of the window just filled (filling_).
  // Streaming the same head of the next window instead would land every
  // requested line in the cache sets the computation is reading: in a
  // token-major block one head's rows are a power of two apart (H_kv d
  // lanes), so all of them share the same few L1 sets, and their next
  // window's rows share those sets again (single-thread decode at 8K-16K
  // was 14-20% slower that way on the development machine).
  void rotate() {
    compute(ready_, filling_);
    ready_.swap(filling_);
    filling_.clear();
    filling_rows_ = 0;
  }
  void compute(const std::vector<Run>& runs, const std::vector<Run>& next) {
    if (runs.empty()) return;
    const KvTensorView& k = view_->k;
    const KvTensorView& v = view_->v;
    // Streaming needs lane-contiguous storage no wider than T (the kernel
    // requests one line per 2W lanes); the kernel skips null rows.
    const bool stream = k.lane_stride == 1 && v.lane_stride == 1 && k.scalar_bytes() == v.scalar_bytes() &&
                        k.scalar_bytes() <= sizeof(T);
    uint32_t rows = 0;
    for (uint32_t h = 0; h < view_->kv_heads; ++h) {
      window_.set_head(h);
      window_.clear(position_);
      for (const Run& r : runs) window_.append(r.slot, r.first_row, r.rows);
      kernels::KvRows<T> kv = window_.rows();
      rows = kv.n;
      if (stream) {
        const bool last_head = h + 1 == view_->kv_heads;
        const uint32_t next_head = last_head ? 0 : h + 1;
        next_k_.clear();
        next_v_.clear();
        for (const Run& r : last_head ? next : runs)
          for (uint32_t i = 0; i < r.rows; ++i) {
            next_k_.push_back(k.row(r.slot, r.first_row + i, next_head));
            next_v_.push_back(v.row(r.slot, r.first_row + i, next_head));
          }
        kv.next_k = next_k_.data();
        kv.next_v = next_v_.data();
        kv.next_n = static_cast<uint32_t>(next_k_.size());
        kv.next_lane_bytes = k.scalar_bytes();
      }
      const uint64_t row0 = uint64_t{h} * group_;
      kernels::rows_attend(q_.data() + row0 * dk_, group_, dk_, dv_, kv,
                           kernels::RowsState<T>{state_.valid.data() + row0, state_.m.data() + row0,
                                                 state_.l.data() + row0, state_.u.data() + row0 * dv_},
                           scores_.data());
    }
    position_ += rows;
  }
  const PagedKvView* view_ = nullptr;
  KvWindow<T> window_;
  std::vector<Run> filling_, ready_;
  std::vector<const std::byte*> next_k_, next_v_;
  std::vector<T> q_, scores_;
  PartialStates<T> state_;
  uint32_t group_ = 0, dk_ = 0, dv_ = 0, filling_rows_ = 0;
  uint64_t position_ = 0;
};

template <class T>
class TileWorker {
 public:
  // q_rows[r] points at query row r ([d_qk], unscaled). key_limit (null: no
  // mask) masks key position p from row r when p >= key_limit[r].
  void start(const PagedKvView& view, uint32_t kv_head, const T* const* q_rows, uint32_t rows, T scale,
             const uint64_t* key_limit, uint64_t first_position) {
    if (view_ != &view) {
      window_.bind(view, kv_head, kTileWindow);
      view_ = &view;
    }
    dk_ = view.k.head_dim;
    dv_ = view.v.head_dim;
    rows_ = rows;
    m_pad_ = kernels::tile_row_pad<T>(rows);
    qt_.resize(uint64_t{dk_} * m_pad_);
    kernels::pack_transposed_queries(q_rows, rows, m_pad_, dk_, scale, qt_.data());
    scratch_.resize(kernels::tile_scratch_elements<T>(kTileWindow, m_pad_));
    limits_.assign(key_limit == nullptr ? 0 : rows, 0);
    for (uint32_t r = 0; r < limits_.size(); ++r) limits_[r] = key_limit[r];
    state_.reset(rows, dv_);
    window_.set_head(kv_head);
    window_.clear(first_position);
  }
  void feed(uint64_t slot, uint64_t first_row, uint32_t rows) {
    window_.feed(slot, first_row, rows, [&](const kernels::KvRows<T>& kv) { flush(kv); });
  }
  PartialStates<T>& finish() {
    window_.finish([&](const kernels::KvRows<T>& kv) { flush(kv); });
    return state_;
  }

 private:
  void flush(const kernels::KvRows<T>& kv) {
    kernels::tile_attend(qt_.data(), rows_, m_pad_, dk_, dv_, kv, limits_.empty() ? nullptr : limits_.data(),
                         kernels::RowsState<T>{state_.valid.data(), state_.m.data(), state_.l.data(), state_.u.data()},
                         scratch_.data());
  }
  const PagedKvView* view_ = nullptr;
  KvWindow<T> window_;
  std::vector<T> qt_, scratch_;
  std::vector<uint64_t> limits_;
  PartialStates<T> state_;
  uint32_t rows_ = 0, m_pad_ = 0, dk_ = 0, dv_ = 0;
};

}  // namespace kvrt::executor
