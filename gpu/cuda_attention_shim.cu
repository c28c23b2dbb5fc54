// CUDA attention kernels over paged K/V pools (spec 0x0A, 0x0BA-0x0BD).
// Three kernels execute one AttentionWorkPlan (services/executor/attention_work_plan.hpp):
//
//   sequence_kernel  split-K paged decode: one thread block per (sequence
//                    item, K/V head); four warps walk the item's keys in
//                    groups and keep an online-softmax state per query head.
//   tile_kernel      chunk-first (cascade) execution: one thread block per
//                    (tile item, K/V head) loads each tile of 32 shared keys
//                    once into shared memory and multiplies it with every
//                    query row of the tile (up to 64 = sequences x G).
//   merge_kernel     the exact log-sum-exp merge of every sequence's partials;
//                    an empty partial (LSE = -inf) is skipped by a branch,
//                    never computed as exp(-inf - (-inf)) (0x0BA).
//
// Storage dtypes fp32/fp16/bf16 are widened exactly; scores, softmax state
// and outputs accumulate in fp32. Padding rows are never read: the plan's row
// runs name only committed rows (check_block_table / validate_for).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda_attention_shim.hpp"

namespace {

using kvrt::executor::PlanChunk;
using kvrt::executor::PlanRowRun;
using kvrt::executor::PlanSequenceItem;
using kvrt::executor::PlanTileItem;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kSequenceThreads = 128;  // 4 warps
constexpr int kTileThreads = 256;      // 8 warps
constexpr int kTileRows = 64;          // query rows per tile
constexpr int kTileKeys = 32;          // keys per shared-memory tile

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <int Bytes>
struct Vec;
template <>
struct Vec<4> {
  using type = uint32_t;
};
template <>
struct Vec<8> {
  using type = uint2;
};
template <>
struct Vec<16> {
  using type = uint4;
};

// N consecutive elements of dtype S as one vector register group.
template <class S, int N>
using RawRow = typename Vec<N * sizeof(S)>::type;

template <class S, int N>
__device__ __forceinline__ void widen_raw(const RawRow<S, N>& raw, float (&out)[N]) {
  const S* e = reinterpret_cast<const S*>(&raw);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = widen(e[i]);
}

// N consecutive elements at p (aligned to N * sizeof(S)), widened.
template <class S, int N>
__device__ __forceinline__ void load_widened(const S* p, float (&out)[N]) {
  widen_raw<S, N>(__ldg(reinterpret_cast<const RawRow<S, N>*>(p)), out);
}

// Element offset of chunk-relative key `key` of a chunk whose runs start at
// `run` (a run at or before the key): walks forward. Used where keys grow.
__device__ __forceinline__ uint64_t walk_to_row(const PlanRowRun* runs, uint32_t run_end, uint32_t& run, uint32_t key,
                                                const KvrtCudaKvLayer& L) {
  while (run + 1 < run_end && key >= runs[run].key_begin + runs[run].rows) ++run;
  const PlanRowRun r = runs[run];
  return uint64_t{r.slot} * L.slot_stride + uint64_t{r.first_row + (key - r.key_begin)} * L.token_stride;
}

// The run holding chunk-relative `key`: the last run with key_begin <= key.
__device__ __forceinline__ uint32_t find_run(const PlanRowRun* runs, uint32_t run_begin, uint32_t run_count,
                                             uint32_t key) {
  uint32_t lo = run_begin, hi = run_begin + run_count;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (runs[mid].key_begin <= key)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Element offset of `key` by binary search over a chunk's runs.
__device__ __forceinline__ uint64_t search_row(const PlanRowRun* runs, uint32_t run_begin, uint32_t run_count,
                                               uint32_t key, const KvrtCudaKvLayer& L) {
  const PlanRowRun r = runs[find_run(runs, run_begin, run_count, key)];
  return uint64_t{r.slot} * L.slot_stride + uint64_t{r.first_row + (key - r.key_begin)} * L.token_stride;
}

// ---------------------------------------------------------------------------
// Sequence-first split-K decode. G query heads share K/V head blockIdx.y.
// Each warp takes tiles of 32 keys (warp w: tiles w, w+4, ...):
//   scores   lane j reads the whole K row of key j in 16-byte loads (all of
//            them independent, so a warp has 32 rows in flight) and dots it
//            with the G query rows, which sit in shared memory (broadcast);
//   softmax  per head, warp-wide max and sum (the state is warp-uniform);
//   P.V      lanes split d; the tile's V rows are read coalesced, 8 at a time.
template <class S, int D, int G>
__global__ void __launch_bounds__(kSequenceThreads)
    sequence_kernel(KvrtCudaKvLayer L, KvrtCudaPlan P, const float* __restrict__ queries, float* __restrict__ partial_o,
                    float* __restrict__ partial_lse) {
  constexpr int EPL = D / 32;                            // P.V: elements per lane
  constexpr int VEC = 16 / static_cast<int>(sizeof(S));  // scores: elements per 16-byte load
  constexpr int CHUNKS = D / VEC;                        // loads per K row
  constexpr int BATCH = CHUNKS < 16 ? CHUNKS : 16;       // K loads issued together
  constexpr int kWarps = kSequenceThreads / 32;
  __shared__ __align__(16) float q_s[G][D];
  __shared__ uint64_t row_s[kWarps][32];
  __shared__ float p_s[kWarps][32][G];
  __shared__ float warp_m[kWarps][G], warp_l[kWarps][G];
  __shared__ float warp_acc[kWarps][G][D];

  const PlanSequenceItem item = P.sequence_items[blockIdx.x];
  const PlanChunk chunk = P.chunks[item.chunk];
  const uint32_t kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int idx = threadIdx.x; idx < G * D; idx += kSequenceThreads)
    q_s[idx / D][idx % D] = queries[(uint64_t{item.sequence} * L.q_heads + kvh * G) * D + idx] * L.scale;
  __syncthreads();
  const S* kbase = static_cast<const S*>(L.k) + uint64_t{kvh} * L.head_stride;
  const S* vbase = static_cast<const S*>(L.v) + uint64_t{kvh} * L.head_stride;

  float acc[G][EPL];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < EPL; ++i) acc[g][i] = 0.f;
  float m[G], l[G];  // warp-uniform online-softmax state per head
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
  }

  const uint32_t run_end = chunk.run_begin + chunk.run_count;
  const uint32_t tiles = (item.key_count + 31) / 32;
  // A partition starts deep inside a long chunk: search once, then walk.
  uint32_t cursor = find_run(P.runs, chunk.run_begin, chunk.run_count, item.key_begin + warp * 32);
  for (uint32_t ti = warp; ti < tiles; ti += kWarps) {
    const uint32_t first = ti * 32;
    const int valid = static_cast<int>(min(32u, item.key_count - first));
    uint32_t run = cursor;
    const bool mine = lane < valid;
    const uint64_t row = mine ? walk_to_row(P.runs, run_end, run, item.key_begin + first + lane, L) : 0;
    cursor = __shfl_sync(kFullMask, run, valid - 1);
    row_s[warp][lane] = row;

    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0.f;
    if (mine) {
      const RawRow<S, VEC>* krow = reinterpret_cast<const RawRow<S, VEC>*>(kbase + row);
#pragma unroll
      for (int c0 = 0; c0 < CHUNKS; c0 += BATCH) {
        RawRow<S, VEC> raw[BATCH];
#pragma unroll
        for (int c = 0; c < BATCH; ++c) raw[c] = __ldg(krow + c0 + c);
#pragma unroll
        for (int c = 0; c < BATCH; ++c) {
          float k[VEC];
          widen_raw<S, VEC>(raw[c], k);
#pragma unroll
          for (int g = 0; g < G; ++g)
#pragma unroll
            for (int e = 0; e < VEC; e += 4) {
              const float4 q = *reinterpret_cast<const float4*>(&q_s[g][(c0 + c) * VEC + e]);
              s[g] = fmaf(q.x, k[e], fmaf(q.y, k[e + 1], fmaf(q.z, k[e + 2], fmaf(q.w, k[e + 3], s[g]))));
            }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float score = mine ? s[g] : -INFINITY;
      float big = score;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) big = fmaxf(big, __shfl_xor_sync(kFullMask, big, o));
      const float m_new = fmaxf(m[g], big);  // finite: key 0 of the tile is valid
      const float p = mine ? expf(score - m_new) : 0.f;
      float p_sum = p;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) p_sum += __shfl_xor_sync(kFullMask, p_sum, o);
      const float alpha = m[g] == -INFINITY ? 0.f : expf(m[g] - m_new);
      l[g] = l[g] * alpha + p_sum;
      m[g] = m_new;
      p_s[warp][lane][g] = p;
#pragma unroll
      for (int i = 0; i < EPL; ++i) acc[g][i] *= alpha;
    }
    __syncwarp();
    for (int j0 = 0; j0 < valid; j0 += 8) {
      RawRow<S, EPL> raw[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j0 + j < valid)
          raw[j] = __ldg(reinterpret_cast<const RawRow<S, EPL>*>(vbase + row_s[warp][j0 + j] + lane * EPL));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j0 + j >= valid) break;
        float v[EPL];
        widen_raw<S, EPL>(raw[j], v);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float p = p_s[warp][j0 + j][g];
#pragma unroll
          for (int i = 0; i < EPL; ++i) acc[g][i] = fmaf(p, v[i], acc[g][i]);
        }
      }
    }
    __syncwarp();  // row_s and p_s are rewritten by the next tile
  }

  // Combine the four warps' states (a warp that saw no key keeps m = -inf
  // and is skipped by the branch below), normalise, write the partial.
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < G; ++g) {
      warp_m[warp][g] = m[g];
      warp_l[warp][g] = l[g];
    }
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < EPL; ++i) warp_acc[warp][g][lane * EPL + i] = acc[g][i];
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kSequenceThreads) {
    const int g = idx / D, x = idx % D;
    float big = -INFINITY;
    for (int w = 0; w < kWarps; ++w) big = fmaxf(big, warp_m[w][g]);
    float denom = 0.f, num = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      if (warp_m[w][g] == -INFINITY) continue;
      const float weight = expf(warp_m[w][g] - big);
      denom = fmaf(warp_l[w][g], weight, denom);
      num = fmaf(warp_acc[w][g][x], weight, num);
    }
    const uint64_t out_row = uint64_t{item.partial} * L.q_heads + kvh * G + g;
    partial_o[out_row * D + x] = num / denom;
    if (x == 0) partial_lse[out_row] = big + logf(denom);
  }
}

// ---------------------------------------------------------------------------
// Chunk-first tile: rows r = (sequence s = r / G, head g = r % G) of the
// item's sequences; keys in tiles of 32 through shared memory.
struct TileShared {
  static constexpr int kKeyPad = 4;  // K rows padded by 16 bytes: conflict-free float4 reads
  static __host__ __device__ constexpr size_t bytes(int d) {
    return sizeof(float) * (size_t{kTileRows} * d + size_t{kTileKeys} * (d + kKeyPad) + size_t{kTileKeys} * d +
                            size_t{kTileRows} * (kTileKeys + 1) + 3 * kTileRows) +
           sizeof(uint64_t) * 2 * kTileKeys;  // key rows, double-buffered
  }
};

template <class S, int D>
__global__ void __launch_bounds__(kTileThreads)
    tile_kernel(KvrtCudaKvLayer L, KvrtCudaPlan P, const float* __restrict__ queries, float* __restrict__ partial_o,
                float* __restrict__ partial_lse) {
  constexpr int KS = D + TileShared::kKeyPad;  // K row stride in shared memory [floats]
  constexpr int CC = D / 64;                   // float4 column groups per thread in P.V
  extern __shared__ __align__(16) unsigned char tile_smem[];
  float* qs = reinterpret_cast<float*>(tile_smem);  // [64][D]
  float* ks = qs + kTileRows * D;                   // [32][D + 4]
  float* vs = ks + kTileKeys * KS;                  // [32][D]
  float* ss = vs + kTileKeys * D;                   // [64][33]
  float* row_m = ss + kTileRows * (kTileKeys + 1);
  float* row_l = row_m + kTileRows;
  float* row_alpha = row_l + kTileRows;
  uint64_t* key_row = reinterpret_cast<uint64_t*>(row_alpha + kTileRows);

  const PlanTileItem item = P.tile_items[blockIdx.x];
  const PlanChunk chunk = P.chunks[item.chunk];
  const uint32_t kvh = blockIdx.y;
  const int G = static_cast<int>(L.q_heads / L.kv_heads);
  const int rows = static_cast<int>(item.sequence_count) * G;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;

  for (int idx = t; idx < kTileRows * D; idx += kTileThreads) {
    const int r = idx / D, x = idx % D;
    float value = 0.f;
    if (r < rows)
      value = queries[(uint64_t{item.sequence_begin + r / G} * L.q_heads + kvh * G + r % G) * D + x] * L.scale;
    qs[idx] = value;
  }
  if (t < kTileRows) {
    row_m[t] = -INFINITY;
    row_l[t] = 0.f;
  }

  const int rg = t / 16;  // rows 4rg .. 4rg+3
  const int kc = t % 16;  // keys kc and kc+16 (scores); columns 4kc + 64c (P.V)
  float acc[4][CC][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int c = 0; c < CC; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.f;

  constexpr int kVec = 16 / sizeof(S);  // elements per 16-byte load
  const S* kbase = static_cast<const S*>(L.k) + uint64_t{kvh} * L.head_stride;
  const S* vbase = static_cast<const S*>(L.v) + uint64_t{kvh} * L.head_stride;
  // The next tile's K/V rows are loaded into registers while this tile is
  // computed (a one-deep software pipeline), so the block does not wait on
  // device memory between tiles.
  constexpr int kLoads = kTileKeys * (D / kVec) / kTileThreads;  // 16-byte loads of K (and of V) per thread
  static_assert(kTileKeys * (D / kVec) % kTileThreads == 0, "a tile splits evenly over the threads");
  RawRow<S, kVec> k_next[kLoads], v_next[kLoads];
  auto resolve = [&](uint32_t k0, uint64_t* rows) {
    if (t < static_cast<int>(min(static_cast<uint32_t>(kTileKeys), item.key_count - k0)))
      rows[t] = search_row(P.runs, chunk.run_begin, chunk.run_count, item.key_begin + k0 + t, L);
  };
  auto fetch = [&](uint32_t k0, const uint64_t* rows) {
    const int n = static_cast<int>(min(static_cast<uint32_t>(kTileKeys), item.key_count - k0));
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int idx = t + l * kTileThreads, j = idx / (D / kVec), x = (idx % (D / kVec)) * kVec;
      if (j < n) {
        k_next[l] = __ldg(reinterpret_cast<const RawRow<S, kVec>*>(kbase + rows[j] + x));
        v_next[l] = __ldg(reinterpret_cast<const RawRow<S, kVec>*>(vbase + rows[j] + x));
      } else {
        k_next[l] = RawRow<S, kVec>{};  // zero rows: p = 0 there, never NaN x 0
        v_next[l] = RawRow<S, kVec>{};
      }
    }
  };
  resolve(0, key_row);
  __syncthreads();
  fetch(0, key_row);
  int buffer = 0;
  for (uint32_t k0 = 0; k0 < item.key_count; k0 += kTileKeys, buffer ^= 1) {
    const int valid = static_cast<int>(min(static_cast<uint32_t>(kTileKeys), item.key_count - k0));
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int idx = t + l * kTileThreads, j = idx / (D / kVec), x = (idx % (D / kVec)) * kVec;
      float kx[kVec], vx[kVec];
      widen_raw<S, kVec>(k_next[l], kx);
      widen_raw<S, kVec>(v_next[l], vx);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        ks[j * KS + x + e] = kx[e];
        vs[j * D + x + e] = vx[e];
      }
    }
    const bool more = k0 + kTileKeys < item.key_count;
    uint64_t* next_rows = key_row + (buffer ^ 1) * kTileKeys;
    if (more) resolve(k0 + kTileKeys, next_rows);
    __syncthreads();
    if (more) fetch(k0 + kTileKeys, next_rows);

    float sc[4][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};
#pragma unroll 4
    for (int x = 0; x < D; x += 4) {
      const float4 b0 = *reinterpret_cast<const float4*>(ks + kc * KS + x);
      const float4 b1 = *reinterpret_cast<const float4*>(ks + (kc + 16) * KS + x);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 a = *reinterpret_cast<const float4*>(qs + (4 * rg + i) * D + x);
        sc[i][0] = fmaf(a.x, b0.x, fmaf(a.y, b0.y, fmaf(a.z, b0.z, fmaf(a.w, b0.w, sc[i][0]))));
        sc[i][1] = fmaf(a.x, b1.x, fmaf(a.y, b1.y, fmaf(a.z, b1.z, fmaf(a.w, b1.w, sc[i][1]))));
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      ss[(4 * rg + i) * (kTileKeys + 1) + kc] = kc < valid ? sc[i][0] : -INFINITY;
      ss[(4 * rg + i) * (kTileKeys + 1) + kc + 16] = kc + 16 < valid ? sc[i][1] : -INFINITY;
    }
    __syncthreads();

    // Online softmax: warp w owns rows 8w .. 8w+7, lane = key.
    for (int rr = 0; rr < kTileRows / (kTileThreads / 32); ++rr) {
      const int r = warp * (kTileRows / (kTileThreads / 32)) + rr;
      const float s = ss[r * (kTileKeys + 1) + lane];
      float big = s;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) big = fmaxf(big, __shfl_xor_sync(kFullMask, big, o));
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, big);  // finite: key 0 of the tile is valid
      const float p = s == -INFINITY ? 0.f : expf(s - m_new);
      float p_sum = p;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) p_sum += __shfl_xor_sync(kFullMask, p_sum, o);
      ss[r * (kTileKeys + 1) + lane] = p;
      __syncwarp();
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.f : expf(m_old - m_new);
        row_alpha[r] = alpha;
        row_l[r] = row_l[r] * alpha + p_sum;
        row_m[r] = m_new;
      }
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = row_alpha[4 * rg + i];
#pragma unroll
      for (int c = 0; c < CC; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][c][e] *= a;
    }
    for (int j = 0; j < valid; ++j) {
      float4 v[CC];
#pragma unroll
      for (int c = 0; c < CC; ++c) v[c] = *reinterpret_cast<const float4*>(vs + j * D + 4 * kc + 64 * c);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float p = ss[(4 * rg + i) * (kTileKeys + 1) + j];
#pragma unroll
        for (int c = 0; c < CC; ++c) {
          acc[i][c][0] = fmaf(p, v[c].x, acc[i][c][0]);
          acc[i][c][1] = fmaf(p, v[c].y, acc[i][c][1]);
          acc[i][c][2] = fmaf(p, v[c].z, acc[i][c][2]);
          acc[i][c][3] = fmaf(p, v[c].w, acc[i][c][3]);
        }
      }
    }
    __syncthreads();  // the next tile overwrites ks, vs, ss and key_row
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * rg + i;
    if (r >= rows) continue;
    const uint64_t out_row = uint64_t{item.partial + r / G} * L.q_heads + kvh * G + r % G;
    const float inv = 1.f / row_l[r];
#pragma unroll
    for (int c = 0; c < CC; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) partial_o[out_row * D + 4 * kc + 64 * c + e] = acc[i][c][e] * inv;
    if (kc == 0) partial_lse[out_row] = row_m[r] + logf(row_l[r]);
  }
}

// ---------------------------------------------------------------------------
#include "cuda_mma_tile.cuh"

// ---------------------------------------------------------------------------
// Exact merge (0x0BA): O = sum_p e^(LSE_p - M) O_p / sum_p e^(LSE_p - M),
// LSE = M + log(sum_p e^(LSE_p - M)). One block of d threads per (sequence, head).
__global__ void merge_kernel(KvrtCudaPlan P, uint32_t q_heads, uint32_t d, const float* __restrict__ partial_o,
                             const float* __restrict__ partial_lse, float* __restrict__ outputs,
                             float* __restrict__ lse) {
  const uint32_t s = blockIdx.x / q_heads, h = blockIdx.x % q_heads, x = threadIdx.x;
  const uint32_t begin = P.merge_offsets[s], end = P.merge_offsets[s + 1];
  float big = -INFINITY;
  for (uint32_t i = begin; i < end; ++i) big = fmaxf(big, partial_lse[uint64_t{P.merge_partials[i]} * q_heads + h]);
  float denom = 0.f, num = 0.f;
  for (uint32_t i = begin; i < end; ++i) {
    const uint64_t row = uint64_t{P.merge_partials[i]} * q_heads + h;
    const float part_lse = partial_lse[row];
    if (part_lse == -INFINITY) continue;  // an empty partition is the identity
    const float weight = expf(part_lse - big);
    denom += weight;
    num = fmaf(weight, partial_o[row * d + x], num);
  }
  const uint64_t out = uint64_t{s} * q_heads + h;
  outputs[out * d + x] = num / denom;
  if (lse != nullptr && x == 0) lse[out] = big + logf(denom);
}

template <class S, int D, int G>
cudaError_t launch_sequences(const KvrtCudaKvLayer& L, const KvrtCudaPlan& P, const float* q, float* po, float* pl) {
  if (P.sequence_item_count == 0) return cudaSuccess;
  sequence_kernel<S, D, G><<<dim3(P.sequence_item_count, L.kv_heads), kSequenceThreads>>>(L, P, q, po, pl);
  return cudaGetLastError();
}

// One cudaFuncSetAttribute per kernel instantiation: the tiles need more than
// the default 48 KiB of dynamic shared memory.
template <auto Kernel>
cudaError_t allow_shared_bytes(size_t bytes) {
  static cudaError_t configured =
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  return configured;
}

// fp16 and bf16 pools run the tensor-core tile (cuda_mma_tile.cuh); fp32
// pools the CUDA-core tile above.
template <class S, int D>
cudaError_t launch_tiles(const KvrtCudaKvLayer& L, const KvrtCudaPlan& P, const float* q, float* po, float* pl) {
  if (P.tile_item_count == 0) return cudaSuccess;
  const dim3 grid(P.tile_item_count, L.kv_heads);
  if constexpr (sizeof(S) == 2) {
    const size_t smem = MmaTileShared::bytes<S>(D);
    if (const cudaError_t rc = allow_shared_bytes<mma_tile_kernel<S, D>>(smem); rc != cudaSuccess) return rc;
    mma_tile_kernel<S, D><<<grid, kMmaThreads, smem>>>(L, P, q, po, pl);
  } else {
    const size_t smem = TileShared::bytes(D);
    if (const cudaError_t rc = allow_shared_bytes<tile_kernel<S, D>>(smem); rc != cudaSuccess) return rc;
    tile_kernel<S, D><<<grid, kTileThreads, smem>>>(L, P, q, po, pl);
  }
  return cudaGetLastError();
}

template <class S, int D>
cudaError_t launch_for_width(const KvrtCudaKvLayer& L, const KvrtCudaPlan& P, const float* q, float* po, float* pl) {
  cudaError_t rc;
  switch (L.q_heads / L.kv_heads) {
    case 1:
      rc = launch_sequences<S, D, 1>(L, P, q, po, pl);
      break;
    case 2:
      rc = launch_sequences<S, D, 2>(L, P, q, po, pl);
      break;
    case 4:
      rc = launch_sequences<S, D, 4>(L, P, q, po, pl);
      break;
    case 8:
      rc = launch_sequences<S, D, 8>(L, P, q, po, pl);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  if (rc != cudaSuccess) return rc;
  return launch_tiles<S, D>(L, P, q, po, pl);
}

template <class S>
cudaError_t launch_for_dtype(const KvrtCudaKvLayer& L, const KvrtCudaPlan& P, const float* q, float* po, float* pl) {
  switch (L.head_dim) {
    case 64:
      return launch_for_width<S, 64>(L, P, q, po, pl);
    case 128:
      return launch_for_width<S, 128>(L, P, q, po, pl);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" {

int kvrt_cuda_attention(const KvrtCudaKvLayer* layer, const KvrtCudaPlan* plan, const float* queries, float* outputs,
                        float* lse, float* partial_o, float* partial_lse) {
  cudaError_t rc;
  switch (layer->dtype) {
    case 0:
      rc = launch_for_dtype<float>(*layer, *plan, queries, partial_o, partial_lse);
      break;
    case 1:
      rc = launch_for_dtype<__half>(*layer, *plan, queries, partial_o, partial_lse);
      break;
    case 2:
      rc = launch_for_dtype<__nv_bfloat16>(*layer, *plan, queries, partial_o, partial_lse);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  if (rc != cudaSuccess) return static_cast<int>(rc);
  if (plan->sequences == 0) return 0;
  merge_kernel<<<plan->sequences * layer->q_heads, layer->head_dim>>>(*plan, layer->q_heads, layer->head_dim, partial_o,
                                                                      partial_lse, outputs, lse);
  return static_cast<int>(cudaGetLastError());
}

int kvrt_cuda_synchronize(void) { return static_cast<int>(cudaDeviceSynchronize()); }

int kvrt_cuda_time(void (*launch)(void*), void* context, int iterations, float* milliseconds) {
  cudaEvent_t start, stop;
  cudaError_t rc = cudaEventCreate(&start);
  if (rc != cudaSuccess) return static_cast<int>(rc);
  rc = cudaEventCreate(&stop);
  if (rc == cudaSuccess) {
    launch(context);  // warm-up: first-launch costs, caches
    rc = cudaDeviceSynchronize();
    if (rc == cudaSuccess) rc = cudaEventRecord(start);
    for (int i = 0; rc == cudaSuccess && i < iterations; ++i) launch(context);
    if (rc == cudaSuccess) rc = cudaEventRecord(stop);
    if (rc == cudaSuccess) rc = cudaEventSynchronize(stop);
    if (rc == cudaSuccess) rc = cudaGetLastError();
    if (rc == cudaSuccess) rc = cudaEventElapsedTime(milliseconds, start, stop);
    cudaEventDestroy(stop);
  }
  cudaEventDestroy(start);
  return static_cast<int>(rc);
}

int kvrt_cuda_memcpy_d2d(void* dst, const void* src, size_t bytes) {
  return static_cast<int>(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

int kvrt_cuda_memset(void* dst, int value, size_t bytes) { return static_cast<int>(cudaMemset(dst, value, bytes)); }

int kvrt_cuda_ipc_export(void* device_ptr, unsigned char handle[64]) {
  cudaIpcMemHandle_t h;
  const cudaError_t rc = cudaIpcGetMemHandle(&h, device_ptr);
  if (rc != cudaSuccess) return static_cast<int>(rc);
  static_assert(sizeof(h) == 64, "cudaIpcMemHandle_t is 64 bytes");
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&h);
  for (int i = 0; i < 64; ++i) handle[i] = bytes[i];
  return 0;
}

int kvrt_cuda_ipc_import(const unsigned char handle[64], void** device_ptr) {
  cudaIpcMemHandle_t h;
  unsigned char* bytes = reinterpret_cast<unsigned char*>(&h);
  for (int i = 0; i < 64; ++i) bytes[i] = handle[i];
  return static_cast<int>(cudaIpcOpenMemHandle(device_ptr, h, cudaIpcMemLazyEnablePeerAccess));
}

int kvrt_cuda_ipc_close(void* device_ptr) { return static_cast<int>(cudaIpcCloseMemHandle(device_ptr)); }

}  // extern "C"

namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <class S>
__global__ void fill_uniform_kernel(S* dst, uint64_t elements, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < elements;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(mix64(seed + i) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    dst[i] = static_cast<S>(2.0f * u - 1.0f);
  }
}

__global__ void fma_probe_kernel(float* sink, int iterations) {
  float a[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) a[i] = threadIdx.x * 1e-7f + i;
  const float b = 0.999999f, c = 1e-7f;
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = fmaf(a[i], b, c);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += a[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

}  // namespace

extern "C" int kvrt_cuda_fill_uniform(void* dst, uint64_t elements, int dtype, uint64_t seed) {
  switch (dtype) {
    case 0:
      fill_uniform_kernel<float><<<1024, 256>>>(static_cast<float*>(dst), elements, seed);
      break;
    case 1:
      fill_uniform_kernel<__half><<<1024, 256>>>(static_cast<__half*>(dst), elements, seed);
      break;
    case 2:
      fill_uniform_kernel<__nv_bfloat16><<<1024, 256>>>(static_cast<__nv_bfloat16*>(dst), elements, seed);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  const cudaError_t rc = cudaGetLastError();
  return static_cast<int>(rc != cudaSuccess ? rc : cudaDeviceSynchronize());
}

extern "C" int kvrt_cuda_fma_probe(float* sink, int blocks, int iterations) {
  fma_probe_kernel<<<blocks, 256>>>(sink, iterations);
  return static_cast<int>(cudaGetLastError());
}
