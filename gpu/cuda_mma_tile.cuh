// Chunk-first (cascade) tiles on the tensor cores, for fp16 and bf16 pools.
// Included by cuda_attention_shim.cu inside its anonymous namespace (it uses
// that file's helpers: find_run, search_row, kFullMask, PlanTileItem, ...).
//
// Exactness. The tensor cores multiply 16-bit inputs exactly and accumulate in
// fp32, but queries and probabilities are fp32. Each is split into 16-bit
// terms whose sum reproduces it to about 2^-22 (fp16: hi + lo; bf16: hi +
// mid + lo), and one MMA runs per term: the stored K and V rows are 16-bit
// already, so Q.K^T and P.V lose nothing beyond fp32 accumulation and the
// split's residual, within the executor's 1e-5 bound (tests/gpu_attention_checks.cpp).
//
// Shape. 4 warps; warp w owns query rows 16w .. 16w+15 of the tile (64 rows
// = tile_sequences x G). Keys come in tiles of 32 through a double-buffered
// shared-memory ring filled by cp.async, so the next tile's rows are in
// flight while this one is multiplied. Layouts follow mma.m16n8k16: lane =
// 4g + t holds rows g and g+8, columns 2t and 2t+1 of each 8-wide n-tile.

template <class S>
struct MmaTerms;
template <>
struct MmaTerms<__half> {
  static constexpr int kCount = 2;
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaTerms<__nv_bfloat16> {
  static constexpr int kCount = 3;
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// x = sum of kCount 16-bit terms, each the rounding of what the previous left.
template <class S>
__device__ __forceinline__ void split_terms(float x, S (&terms)[MmaTerms<S>::kCount]) {
#pragma unroll
  for (int i = 0; i < MmaTerms<S>::kCount; ++i) {
    terms[i] = MmaTerms<S>::from_float(x);
    x -= MmaTerms<S>::to_float(terms[i]);
  }
}

template <class S>
__device__ __forceinline__ uint32_t pack_pair(S lo_col, S hi_col) {
  const uint16_t a = *reinterpret_cast<const uint16_t*>(&lo_col), b = *reinterpret_cast<const uint16_t*>(&hi_col);
  return uint32_t{a} | (uint32_t{b} << 16);
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, zero-filled when !valid (src-size 0).
__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

constexpr int kMmaThreads = 128;  // 4 warps x 16 query rows
constexpr int kMmaKeys = 32;      // keys per shared-memory tile

struct MmaTileShared {
  template <class S>
  static __host__ __device__ constexpr size_t bytes(int d) {
    // Q terms [kCount][64][d+8], K and V ring [2][2][32][d+8], key rows [2][32].
    return sizeof(S) * (size_t{MmaTerms<S>::kCount} * kTileRows * (d + 8) + size_t{2} * 2 * kMmaKeys * (d + 8)) +
           sizeof(uint64_t) * 2 * kMmaKeys;
  }
};

template <class S, int D>
__global__ void __launch_bounds__(kMmaThreads)
    mma_tile_kernel(KvrtCudaKvLayer L, KvrtCudaPlan P, const float* __restrict__ queries, float* __restrict__ partial_o,
                    float* __restrict__ partial_lse) {
  using Terms = MmaTerms<S>;
  constexpr int T = Terms::kCount;
  constexpr int LD = D + 8;         // shared row stride [elements]: conflict-free fragment loads
  constexpr int NT = kMmaKeys / 8;  // n-tiles of S per key tile
  constexpr int OT = D / 8;         // n-tiles of O
  constexpr int CPR = D * static_cast<int>(sizeof(S)) / 16;  // 16-byte copies per row
  extern __shared__ __align__(16) unsigned char mma_smem[];
  S* qs = reinterpret_cast<S*>(mma_smem);                                          // [T][64][LD]
  S* ring = qs + T * kTileRows * LD;                                               // [2][K,V][32][LD]
  uint64_t* key_rows = reinterpret_cast<uint64_t*>(ring + 2 * 2 * kMmaKeys * LD);  // [2][32]

  const PlanTileItem item = P.tile_items[blockIdx.x];
  const PlanChunk chunk = P.chunks[item.chunk];
  const uint32_t kvh = blockIdx.y;
  const int G = static_cast<int>(L.q_heads / L.kv_heads);
  const int rows = static_cast<int>(item.sequence_count) * G;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const S* kbase = static_cast<const S*>(L.k) + uint64_t{kvh} * L.head_stride;
  const S* vbase = static_cast<const S*>(L.v) + uint64_t{kvh} * L.head_stride;

  for (int idx = tid; idx < kTileRows * D; idx += kMmaThreads) {
    const int r = idx / D, x = idx % D;
    const float q =
        r < rows ? queries[(uint64_t{item.sequence_begin + r / G} * L.q_heads + kvh * G + r % G) * D + x] * L.scale
                 : 0.f;
    S parts[T];
    split_terms<S>(q, parts);
#pragma unroll
    for (int i = 0; i < T; ++i) qs[(i * kTileRows + r) * LD + x] = parts[i];
  }
  auto resolve = [&](uint32_t k0, int buffer) {
    if (tid < static_cast<int>(min(static_cast<uint32_t>(kMmaKeys), item.key_count - k0)))
      key_rows[buffer * kMmaKeys + tid] =
          search_row(P.runs, chunk.run_begin, chunk.run_count, item.key_begin + k0 + tid, L);
  };
  auto issue = [&](uint32_t k0, int buffer) {
    const int n = static_cast<int>(min(static_cast<uint32_t>(kMmaKeys), item.key_count - k0));
    S* ks = ring + (buffer * 2) * kMmaKeys * LD;
    S* vs = ks + kMmaKeys * LD;
    for (int idx = tid; idx < kMmaKeys * CPR; idx += kMmaThreads) {
      const int j = idx / CPR, c = idx % CPR;
      const bool valid = j < n;
      const uint64_t row = valid ? key_rows[buffer * kMmaKeys + j] : 0;  // zero-filled past the partition
      copy_async_16(ks + j * LD + c * (16 / sizeof(S)), kbase + row + c * (16 / sizeof(S)), valid);
      copy_async_16(vs + j * LD + c * (16 / sizeof(S)), vbase + row + c * (16 / sizeof(S)), valid);
    }
    copy_async_commit();
  };

  float o[OT][4];
#pragma unroll
  for (int n = 0; n < OT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {0.f, 0.f};  // rows g and g+8
  const bool active = warp * 16 < rows;                            // a warp of padding rows only keeps the barriers

  resolve(0, 0);
  __syncthreads();
  issue(0, 0);
  int buffer = 0;
  for (uint32_t k0 = 0; k0 < item.key_count; k0 += kMmaKeys, buffer ^= 1) {
    const int valid = static_cast<int>(min(static_cast<uint32_t>(kMmaKeys), item.key_count - k0));
    const bool more = k0 + kMmaKeys < item.key_count;
    if (more) resolve(k0 + kMmaKeys, buffer ^ 1);
    __syncthreads();  // the other ring slot is free, its key rows are visible
    if (more) {
      issue(k0 + kMmaKeys, buffer ^ 1);
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // this tile's K and V are in shared memory
    if (!active) continue;
    const S* ks = ring + (buffer * 2) * kMmaKeys * LD;
    const S* vs = ks + kMmaKeys * LD;

    float s[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[T][4];
#pragma unroll
      for (int i = 0; i < T; ++i) {
        const S* q = qs + (i * kTileRows + warp * 16) * LD + kk * 16 + 2 * t;
        a[i][0] = *reinterpret_cast<const uint32_t*>(q + g * LD);
        a[i][1] = *reinterpret_cast<const uint32_t*>(q + (g + 8) * LD);
        a[i][2] = *reinterpret_cast<const uint32_t*>(q + g * LD + 8);
        a[i][3] = *reinterpret_cast<const uint32_t*>(q + (g + 8) * LD + 8);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const S* k = ks + (j * 8 + g) * LD + kk * 16 + 2 * t;
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(k);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(k + 8);
#pragma unroll
        for (int i = 0; i < T; ++i) Terms::mma(s[j], a[i], b0, b1);
      }
    }

    // Online softmax on the fragments: this thread's two rows, quad-reduced.
    float p[NT][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float big = -INFINITY;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int key = j * 8 + 2 * t + c;
          if (key >= valid) s[j][2 * half + c] = -INFINITY;
          big = fmaxf(big, s[j][2 * half + c]);
        }
      big = fmaxf(big, __shfl_xor_sync(kFullMask, big, 1));
      big = fmaxf(big, __shfl_xor_sync(kFullMask, big, 2));
      const float m_new = fmaxf(m_row[half], big);  // finite: key 0 of the tile is valid
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float x = s[j][2 * half + c];
          p[j][2 * half + c] = x == -INFINITY ? 0.f : expf(x - m_new);
          sum += p[j][2 * half + c];
        }
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      const float alpha = m_row[half] == -INFINITY ? 0.f : expf(m_row[half] - m_new);
      l_row[half] = l_row[half] * alpha + sum;
      m_row[half] = m_new;
#pragma unroll
      for (int n = 0; n < OT; ++n) {
        o[n][2 * half] *= alpha;
        o[n][2 * half + 1] *= alpha;
      }
    }

    // O += P.V: P's accumulator layout is already the A-fragment layout.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      uint32_t a[T][4];
      {
        S p00[T], p01[T], p10[T], p11[T], p20[T], p21[T], p30[T], p31[T];
        split_terms<S>(p[2 * kk][0], p00);
        split_terms<S>(p[2 * kk][1], p01);
        split_terms<S>(p[2 * kk][2], p10);
        split_terms<S>(p[2 * kk][3], p11);
        split_terms<S>(p[2 * kk + 1][0], p20);
        split_terms<S>(p[2 * kk + 1][1], p21);
        split_terms<S>(p[2 * kk + 1][2], p30);
        split_terms<S>(p[2 * kk + 1][3], p31);
#pragma unroll
        for (int i = 0; i < T; ++i) {
          a[i][0] = pack_pair<S>(p00[i], p01[i]);  // row g,   keys 16kk + 2t, +1
          a[i][1] = pack_pair<S>(p10[i], p11[i]);  // row g+8, keys 16kk + 2t, +1
          a[i][2] = pack_pair<S>(p20[i], p21[i]);  // row g,   keys 16kk + 8 + 2t, +1
          a[i][3] = pack_pair<S>(p30[i], p31[i]);  // row g+8, keys 16kk + 8 + 2t, +1
        }
      }
      const int vrow = kk * 16 + (lane % 8) + 8 * ((lane / 8) & 1);
#pragma unroll
      for (int n2 = 0; n2 < D / 16; ++n2) {
        uint32_t b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(shared_address(vs + vrow * LD + n2 * 16 + 8 * (lane / 16))));
#pragma unroll
        for (int i = 0; i < T; ++i) {
          Terms::mma(o[2 * n2], a[i], b0, b1);
          Terms::mma(o[2 * n2 + 1], a[i], b2, b3);
        }
      }
    }
  }

  if (!active) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + g + 8 * half;
    if (r >= rows) continue;
    const uint64_t out_row = uint64_t{item.partial + r / G} * L.q_heads + kvh * G + r % G;
    const float inv = 1.f / l_row[half];
#pragma unroll
    for (int n = 0; n < OT; ++n) {
      partial_o[out_row * D + n * 8 + 2 * t] = o[n][2 * half] * inv;
      partial_o[out_row * D + n * 8 + 2 * t + 1] = o[n][2 * half + 1] * inv;
    }
    if (t == 0) partial_lse[out_row] = m_row[half] + logf(l_row[half]);
  }
}
