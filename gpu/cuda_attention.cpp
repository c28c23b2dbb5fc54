// Host launchers of the CUDA attention kernels (compiled by g++; reaches the
// device only through cuda_attention_shim.hpp and cuda_runtime_shim.hpp).
#include "gpu/cuda_attention.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_attention_shim.hpp"
#include "gpu/cuda_error.hpp"
#include "gpu/cuda_runtime_shim.hpp"

namespace kvrt::gpu {
namespace {

using executor::AttentionWorkPlan;
using executor::HeadMapping;
using executor::KvTensorView;

Error shape(const std::string& reason, const std::string& field) {
  return make_error(ErrorCode::executor_shape_mismatch, reason, field);
}

Result<int> device_dtype(ScalarType t, const std::string& field) {
  switch (t) {
    case ScalarType::fp32:
      return 0;
    case ScalarType::fp16:
      return 1;
    case ScalarType::bf16:
      return 2;
    default:
      return make_error(ErrorCode::executor_unsupported_dtype, "the CUDA kernels read fp32, fp16 and bf16 pools",
                        field);
  }
}

// What the device kernels assume of a layer beyond what the plan checked:
// one dtype, width and stride set for K and V, contiguous lanes, d in {64,
// 128}, G in {1, 2, 4, 8}, and 16-byte aligned rows (the tile kernel loads
// 16 bytes at a time).
Result<KvrtCudaKvLayer> device_layer(const DeviceKvLayer& layer, const HeadMapping& heads) {
  const KvTensorView& k = layer.view.k;
  const KvTensorView& v = layer.view.v;
  auto dtype = device_dtype(k.dtype, "k.dtype");
  if (!dtype.ok()) return dtype.error();
  if (v.dtype != k.dtype)
    return make_error(ErrorCode::executor_unsupported_dtype, "the CUDA kernels need K and V in one dtype", "v.dtype");
  if (k.head_dim != v.head_dim || (k.head_dim != 64 && k.head_dim != 128))
    return shape("the CUDA kernels need d_qk = d_v in {64, 128}, got d_qk = " + std::to_string(k.head_dim) +
                     ", d_v = " + std::to_string(v.head_dim),
                 "head_dim");
  if (k.slot_stride != v.slot_stride || k.token_stride != v.token_stride || k.head_stride != v.head_stride ||
      k.lane_stride != 1 || v.lane_stride != 1)
    return shape("the CUDA kernels need K and V with equal strides and contiguous lanes", "strides");
  const uint32_t g = heads.group_size();
  if (g != 1 && g != 2 && g != 4 && g != 8)
    return shape("the CUDA kernels support GQA groups of 1, 2, 4 or 8 query heads, got " + std::to_string(g), "heads");
  const uint64_t esize = k.scalar_bytes();
  for (uint64_t stride : {k.slot_stride, k.token_stride, k.head_stride})
    if (stride * esize % 16 != 0) return shape("pool rows must start on 16-byte boundaries", "strides");
  if (reinterpret_cast<uintptr_t>(k.base) % 16 != 0 || reinterpret_cast<uintptr_t>(v.base) % 16 != 0)
    return shape("pool bases must be 16-byte aligned", "base");
  return KvrtCudaKvLayer{k.base,        v.base,
                         *dtype,        k.head_dim,
                         k.slot_stride, k.token_stride,
                         k.head_stride, layer.view.kv_heads,
                         heads.q_heads, static_cast<float>(1.0 / std::sqrt(static_cast<double>(k.head_dim)))};
}

// Appends a POD array to the upload image, 16-byte aligned; returns its byte offset.
template <class T>
uint64_t append(std::vector<uint8_t>& image, const std::vector<T>& values) {
  image.resize((image.size() + 15) / 16 * 16);
  const uint64_t offset = image.size();
  image.resize(offset + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(image.data() + offset, values.data(), values.size() * sizeof(T));
  return offset;
}

}  // namespace

DeviceAttentionWorkspace::DeviceAttentionWorkspace() = default;
DeviceAttentionWorkspace::~DeviceAttentionWorkspace() {
  if (data_ != nullptr) kvrt_cuda_free(data_);
}

Status DeviceAttentionWorkspace::reserve(uint64_t bytes) {
  if (bytes <= capacity_) return Status::success();
  if (data_ != nullptr) {
    if (int rc = kvrt_cuda_synchronize(); rc != 0) return cuda_error("cudaDeviceSynchronize", rc);
    kvrt_cuda_free(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  void* p = nullptr;
  if (int rc = kvrt_cuda_malloc(&p, bytes); rc != 0) return cuda_error("cudaMalloc", rc);
  data_ = p;
  capacity_ = bytes;
  return Status::success();
}

struct UploadedAttentionPlan::Impl {
  KvrtCudaKvLayer layer{};
  KvrtCudaPlan plan{};
  const float* queries = nullptr;
  float* outputs = nullptr;
  float* lse = nullptr;
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  DeviceAttentionReceipt receipt;
};

UploadedAttentionPlan::UploadedAttentionPlan() : impl_(std::make_unique<Impl>()) {}
UploadedAttentionPlan::~UploadedAttentionPlan() = default;
UploadedAttentionPlan::UploadedAttentionPlan(UploadedAttentionPlan&&) noexcept = default;
UploadedAttentionPlan& UploadedAttentionPlan::operator=(UploadedAttentionPlan&&) noexcept = default;
const DeviceAttentionReceipt& UploadedAttentionPlan::receipt() const { return impl_->receipt; }

Result<UploadedAttentionPlan> upload_attention_plan(const DeviceKvLayer& layer, const HeadMapping& heads,
                                                    const AttentionWorkPlan& plan, DeviceFloats queries,
                                                    DeviceFloats outputs, DeviceFloats lse,
                                                    DeviceAttentionWorkspace& workspace) {
  auto dev = device_layer(layer, heads);
  if (!dev.ok()) return dev.error();
  if (heads.kv_heads != layer.view.kv_heads)
    return make_error(ErrorCode::executor_head_mapping, "the pool holds another number of K/V heads", "heads");
  const uint64_t d = layer.view.k.head_dim;
  const uint64_t rows = uint64_t{plan.sequences} * heads.q_heads;
  KVRT_TRY(executor::check_span_size(queries.size, rows * d, "queries"));
  KVRT_TRY(executor::check_span_size(outputs.size, rows * d, "outputs"));
  KVRT_TRY(executor::check_span_size(lse.size, rows, "lse", /*optional=*/true));
  if (queries.data == nullptr || outputs.data == nullptr)
    return make_error(ErrorCode::invalid_argument, "null device buffer", "queries");
  if (uint64_t{plan.tile_sequences} * heads.group_size() > 64)
    return shape("a tile holds at most 64 query rows (tile_sequences x G)", "tile_sequences");

  std::vector<uint8_t> image;
  const uint64_t runs = append(image, plan.runs);
  const uint64_t chunks = append(image, plan.chunks);
  const uint64_t seq_items = append(image, plan.sequence_items);
  const uint64_t tiles = append(image, plan.tile_items);
  const uint64_t offsets = append(image, plan.merge_offsets);
  const uint64_t partials = append(image, plan.merge_partials);
  const uint64_t partial_o = (image.size() + 255) / 256 * 256;
  const uint64_t partial_o_bytes = uint64_t{plan.partial_count} * heads.q_heads * d * sizeof(float);
  const uint64_t partial_lse = (partial_o + partial_o_bytes + 255) / 256 * 256;
  const uint64_t total = partial_lse + uint64_t{plan.partial_count} * heads.q_heads * sizeof(float);
  KVRT_TRY(workspace.reserve(total));
  auto* base = static_cast<uint8_t*>(workspace.data());
  if (int rc = kvrt_cuda_memcpy_h2d(base, image.data(), image.size()); rc != 0) return cuda_error("cudaMemcpy", rc);

  UploadedAttentionPlan up;
  UploadedAttentionPlan::Impl& u = up.impl();
  u.layer = *dev;
  u.plan = KvrtCudaPlan{reinterpret_cast<const executor::PlanRowRun*>(base + runs),
                        reinterpret_cast<const executor::PlanChunk*>(base + chunks),
                        reinterpret_cast<const executor::PlanSequenceItem*>(base + seq_items),
                        static_cast<uint32_t>(plan.sequence_items.size()),
                        reinterpret_cast<const executor::PlanTileItem*>(base + tiles),
                        static_cast<uint32_t>(plan.tile_items.size()),
                        reinterpret_cast<const uint32_t*>(base + offsets),
                        reinterpret_cast<const uint32_t*>(base + partials),
                        plan.sequences,
                        plan.tile_sequences * heads.group_size()};
  u.queries = queries.data;
  u.outputs = outputs.data;
  u.lse = lse.size == 0 ? nullptr : lse.data;
  u.partial_o = reinterpret_cast<float*>(base + partial_o);
  u.partial_lse = reinterpret_cast<float*>(base + partial_lse);
  u.receipt =
      DeviceAttentionReceipt{static_cast<uint32_t>(plan.sequence_items.size()),
                             static_cast<uint32_t>(plan.tile_items.size()), plan.partial_count, plan.key_rows_read()};
  return up;
}

Status launch_attention_plan(const UploadedAttentionPlan& plan) {
  const UploadedAttentionPlan::Impl& u = plan.impl();
  if (int rc = kvrt_cuda_attention(&u.layer, &u.plan, u.queries, u.outputs, u.lse, u.partial_o, u.partial_lse); rc != 0)
    return cuda_error("attention kernels", rc);
  return Status::success();
}

namespace {

Result<DeviceAttentionReceipt> run_plan(const DeviceKvLayer& layer, const HeadMapping& heads,
                                        const AttentionWorkPlan& plan, DeviceFloats queries, DeviceFloats outputs,
                                        DeviceFloats lse, DeviceAttentionWorkspace& workspace) {
  auto up = upload_attention_plan(layer, heads, plan, queries, outputs, lse, workspace);
  if (!up.ok()) return up.error();
  KVRT_TRY(launch_attention_plan(*up));
  if (int rc = kvrt_cuda_synchronize(); rc != 0) return cuda_error("attention kernels", rc);
  return up->receipt();
}

}  // namespace

Result<DeviceAttentionReceipt> cuda_paged_decode(const DeviceKvLayer& layer, const HeadMapping& heads,
                                                 std::span<const executor::DecodeRequest> requests,
                                                 DeviceFloats queries, DeviceFloats outputs, DeviceFloats lse,
                                                 const executor::WorkPlanOptions& options,
                                                 DeviceAttentionWorkspace& workspace) {
  auto plan = executor::plan_paged_decode(layer.view, heads, requests, options);
  if (!plan.ok()) return plan.error();
  return run_plan(layer, heads, *plan, queries, outputs, lse, workspace);
}

Result<DeviceAttentionReceipt> cuda_shared_prefix(const DeviceKvLayer& layer,
                                                  const executor::ExecutionSnapshot& snapshot,
                                                  const executor::SnapshotFence& fence, const HeadMapping& heads,
                                                  DeviceFloats queries, DeviceFloats outputs, DeviceFloats lse,
                                                  const executor::WorkPlanOptions& options,
                                                  DeviceAttentionWorkspace& workspace) {
  auto plan = executor::plan_shared_prefix(layer.view, snapshot, fence, heads, options);
  if (!plan.ok()) return plan.error();
  return run_plan(layer, heads, *plan, queries, outputs, lse, workspace);
}

}  // namespace kvrt::gpu
