#pragma once
// The node executor's decode kernel over GPU pools (`[node] pool_backend =
// "cuda"`): ExecutorService hands it a layer view whose bases are device
// addresses (gpu/cuda_pool_store.hpp, CudaPools::layer_views) and host
// queries; it uploads the queries, runs cuda_paged_decode (the split-K
// kernel with the exact reduction, the same plan checks as the CPU's
// paged_decode), and downloads the outputs and LSE. One kernel serves one
// executor actor: calls are serialised, and its device buffers grow to the
// largest call and are reused.
#include <functional>

#include "services/common/result.hpp"
#include "services/executor/paged_decode.hpp"

namespace kvrt::gpu {

using CudaDecodeKernel =
    std::function<Result<executor::DecodeReceipt>(const executor::PagedKvView&, const executor::DecodeArgs&)>;

// Errors: io ("cuda") without CUDA or a device.
Result<CudaDecodeKernel> make_cuda_decode_kernel();

}  // namespace kvrt::gpu
