#pragma once
// The executor's two inner kernels, shared by every schedule (decode, prefill,
// Hydragen, ChunkAttention). Both advance the online-softmax state of a set of
// query rows over one window of key rows (0x0A's online_attention_update):
//
//   rows kernel  (rows_attend): a few query rows, e.g. the G heads of one
//                request that share a K/V head (GQA), as in ordinary paged
//                decode: matrix-vector shaped, bandwidth-bound.
//   tile kernel  (tile_attend): many query rows against the same keys, as when
//                Hydragen batches every query a shared chunk covers, or a
//                prefill chunk: matrix-matrix shaped, compute-bound. It can
//                mask keys causally per row.
//
// State per query row r: valid[r] keys consumed, running maximum m[r],
// denominator l[r], unnormalised output acc[r][0..d_v). An empty row
// (valid = 0) takes the window's maximum as its first m without any rescale;
// a non-empty row rescales by e^(m_old - m_new) only when the maximum grows.
//
// Queries arrive pre-scaled by 1/sqrt(d_qk). Windows arrive as row pointers
// of element type T (widened, or pointing straight into an fp32 pool), so
// the kernels never see dtypes, strides or block tables.
#include <cstddef>
#include <cstdint>

namespace kvrt::executor::kernels {

// One window of key/value rows; row i has position first_position + i.
//
// Optionally, the source rows the caller will hand over next, as stored in
// the pool (RowsWorker: the next K/V head of the same tokens): the rows
// kernel requests their cache lines a few at a time while it computes this
// window, one line per row and pass over the rows, so memory works ahead of
// the arithmetic without a burst of requests that would stall it. next_*
// rows must be contiguous in lanes, of a type no wider than T.
template <class T>
struct KvRows {
  const T* const* k = nullptr;  // [n] rows of d_qk lanes
  const T* const* v = nullptr;  // [n] rows of d_v lanes
  uint32_t n = 0;
  uint64_t first_position = 0;               // [tokens]
  const std::byte* const* next_k = nullptr;  // [next_n] first byte of each next K row, or null
  const std::byte* const* next_v = nullptr;  // [next_n] first byte of each next V row
  uint32_t next_n = 0;
  uint32_t next_lane_bytes = 0;  // bytes per lane of the next rows' storage (4 fp32, 2 fp16/bf16)
};

template <class T>
struct RowsState {
  uint64_t* valid = nullptr;  // [rows]
  T* m = nullptr;             // [rows]
  T* l = nullptr;             // [rows]
  T* acc = nullptr;           // [rows][d_v]
};

// Rows kernel: q is [rows][d_qk] contiguous; scores is scratch of
// rows_scratch_elements(n, d_v) elements.
void rows_attend(const float* q, uint32_t rows, uint32_t qk_dim, uint32_t v_dim, const KvRows<float>& kv,
                 RowsState<float> state, float* scores);
void rows_attend(const double* q, uint32_t rows, uint32_t qk_dim, uint32_t v_dim, const KvRows<double>& kv,
                 RowsState<double> state, double* scores);

// Tile kernel: qt is the queries transposed and zero-padded, [d_qk][m_pad]
// with m_pad = tile_row_pad<T>(rows) (pack_transposed_queries writes it).
// key_limit, when non-null, masks key position p for row r when
// p >= key_limit[r] (causal prefill: limit = query position + 1).
// scratch holds n * m_pad scores plus 2 * m_pad lanes.
void tile_attend(const float* qt, uint32_t rows, uint32_t m_pad, uint32_t qk_dim, uint32_t v_dim,
                 const KvRows<float>& kv, const uint64_t* key_limit, RowsState<float> state, float* scratch);
void tile_attend(const double* qt, uint32_t rows, uint32_t m_pad, uint32_t qk_dim, uint32_t v_dim,
                 const KvRows<double>& kv, const uint64_t* key_limit, RowsState<double> state, double* scratch);

constexpr uint64_t rows_scratch_elements(uint32_t window_rows, uint32_t v_dim) {
  return 4ull * window_rows + 4ull * v_dim;  // token-major scores of 4 rows, a padded group's outputs
}

// Rows rounded up to whole vectors of T (8 floats, 4 doubles): the tile
// kernel takes columns two vectors at a time and an odd last vector alone, so
// a few rows (decode's G per K/V head) pad to one vector, not two.
template <class T>
constexpr uint32_t tile_row_pad(uint32_t rows) {
  constexpr uint32_t width = 32 / sizeof(T);
  return (rows + width - 1) / width * width;
}
template <class T>
constexpr uint64_t tile_scratch_elements(uint32_t window_rows, uint32_t m_pad) {
  return uint64_t{window_rows} * m_pad + 2ull * m_pad;
}

// qt[x][r] = q_rows[r][x] * scale for r < rows; zero for rows <= r < m_pad.
template <class T>
void pack_transposed_queries(const T* const* q_rows, uint32_t rows, uint32_t m_pad, uint32_t qk_dim, T scale, T* qt) {
  for (uint32_t x = 0; x < qk_dim; ++x) {
    T* out = qt + uint64_t{x} * m_pad;
    for (uint32_t r = 0; r < rows; ++r) out[r] = q_rows[r][x] * scale;
    for (uint32_t r = rows; r < m_pad; ++r) out[r] = T(0);
  }
}

}  // namespace kvrt::executor::kernels
