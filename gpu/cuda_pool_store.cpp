#include "gpu/cuda_pool_store.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "gpu/cuda_attention_shim.hpp"
#include "gpu/cuda_error.hpp"
#include "gpu/cuda_ipc.hpp"
#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "services/common/assert.hpp"
#include "services/common/process_identity.hpp"
#include "shm/pool_row_plan.hpp"
#include "shm/pool_segment_header.hpp"

namespace kvrt::gpu {
namespace {

// A CUDA call inside a store operation: its arguments were checked, so a
// failure is a lost device (KVRT_ASSERT, as a failed memcpy would be).
void expect_cuda(int rc, const char* what) {
  KVRT_ASSERT(rc == 0, std::string(what) + " failed: " + kvrt_cuda_error_string(rc));
}

// One group's pool: device bytes laid out as its shared-memory segment.
struct DevicePool {
  CacheGroupId group;
  PoolId pool;
  PoolGeneration generation;
  shm::PoolRowPlan rows;
  uint8_t* device = nullptr;                 // byte 0 of the layout (the header)
  std::unique_ptr<CudaIpcMapping> imported;  // set on an importer: closes the mapping
  bool owned = false;                        // cudaMalloc'd here: freed by the store

  DevicePool(CacheGroupId g, PoolId p, PoolGeneration gen, shm::PoolRowPlan plan)
      : group(g), pool(p), generation(gen), rows(std::move(plan)) {}
  DevicePool(DevicePool&& o) noexcept
      : group(o.group),
        pool(o.pool),
        generation(o.generation),
        rows(std::move(o.rows)),
        device(std::exchange(o.device, nullptr)),
        imported(std::move(o.imported)),
        owned(std::exchange(o.owned, false)) {}
  DevicePool& operator=(DevicePool&&) = delete;
  DevicePool(const DevicePool&) = delete;
  ~DevicePool() {
    if (owned && device != nullptr) kvrt_cuda_free(device);
  }
};

class CudaPoolStore final : public shm::SharedPoolStore {
 public:
  explicit CudaPoolStore(std::vector<DevicePool> pools) : pools_(std::move(pools)) {}

  uint32_t group_count() const override { return static_cast<uint32_t>(pools_.size()); }
  uint32_t block_tokens() const override { return pools_[0].rows.geometry().shape().block_tokens; }
  uint32_t capacity_blocks() const override { return pools_[0].rows.geometry().shape().capacity_blocks; }
  uint64_t row_bytes(uint32_t g) const override { return pools_.at(g).rows.row_bytes(); }
  CacheGroupId group(uint32_t g) const override { return pools_.at(g).group; }
  shm::PoolMemory memory(uint32_t g) const override {
    return shm::PoolMemory{pools_.at(g).device, &pools_.at(g).rows, true};
  }

  void write_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows,
                  std::span<const uint8_t> bytes) override {
    assert_rows(g, slot, first_row, rows, "write_rows");
    KVRT_ASSERT(bytes.size() == rows * row_bytes(g), "write_rows: span is not rows * B_row bytes");
    uint8_t* base = pools_[g].device;
    pools_[g].rows.for_each_row_rect(slot, first_row, rows, [&](const shm::RowRect& rect) {
      expect_cuda(
          kvrt_cuda_memcpy_2d(base + rect.segment_offset, rect.segment_pitch, bytes.data() + rect.canonical_offset,
                              rect.canonical_pitch, rect.width, rect.height, 1),
          "cudaMemcpy2D (rows to the pool)");
    });
    expect_cuda(kvrt_cuda_synchronize(), "cudaDeviceSynchronize");
  }

  void read_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows, std::span<uint8_t> out) const override {
    assert_rows(g, slot, first_row, rows, "read_rows");
    KVRT_ASSERT(out.size() == rows * row_bytes(g), "read_rows: span is not rows * B_row bytes");
    const uint8_t* base = pools_[g].device;
    pools_[g].rows.for_each_row_rect(slot, first_row, rows, [&](const shm::RowRect& rect) {
      expect_cuda(kvrt_cuda_memcpy_2d(out.data() + rect.canonical_offset, rect.canonical_pitch,
                                      base + rect.segment_offset, rect.segment_pitch, rect.width, rect.height, 0),
                  "cudaMemcpy2D (rows from the pool)");
    });
  }

  void copy_rows(uint32_t g, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) override {
    assert_rows(g, src_slot, 0, rows, "copy_rows source");
    assert_rows(g, dst_slot, 0, rows, "copy_rows destination");
    KVRT_ASSERT(src_slot != dst_slot, "copy_rows: a block copied onto itself");
    uint8_t* base = pools_[g].device;
    pools_[g].rows.for_each_copy_run(src_slot, dst_slot, rows, [&](uint64_t from, uint64_t to, uint64_t n) {
      expect_cuda(kvrt_cuda_memcpy_d2d(base + to, base + from, n), "cudaMemcpy (block copy)");
    });
    expect_cuda(kvrt_cuda_synchronize(), "cudaDeviceSynchronize");
  }

  void zero_block(uint32_t g, uint32_t slot) override {
    assert_rows(g, slot, 0, block_tokens(), "zero_block");
    uint8_t* base = pools_[g].device;
    pools_[g].rows.for_each_block_run(slot, [&](uint64_t at, uint64_t n) {
      expect_cuda(kvrt_cuda_memset(base + at, 0, n), "cudaMemset (block zero)");
    });
    expect_cuda(kvrt_cuda_synchronize(), "cudaDeviceSynchronize");
  }

 private:
  std::vector<DevicePool> pools_;
};

}  // namespace

Result<CudaPools> create_cuda_pools(const CacheLayoutManifest& manifest, const BlockAllocatorConfig& config) {
  KVRT_TRY(require_cuda_device());
  ProcessIdentity owner;
  KVRT_TRY_ASSIGN(owner, current_process_identity());
  std::vector<DevicePool> pools;
  std::vector<PoolAttachment> attachments;
  std::vector<executor::PagedKvView> views(manifest.layer_count());
  for (size_t g = 0; g < config.groups.size(); ++g) {
    const GroupPoolConfig& c = config.groups[g];
    const CacheGroupLayout* group = nullptr;
    for (const CacheGroupLayout& candidate : manifest.cache_groups)
      if (candidate.group_id == c.group) group = &candidate;
    if (group == nullptr)
      return make_error(ErrorCode::unknown_group,
                        "cache group " + std::to_string(c.group.value) + " is not in the layout",
                        "groups[" + std::to_string(g) + "].group");
    shm::PoolShape shape;
    KVRT_TRY_ASSIGN(shape, shm::pool_shape(manifest, c.group, c.capacity_blocks));
    shm::PoolGeometry geometry;
    KVRT_TRY_ASSIGN(geometry, shm::PoolGeometry::plan(shape));
    Result<shm::PoolRowPlan> plan = shm::PoolRowPlan::create(geometry);
    if (!plan.ok()) return plan.error();
    if (plan->row_bytes() != c.row_bytes)
      return make_error(ErrorCode::config_field,
                        "row_bytes " + std::to_string(c.row_bytes) + " differs from the layout's " +
                            std::to_string(plan->row_bytes()),
                        "groups[" + std::to_string(g) + "].row_bytes");
    DevicePool pool(c.group, c.pool, c.pool_generation, std::move(*plan));
    void* device = nullptr;
    if (int rc = kvrt_cuda_malloc(&device, geometry.segment_bytes()); rc != 0) return cuda_error("cudaMalloc", rc);
    pool.device = static_cast<uint8_t*>(device);
    pool.owned = true;
    // Payload bytes start zeroed, as a new segment's do; then the header,
    // published (ready = 1) before any handle leaves this process.
    if (int rc = kvrt_cuda_memset(pool.device, 0, geometry.segment_bytes()); rc != 0)
      return cuda_error("cudaMemset", rc);
    shm::PoolSegmentHeader header =
        shm::make_header(shm::PoolSegmentInfo{c.pool, c.pool_generation, c.group, manifest.digest(), owner, geometry});
    header.ready = 1;
    if (int rc = kvrt_cuda_memcpy_h2d(pool.device, &header, sizeof header); rc != 0)
      return cuda_error("cudaMemcpy (pool header)", rc);
    if (int rc = kvrt_cuda_synchronize(); rc != 0) return cuda_error("cudaDeviceSynchronize", rc);
    Result<CudaIpcHandle> handle = cuda_ipc_export(pool.device);
    if (!handle.ok()) return handle.error();
    // The executor's per-layer views: the same 0x03E geometry the host
    // views of a shared-memory pool use, over device addresses.
    const auto tensor = [&](TensorKind kind, ScalarType dtype) {
      return executor::KvTensorBytes{reinterpret_cast<const std::byte*>(pool.device + geometry.tensor_offset(kind)),
                                     geometry.tensor_bytes(kind), dtype};
    };
    for (uint32_t l = 0; l < group->layers(); ++l) {
      Result<executor::PagedKvView> view = executor::paged_kv_view(
          geometry.tensor(), l, tensor(TensorKind::K, group->k_dtype), tensor(TensorKind::V, group->v_dtype));
      if (!view.ok()) return view.error();
      views[group->layer_start + l] = *view;
    }
    PoolAttachment a{c.group, c.pool, c.pool_generation, "", geometry.segment_bytes()};
    a.cuda_ipc_handle = handle->hex();
    a.cuda_device = 0;
    attachments.push_back(std::move(a));
    pools.push_back(std::move(pool));
  }
  return CudaPools{std::make_unique<CudaPoolStore>(std::move(pools)), std::move(attachments), std::move(views)};
}

Result<std::unique_ptr<shm::SharedPoolStore>> import_cuda_pools(const std::vector<PoolAttachment>& attachments,
                                                                const Sha256Digest& layout_digest) {
  std::vector<CudaIpcHandle> handles;
  KVRT_TRY_ASSIGN(handles, check_gpu_pool_attachments(attachments));
  KVRT_TRY(require_cuda_device());
  std::vector<DevicePool> pools;
  for (size_t g = 0; g < attachments.size(); ++g) {
    const PoolAttachment& a = attachments[g];
    Result<std::unique_ptr<CudaIpcMapping>> mapping = cuda_ipc_import(handles[g]);
    if (!mapping.ok()) return mapping.error();
    auto* device = static_cast<uint8_t*>((*mapping)->data());
    // The header, as an attacher reads a segment's: published, this format,
    // a consistent shape, and the allocation size the attachment names.
    shm::PoolSegmentHeader header;
    if (a.segment_bytes < shm::kHeaderBytes)
      return make_error(ErrorCode::decode_failed,
                        "pool " + std::to_string(a.pool.value) + " is smaller than a pool header",
                        gpu_pool_field(g, "segment_bytes"));
    if (int rc = kvrt_cuda_memcpy_d2h(&header, device, sizeof header); rc != 0)
      return cuda_error("cudaMemcpy (pool header)", rc);
    shm::PoolSegmentInfo info;
    KVRT_TRY_ASSIGN(info, shm::decode_header(header, a.segment_bytes));
    if (info.pool_id != a.pool || info.group != a.group)
      return make_error(ErrorCode::invalid_argument,
                        "the pool behind the handle is pool " + std::to_string(info.pool_id.value) + " of group " +
                            std::to_string(info.group.value) + ", the session names pool " +
                            std::to_string(a.pool.value) + " of group " + std::to_string(a.group.value),
                        gpu_pool_field(g, "pool"));
    if (info.pool_generation != a.generation)
      return make_error(ErrorCode::stale_generation,
                        "pool " + std::to_string(a.pool.value) + " is at generation " +
                            std::to_string(info.pool_generation.value) + ", the session names " +
                            std::to_string(a.generation.value),
                        gpu_pool_field(g, "generation"));
    if (info.layout_digest != layout_digest)
      return make_error(ErrorCode::incompatible,
                        "pool " + std::to_string(a.pool.value) + " was laid out by manifest " +
                            info.layout_digest.hex() + ", expected " + layout_digest.hex(),
                        "layout_digest");
    Result<shm::PoolRowPlan> plan = shm::PoolRowPlan::create(info.geometry);
    if (!plan.ok()) return plan.error();
    DevicePool pool(a.group, a.pool, a.generation, std::move(*plan));
    pool.device = device;
    pool.imported = std::move(*mapping);
    pools.push_back(std::move(pool));
  }
  const shm::PoolShape& first = pools[0].rows.geometry().shape();
  for (size_t g = 1; g < pools.size(); ++g) {
    const shm::PoolShape& s = pools[g].rows.geometry().shape();
    if (s.block_tokens != first.block_tokens || s.capacity_blocks != first.capacity_blocks)
      return make_error(ErrorCode::incompatible,
                        "pool " + std::to_string(pools[g].pool.value) +
                            " differs from the first in block size or capacity; a bundle takes one block of every "
                            "group (0x04E)",
                        gpu_pool_field(g, "segment_bytes"));
  }
  return std::unique_ptr<shm::SharedPoolStore>(std::make_unique<CudaPoolStore>(std::move(pools)));
}

}  // namespace kvrt::gpu
