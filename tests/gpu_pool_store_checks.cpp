// [gpu][pools] The node's GPU pools (gpu/cuda_pool_store.hpp, `[node]
// pool_backend = "cuda"`): rows written, copied and zeroed through the
// device store read back exactly as through the canonical host store
// (services/allocator/payload_store.hpp), over a layout whose two groups
// lay their tensors out in different axis orders; and what a worker needs
// to import them. The import by another process runs in
// gpu/run-device-checks.sh (a node and worker processes).
#include <catch2/catch.hpp>

#include <random>

#include "gpu/cuda_pool_store.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/shared_block_pools.hpp"

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

}  // namespace kvrt::test
