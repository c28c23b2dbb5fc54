// [gpu][pools] The node's GPU pools (gpu/cuda_pool_store.hpp, `[node]
// pool_backend = "cuda"`): rows written, copied and zeroed through the
// device store read back exactly as through the canonical host store
// (services/allocator/payload_store.hpp), over a layout whose two groups
// lay their tensors out in different axis orders; and what a worker needs
// to import them; and the node executor's CUDA decode kernel over those
// pools against its CPU kernel over shared-memory pools holding the same
// rows. The import by another process runs in gpu/run-device-checks.sh (a
// node and worker processes).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "gpu/cuda_decode_kernel.hpp"
#include "gpu/cuda_pool_store.hpp"
#include "services/executor/executor_service.hpp"
#include "services/executor/scalar_convert.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/segment_name.hpp"
#include "shm/shared_block_pools.hpp"
#include "shm/shm_model_kv_cache.hpp"

namespace kvrt::test {

TEST_CASE("cuda pools: rows written, copied and zeroed read back as the host store's", "[gpu][pools]") {
  // Run from the source root (gpu/run-device-checks.sh does).
  const CacheLayoutManifest layout = load_layout_manifest("config/layouts/small-two-group.toml").value();
  shm::SharedBlockPoolsOptions options;
  options.capacity = shm::PoolCapacity::blocks(24);
  const BlockAllocatorConfig config = shm::shared_pools_allocator_config(layout, options).value();
  Result<gpu::CudaPools> made = gpu::create_cuda_pools(layout, config);
  INFO((made.ok() ? std::string("ok") : made.error().describe()));
  REQUIRE(made.ok());
  shm::SharedPoolStore& device = *made->store;
  REQUIRE(made->attachments.size() == config.groups.size());
  for (const PoolAttachment& a : made->attachments) {
    CHECK(a.cuda_ipc_handle.size() == 128);
    CHECK(a.segment_name.empty());
    CHECK(a.cuda_device == 0);
  }
  std::vector<uint64_t> row_bytes;
  for (const GroupPoolConfig& g : config.groups) row_bytes.push_back(g.row_bytes);
  HostPayloadStore host(row_bytes, 24, config.block_size);
  REQUIRE(device.block_tokens() == config.block_size);
  REQUIRE(device.capacity_blocks() == 24);

  const uint64_t seed = 0x9b0011;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const uint32_t P = config.block_size;
  auto same_block = [&](uint32_t g, uint32_t slot) {
    std::vector<uint8_t> a(P * row_bytes[g]), b(P * row_bytes[g]);
    device.read_rows(g, slot, 0, P, a);
    host.read_rows(g, slot, 0, P, b);
    return a == b;
  };
  for (int step = 0; step < 300; ++step) {
    const uint32_t g = static_cast<uint32_t>(rng() % config.groups.size());
    const uint32_t slot = static_cast<uint32_t>(rng() % 24);
    const unsigned dice = rng() % 10;
    if (dice < 6) {
      const uint32_t first = static_cast<uint32_t>(rng() % P);
      const uint32_t rows = 1 + static_cast<uint32_t>(rng() % (P - first));
      std::vector<uint8_t> bytes(rows * row_bytes[g]);
      for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
      device.write_rows(g, slot, first, rows, bytes);
      host.write_rows(g, slot, first, rows, bytes);
    } else if (dice < 9) {
      const uint32_t dst = (slot + 1 + static_cast<uint32_t>(rng() % 23)) % 24;
      const uint32_t rows = 1 + static_cast<uint32_t>(rng() % P);
      device.copy_rows(g, slot, dst, rows);
      host.copy_rows(g, slot, dst, rows);
    } else {
      device.zero_block(g, slot);
      host.zero_block(g, slot);
    }
    INFO("step " << step);
    REQUIRE(same_block(g, slot));
  }
  for (uint32_t g = 0; g < config.groups.size(); ++g)
    for (uint32_t slot = 0; slot < 24; ++slot) {
      INFO("group " << g << " slot " << slot);
      CHECK(same_block(g, slot));
    }
}

TEST_CASE("cuda pools: the node executor's CUDA kernel equals its CPU kernel over the same rows", "[gpu][pools]") {
  // two-group-tp2: d = 128 (the CUDA kernels take 64 or 128), a slot-major
  // and a layer-major group. The same canonical rows go into GPU pools and
  // into shared-memory pools of the same layout; one ExecutorService runs
  // the CUDA kernel over the device views, another the CPU kernel over the
  // host views, for every layer and two tables.
  const CacheLayoutManifest layout = load_layout_manifest("config/layouts/two-group-tp2.toml").value();
  shm::SharedBlockPoolsOptions options;
  options.namespace_name = "gpucheck";
  options.namespace_generation = NamespaceGeneration{1};
  options.instance = shm::make_instance_id();
  options.capacity = shm::PoolCapacity::blocks(12);
  const BlockAllocatorConfig config = shm::shared_pools_allocator_config(layout, options).value();
  Result<gpu::CudaPools> made = gpu::create_cuda_pools(layout, config);
  INFO((made.ok() ? std::string("ok") : made.error().describe()));
  REQUIRE(made.ok());
  Result<shm::SharedBlockPools> host_pools = shm::SharedBlockPools::create(layout, options);
  REQUIRE(host_pools.ok());
  shm::ShmPayloadStore& host = host_pools->store();

  const uint64_t seed = 0x9b0012;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const uint32_t P = config.block_size;
  for (uint32_t g = 0; g < config.groups.size(); ++g)
    for (uint32_t slot = 0; slot < 12; ++slot) {
      std::vector<uint8_t> rows(P * config.groups[g].row_bytes);
      for (size_t i = 0; i + 1 < rows.size(); i += 2) {  // fp16 scalars (both groups' K and V dtype)
        const uint16_t h = executor::float_to_fp16(u(rng));
        rows[i] = static_cast<uint8_t>(h);
        rows[i + 1] = static_cast<uint8_t>(h >> 8);
      }
      made->store->write_rows(g, slot, 0, P, rows);
      host.write_rows(g, slot, 0, P, rows);
    }
  std::vector<uint64_t> base(config.groups.size(), 0);
  Result<gpu::CudaDecodeKernel> kernel = gpu::make_cuda_decode_kernel();
  REQUIRE(kernel.ok());
  auto on_device = ExecutorService::create(layout, made->layer_views, base, 1, *kernel).value();
  auto kv_cache = shm::ShmModelKvCache::create(host, layout).value();
  std::vector<executor::PagedKvView> host_views;
  for (uint32_t l = 0; l < layout.layer_count(); ++l) host_views.push_back(kv_cache->layer_view(l));
  auto on_cpu = ExecutorService::create(layout, host_views, base, 1).value();

  for (const uint32_t context : {37u, 150u}) {
    BlockTableView table;
    table.fence.table_version = TableVersion{1};
    table.context_tokens = context;
    table.groups.resize(config.groups.size());
    const uint32_t blocks = (context + P - 1) / P;
    for (uint32_t g = 0; g < config.groups.size(); ++g)
      for (uint32_t j = 0; j < blocks; ++j) {
        const uint32_t slot = (5 * j + 3) % 12;  // scattered blocks
        const uint32_t valid = std::min(P, context - j * P);
        table.groups[g].push_back(BlockTableEntry{PhysicalBlockHandle{config.groups[g].pool, config.groups[g].group,
                                                                      PhysicalBlockId{slot}, BlockGeneration{1}},
                                                  valid, kNoCacheKey});
      }
    for (uint32_t layer = 0; layer < layout.layer_count(); layer += 5) {
      INFO("context " << context << " layer " << layer);
      DecodeAttentionOp op;
      op.request = RequestId{1};
      op.layer = layer;
      op.q_heads = 8;  // GQA 8/4
      op.queries.resize(uint64_t{op.q_heads} * 128);
      for (float& q : op.queries) q = u(rng);
      Result<AttentionOutput> gpu_out = on_device->decode(op, table);
      Result<AttentionOutput> cpu_out = on_cpu->decode(op, table);
      INFO((gpu_out.ok() ? std::string("ok") : gpu_out.error().describe()));
      REQUIRE(gpu_out.ok());
      REQUIRE(cpu_out.ok());
      CHECK(gpu_out->kv_rows == cpu_out->kv_rows);
      REQUIRE(gpu_out->outputs.size() == cpu_out->outputs.size());
      double worst = 0;
      for (size_t i = 0; i < gpu_out->outputs.size(); ++i)
        worst = std::max(worst, std::abs(double(gpu_out->outputs[i]) - double(cpu_out->outputs[i])));
      for (size_t i = 0; i < gpu_out->lse.size(); ++i)
        worst = std::max(worst, std::abs(double(gpu_out->lse[i]) - double(cpu_out->lse[i])));
      CHECK(worst < 2e-3);  // fp32 accumulation in different orders over fp16 rows
    }
  }
}

}  // namespace kvrt::test
