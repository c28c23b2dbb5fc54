#include "gpu/cuda_decode_kernel.hpp"

#include <memory>
#include <span>
#include <string>

#include "gpu/cuda_attention.hpp"
#include "gpu/cuda_error.hpp"
#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::gpu {
namespace {

// A device float buffer that grows to the largest request and is reused.
class GrowingFloats {
 public:
  ~GrowingFloats() {
    if (ptr_ != nullptr) kvrt_cuda_free(ptr_);
  }
  Result<DeviceFloats> reserve(uint64_t floats) {
    if (floats > capacity_) {
      if (ptr_ != nullptr) kvrt_cuda_free(ptr_);
      ptr_ = nullptr;
      capacity_ = 0;
      void* p = nullptr;
      if (int rc = kvrt_cuda_malloc(&p, floats * sizeof(float)); rc != 0) return cuda_error("cudaMalloc", rc);
      ptr_ = static_cast<float*>(p);
      capacity_ = floats;
    }
    return DeviceFloats{ptr_, floats};
  }

 private:
  float* ptr_ = nullptr;
  uint64_t capacity_ = 0;
};

struct KernelState {
  DeviceAttentionWorkspace workspace;
  GrowingFloats queries, outputs, lse;
};

// Uploads the queries, runs `launch` over device buffers of the host
// buffers' sizes, and downloads the outputs and (when asked) the LSE.
template <class Launch>
Status on_device_buffers(KernelState& st, std::span<const float> queries, std::span<float> outputs,
                         std::span<float> lse, Launch launch) {
  DeviceFloats q, out, l;
  KVRT_TRY_ASSIGN(q, st.queries.reserve(queries.size()));
  KVRT_TRY_ASSIGN(out, st.outputs.reserve(outputs.size()));
  if (!lse.empty()) KVRT_TRY_ASSIGN(l, st.lse.reserve(lse.size()));
  if (int rc = kvrt_cuda_memcpy_h2d(q.data, queries.data(), queries.size_bytes()); rc != 0)
    return cuda_error("cudaMemcpy (queries)", rc);
  KVRT_TRY(launch(q, out, l));
  if (int rc = kvrt_cuda_memcpy_d2h(outputs.data(), out.data, outputs.size_bytes()); rc != 0)
    return cuda_error("cudaMemcpy (outputs)", rc);
  if (!lse.empty())
    if (int rc = kvrt_cuda_memcpy_d2h(lse.data(), l.data, lse.size_bytes()); rc != 0)
      return cuda_error("cudaMemcpy (lse)", rc);
  return Status::success();
}

Result<executor::DecodeReceipt> decode_on_device(KernelState& st, const executor::PagedKvView& view,
                                                 const executor::DecodeArgs& args) {
  executor::WorkPlanOptions options;
  options.kernel_block_tokens = args.options.kernel_block_tokens;
  options.partition_tokens = args.options.partition_tokens;
  DeviceAttentionReceipt r;
  KVRT_TRY(on_device_buffers(
      st, args.queries, args.outputs, args.lse, [&](DeviceFloats q, DeviceFloats out, DeviceFloats lse) -> Status {
        KVRT_TRY_ASSIGN(
            r, cuda_paged_decode(DeviceKvLayer{view}, args.heads, args.requests, q, out, lse, options, st.workspace));
        return Status::success();
      }));
  // The CPU receipt's accounting: rows per K/V head counted once, and the K
  // plus V bytes of those rows over every K/V head.
  executor::DecodeReceipt receipt;
  receipt.kernel_block_tokens = options.kernel_block_tokens == 0 ? view.block_tokens : options.kernel_block_tokens;
  receipt.kv_rows = r.key_rows_read;
  receipt.kv_bytes =
      r.key_rows_read * view.kv_heads *
      (uint64_t{view.k.head_dim} * scalar_bytes(view.k.dtype) + uint64_t{view.v.head_dim} * scalar_bytes(view.v.dtype));
  return receipt;
}

Result<executor::SharedPrefixReceipt> shared_prefix_on_device(KernelState& st, const executor::PagedKvView& view,
                                                              const executor::SharedPrefixArgs& args) {
  KVRT_TRY(executor::check_shared_prefix_args(view, args));
  KVRT_TRY(on_device_buffers(st, args.queries, args.outputs, args.lse,
                             [&](DeviceFloats q, DeviceFloats out, DeviceFloats lse) -> Status {
                               Result<DeviceAttentionReceipt> ran =
                                   cuda_shared_prefix(DeviceKvLayer{view}, *args.snapshot, args.fence, args.heads, q,
                                                      out, lse, executor::WorkPlanOptions{}, st.workspace);
                               if (!ran.ok()) return ran.error();
                               return Status::success();
                             }));
  // The CPU designs' receipt: the snapshot executed and its ledger.
  executor::SharedPrefixReceipt receipt;
  receipt.snapshot_digest = args.snapshot->digest();
  receipt.ledger = executor::shared_prefix_ledger(*args.snapshot, executor::ledger_widths<float>(view));
  return receipt;
}

}  // namespace

Result<CudaSharedPrefixKernel> make_cuda_shared_prefix_kernel() {
  KVRT_TRY(require_cuda_device());
  auto state = std::make_shared<KernelState>();
  return CudaSharedPrefixKernel([state](const executor::PagedKvView& view, const executor::SharedPrefixArgs& args) {
    return shared_prefix_on_device(*state, view, args);
  });
}

Result<CudaDecodeKernel> make_cuda_decode_kernel() {
  KVRT_TRY(require_cuda_device());
  auto state = std::make_shared<KernelState>();
  return CudaDecodeKernel([state](const executor::PagedKvView& view, const executor::DecodeArgs& args) {
    return decode_on_device(*state, view, args);
  });
}

}  // namespace kvrt::gpu
