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
#include "services/executor/shared_prefix_args.hpp"

namespace kvrt::gpu {

using CudaDecodeKernel =
    std::function<Result<executor::DecodeReceipt>(const executor::PagedKvView&, const executor::DecodeArgs&)>;

// Errors: io ("cuda") without CUDA or a device.
Result<CudaDecodeKernel> make_cuda_decode_kernel();

// The executor's shared-prefix kernel over GPU pools: the prefix tree's
// snapshot (the one the CPU designs take, executor/shared_prefix_args.hpp)
// checked as the CPU checks it, planned by the CUDA cascade
// (cuda_shared_prefix: ChunkAttention's two phases, chunk-first for chunks
// shared widely enough, with the exact LSE merge), queries uploaded,
// outputs and LSE downloaded. The receipt is the CPU designs': the
// snapshot's digest and its ledger. Serialised like the decode kernel.
using CudaSharedPrefixKernel = std::function<Result<executor::SharedPrefixReceipt>(const executor::PagedKvView&,
                                                                                   const executor::SharedPrefixArgs&)>;

// Errors: io ("cuda") without CUDA or a device.
Result<CudaSharedPrefixKernel> make_cuda_shared_prefix_kernel();

}  // namespace kvrt::gpu
