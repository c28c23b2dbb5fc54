// Linked instead of the CUDA backend when kvrt is configured without nvcc or
// with -DKVRT_WITH_CUDA=OFF: every caller takes the CPU path.
#include "gpu/cuda_attention.hpp"
#include "gpu/cuda_decode_kernel.hpp"
#include "gpu/cuda_ipc.hpp"
#include "gpu/cuda_pool_store.hpp"
#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_vmm_backing.hpp"

namespace kvrt {

CudaDeviceProbe probe_cuda_device() {
  CudaDeviceProbe p;
  p.reason = "no CUDA device: kvrt was built without CUDA";
  return p;
}

// The mapper's CUDA realisation is absent too: callers use MemfdBacking.
Result<uint64_t> cuda_vmm_granularity(int) { return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda"); }

Result<std::unique_ptr<CudaVmmBacking>> make_cuda_vmm_backing(int) {
  return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda");
}

Result<std::unique_ptr<CudaPeerView>> map_cuda_peer_view(int, std::span<const int>, uint64_t) {
  return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda");
}

}  // namespace kvrt

// The attention kernels and CUDA IPC are absent too (gpu/cuda_attention.hpp,
// gpu/cuda_ipc.hpp): every entry point reports why.
namespace kvrt::gpu {

namespace {
Error absent() { return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda"); }
}  // namespace

DeviceAttentionWorkspace::DeviceAttentionWorkspace() = default;
DeviceAttentionWorkspace::~DeviceAttentionWorkspace() = default;
Status DeviceAttentionWorkspace::reserve(uint64_t) { return absent(); }

struct UploadedAttentionPlan::Impl {
  DeviceAttentionReceipt receipt;
};
UploadedAttentionPlan::UploadedAttentionPlan() : impl_(std::make_unique<Impl>()) {}
UploadedAttentionPlan::~UploadedAttentionPlan() = default;
UploadedAttentionPlan::UploadedAttentionPlan(UploadedAttentionPlan&&) noexcept = default;
UploadedAttentionPlan& UploadedAttentionPlan::operator=(UploadedAttentionPlan&&) noexcept = default;
const DeviceAttentionReceipt& UploadedAttentionPlan::receipt() const { return impl_->receipt; }

Result<UploadedAttentionPlan> upload_attention_plan(const DeviceKvLayer&, const executor::HeadMapping&,
                                                    const executor::AttentionWorkPlan&, DeviceFloats, DeviceFloats,
                                                    DeviceFloats, DeviceAttentionWorkspace&) {
  return absent();
}
Status launch_attention_plan(const UploadedAttentionPlan&) { return absent(); }
Result<DeviceAttentionReceipt> cuda_paged_decode(const DeviceKvLayer&, const executor::HeadMapping&,
                                                 std::span<const executor::DecodeRequest>, DeviceFloats, DeviceFloats,
                                                 DeviceFloats, const executor::WorkPlanOptions&,
                                                 DeviceAttentionWorkspace&) {
  return absent();
}
Result<DeviceAttentionReceipt> cuda_shared_prefix(const DeviceKvLayer&, const executor::ExecutionSnapshot&,
                                                  const executor::SnapshotFence&, const executor::HeadMapping&,
                                                  DeviceFloats, DeviceFloats, DeviceFloats,
                                                  const executor::WorkPlanOptions&, DeviceAttentionWorkspace&) {
  return absent();
}

Result<CudaIpcHandle> cuda_ipc_export(void*) { return absent(); }
CudaIpcMapping::~CudaIpcMapping() = default;
Result<std::unique_ptr<CudaIpcMapping>> cuda_ipc_import(const CudaIpcHandle&) { return absent(); }

Result<CudaDecodeKernel> make_cuda_decode_kernel() { return absent(); }
Result<CudaSharedPrefixKernel> make_cuda_shared_prefix_kernel() { return absent(); }

// GPU pools (gpu/cuda_pool_store.hpp): a node configured for them stops at
// start-up with the reason, and a worker cannot import them.
Result<CudaPools> create_cuda_pools(const CacheLayoutManifest&, const BlockAllocatorConfig&) { return absent(); }
Result<std::unique_ptr<shm::SharedPoolStore>> import_cuda_pools(const std::vector<PoolAttachment>& pools,
                                                                const Sha256Digest&) {
  KVRT_TRY(check_gpu_pool_attachments(pools));
  return absent();
}

}  // namespace kvrt::gpu
