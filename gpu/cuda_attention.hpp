#pragma once
// Host launchers of the CUDA attention kernels (0x0A, 0x0B):
// ordinary paged decode with split-K, and the two-level shared-prefix
// (cascade) path, both ending in the exact LSE merge. Each validates exactly
// what its CPU twin validates (services/executor/attention_work_plan.hpp),
// then what only the device needs (dtype, width, alignment), and returns a
// typed error before touching the device. Built only with CUDA; without it,
// gpu/cuda_absent.cpp answers every call with "built without CUDA".
#include <cstdint>
#include <memory>

#include "services/common/result.hpp"
#include "services/executor/attention_work_plan.hpp"

namespace kvrt::gpu {

// Device memory of `size` floats (queries, outputs, LSE).
struct DeviceFloats {
  float* data = nullptr;
  uint64_t size = 0;  // [floats]
};

// One layer's K/V pools in device memory. The view's base pointers are
// device addresses: the launchers use the view's geometry to validate plans
// (which never dereference it) and pass the bases to the kernels.
struct DeviceKvLayer {
  executor::PagedKvView view;
};

// Device scratch for plans and partial states; grows, never shrinks. One per
// stream of launches (launches through one workspace are serialised).
class DeviceAttentionWorkspace {
 public:
  DeviceAttentionWorkspace();
  ~DeviceAttentionWorkspace();
  DeviceAttentionWorkspace(const DeviceAttentionWorkspace&) = delete;
  DeviceAttentionWorkspace& operator=(const DeviceAttentionWorkspace&) = delete;
  // Makes room for `bytes` [bytes]; typed io error when cudaMalloc fails.
  Status reserve(uint64_t bytes);
  void* data() const { return data_; }
  uint64_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  uint64_t capacity_ = 0;  // [bytes]
};

struct DeviceAttentionReceipt {
  uint32_t sequence_items = 0;  // sequence-first blocks per K/V head
  uint32_t tile_items = 0;      // chunk-first blocks per K/V head
  uint32_t partials = 0;        // partial states per query head
  uint64_t key_rows_read = 0;   // key rows read per K/V head [rows]
};

// A plan uploaded into a workspace, ready to launch again and again (the
// benchmark times launches alone; the plan is per step in serving).
class UploadedAttentionPlan {
 public:
  struct Impl;
  UploadedAttentionPlan();
  ~UploadedAttentionPlan();
  UploadedAttentionPlan(UploadedAttentionPlan&&) noexcept;
  UploadedAttentionPlan& operator=(UploadedAttentionPlan&&) noexcept;
  const DeviceAttentionReceipt& receipt() const;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Checks the layer, the head mapping and the buffers against the plan, and
// uploads the plan into the workspace. Errors: executor_unsupported_dtype (K
// and V dtypes differ), executor_shape_mismatch (d_qk != d_v, d not 64 or
// 128, G not in {1, 2, 4, 8}, a buffer of the wrong size, a misaligned pool),
// io (a CUDA call failed).
Result<UploadedAttentionPlan> upload_attention_plan(const DeviceKvLayer& layer, const executor::HeadMapping& heads,
                                                    const executor::AttentionWorkPlan& plan, DeviceFloats queries,
                                                    DeviceFloats outputs, DeviceFloats lse,
                                                    DeviceAttentionWorkspace& workspace);
// Launches an uploaded plan (asynchronous on the default stream).
Status launch_attention_plan(const UploadedAttentionPlan& plan);

// Plans, uploads, launches and synchronises: paged decode of every request.
Result<DeviceAttentionReceipt> cuda_paged_decode(const DeviceKvLayer& layer, const executor::HeadMapping& heads,
                                                 std::span<const executor::DecodeRequest> requests,
                                                 DeviceFloats queries, DeviceFloats outputs, DeviceFloats lse,
                                                 const executor::WorkPlanOptions& options,
                                                 DeviceAttentionWorkspace& workspace);
// Same for a shared-prefix snapshot (chunk-first above its threshold tau).
Result<DeviceAttentionReceipt> cuda_shared_prefix(
    const DeviceKvLayer& layer, const executor::ExecutionSnapshot& snapshot, const executor::SnapshotFence& fence,
    const executor::HeadMapping& heads, DeviceFloats queries, DeviceFloats outputs, DeviceFloats lse,
    const executor::WorkPlanOptions& options, DeviceAttentionWorkspace& workspace);

}  // namespace kvrt::gpu
