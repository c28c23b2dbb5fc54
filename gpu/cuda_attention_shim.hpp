#pragma once
// Plain C entry points of the CUDA attention kernels (cuda_attention_shim.cu).
// No CUDA type appears here, so g++ translation units include it; the C++
// launchers with validation and typed errors are gpu/cuda_attention.hpp.
// Return values are cudaError_t codes as int (0 = success), named by
// kvrt_cuda_error_string (cuda_runtime_shim.hpp).
#include <cstdint>

#include "services/executor/attention_work_items.hpp"

extern "C" {

// One layer of one cache group's K and V pools in device memory: element
// (slot s, row o, head h, lane x) at base + (s*slot_stride + o*token_stride +
// h*head_stride + x) elements. K and V share dtype, strides and width; lanes
// are contiguous. The launcher checks all of that and the alignment.
struct KvrtCudaKvLayer {
  const void* k;
  const void* v;
  int dtype;              // 0 fp32, 1 fp16, 2 bf16
  uint32_t head_dim;      // d = d_qk = d_v [lanes]: 64 or 128
  uint64_t slot_stride;   // [elements]
  uint64_t token_stride;  // [elements]
  uint64_t head_stride;   // [elements]
  uint32_t kv_heads;      // H_kv
  uint32_t q_heads;       // H_q; G = H_q / H_kv in {1, 2, 4, 8}
  float scale;            // 1 / sqrt(d_qk)
};

// An uploaded AttentionWorkPlan: device pointers into one buffer.
struct KvrtCudaPlan {
  const kvrt::executor::PlanRowRun* runs;
  const kvrt::executor::PlanChunk* chunks;
  const kvrt::executor::PlanSequenceItem* sequence_items;
  uint32_t sequence_item_count;
  const kvrt::executor::PlanTileItem* tile_items;
  uint32_t tile_item_count;
  const uint32_t* merge_offsets;  // [sequences + 1]
  const uint32_t* merge_partials;
  uint32_t sequences;
  uint32_t tile_rows;  // tile_sequences x G, <= 64
};

// Launches the sequence-first kernel, the chunk-first (tile) kernel and the
// exact LSE merge on the default stream; does not synchronise.
// queries [sequences][H_q][d], outputs [sequences][H_q][d], lse
// [sequences][H_q] or null; partial_o [partials][H_q][d], partial_lse
// [partials][H_q] are scratch.
int kvrt_cuda_attention(const struct KvrtCudaKvLayer* layer, const struct KvrtCudaPlan* plan, const float* queries,
                        float* outputs, float* lse, float* partial_o, float* partial_lse);

int kvrt_cuda_synchronize(void);
// Runs launch(context) `iterations` times between two CUDA events on the
// default stream after one untimed warm-up call; *milliseconds is the total.
int kvrt_cuda_time(void (*launch)(void*), void* context, int iterations, float* milliseconds);
int kvrt_cuda_memcpy_d2d(void* dst, const void* src, size_t bytes);
int kvrt_cuda_memset(void* dst, int value, size_t bytes);

// CUDA IPC of cudaMalloc memory (pools a node exports to its workers).
int kvrt_cuda_ipc_export(void* device_ptr, unsigned char handle[64]);
int kvrt_cuda_ipc_import(const unsigned char handle[64], void** device_ptr);
int kvrt_cuda_ipc_close(void* device_ptr);
}

// Benchmark helpers (kvrt_gpu_tests --bench). Fills `elements` elements of
// dtype (0 fp32, 1 fp16, 2 bf16) with seeded uniform values in [-1, 1).
extern "C" int kvrt_cuda_fill_uniform(void* dst, uint64_t elements, int dtype, uint64_t seed);
// Launches blocks x 256 threads, each running `iterations` x 8 independent
// fp32 FMA chains (2 flops each), the result kept live in `sink` [blocks*256].
extern "C" int kvrt_cuda_fma_probe(float* sink, int blocks, int iterations);
