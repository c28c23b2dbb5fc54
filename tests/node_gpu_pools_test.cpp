// GPU pools for the node (issue 5: "with the GPU backend the receipts carry
// CUDA IPC handles instead of segment names"): what runs without a device.
// The config option, the typed refusal of a node that cannot make them, the
// checks a worker applies to a session's pools before it imports anything,
// the descriptor that carries the handles, and the executor that cannot read
// device memory. On a machine with a GPU, gpu/run-device-checks.sh runs a
// node with GPU pools and a worker process against it.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "actors/session_pools.hpp"
#include "gpu/cuda_pool_store.hpp"
#include "services/compute/compute_backend.hpp"
#include "services/identity/layout_loader.hpp"
#include "services/node/executor_service.hpp"
#include "services/node/node_config.hpp"
#include "tests/node_fixture.hpp"

namespace kvrt::test {
namespace {

// tests/data/node/node-test.toml with extra [node] lines, written to `dir`.
std::string node_config_with(const ScratchDir& dir, const std::string& extra) {
  std::ifstream in(std::string(KVRT_SOURCE_DIR) + "/tests/data/node/node-test.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string layout_key = "layout = \"";
  const size_t layout = config.find(layout_key);
  REQUIRE(layout != std::string::npos);
  config.insert(layout + layout_key.size(), std::string(KVRT_SOURCE_DIR) + "/tests/data/node/");
  const size_t node_table = config.find("[node]\n");
  REQUIRE(node_table != std::string::npos);
  config.insert(node_table + 7, extra);
  const std::string path = dir.file("node.toml");
  std::ofstream(path) << config;
  return path;
}

PoolAttachment gpu_pool(uint32_t group, std::string handle, uint32_t device = 0) {
  PoolAttachment a{CacheGroupId{group}, PoolId{1 + group}, PoolGeneration{1}, "", 1 << 20};
  a.cuda_ipc_handle = std::move(handle);
  a.cuda_device = device;
  return a;
}

const std::string kWellFormedHandle(128, 'a');

}  // namespace

TEST_CASE("node config: pool_backend is shm by default, cuda on request, nothing else", "[node][gpu_pools][config]") {
  const std::string head = "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\n";
  Result<NodeConfig> plain = parse_node_config(head, "plain.toml");
  REQUIRE(plain.ok());
  CHECK(plain->pool_backend == "shm");
  Result<NodeConfig> cuda = parse_node_config(head + "pool_backend = \"cuda\"\n", "cuda.toml");
  REQUIRE(cuda.ok());
  CHECK(cuda->pool_backend == "cuda");
  Result<NodeConfig> bad = parse_node_config(head + "pool_backend = \"rdma\"\n", "bad.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().reason.find("pool_backend") != std::string::npos);
  CHECK(bad.error().reason.find("rdma") != std::string::npos);
}

TEST_CASE("a node configured for GPU pools starts with handles in its descriptor, or stops with the reason",
          "[node][gpu_pools]") {
  ScratchDir dir("gpu-pools-node");
  NodeRunOptions o;
  o.config_path = node_config_with(dir, "pool_backend = \"cuda\"\n");
  o.descriptor_path = dir.file("node.json");
  const CudaDeviceProbe probe = probe_cuda_device();
  Result<std::unique_ptr<NodeInstance>> started = NodeInstance::start(o);
  if (!probe.available) {
    // CI and this project's CPU machines: a typed error at start-up that
    // names the option and why, and no descriptor for a worker to find.
    REQUIRE_FALSE(started.ok());
    CHECK(started.error().code == ErrorCode::io);
    CHECK(started.error().field == "pool_backend");
    CHECK(started.error().reason.find("pool_backend = \"cuda\"") != std::string::npos);
    CHECK(started.error().reason.find(probe.reason) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(o.descriptor_path));
    return;
  }
  INFO((started.ok() ? std::string("ok") : started.error().describe()));
  REQUIRE(started.ok());
  const NodeDescriptor d = read_node_descriptor(o.descriptor_path).value();
  REQUIRE_FALSE(d.pools.empty());
  for (const PoolAttachment& p : d.pools) {
    CHECK(p.segment_name.empty());
    CHECK(p.cuda_ipc_handle.size() == 128);
    CHECK(p.cuda_device == 0);
  }
}

TEST_CASE("a worker refuses malformed GPU pool attachments before it imports anything", "[node][gpu_pools]") {
  SessionReceipt session;
  SECTION("no pool") {
    Result<std::unique_ptr<shm::SharedPoolStore>> r = attach_session_pools(session);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
    CHECK(r.error().field == "pools");
  }
  SECTION("GPU and shared-memory pools mixed") {
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    session.pools.push_back(PoolAttachment{CacheGroupId{1}, PoolId{2}, PoolGeneration{1}, "/kvrt.x", 1 << 20});
    Result<std::unique_ptr<shm::SharedPoolStore>> r = attach_session_pools(session);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
    CHECK(r.error().field == "pools");
    CHECK(session_pools_on_gpu(session));
  }
  SECTION("a pool on another device") {
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    session.pools.push_back(gpu_pool(1, kWellFormedHandle, 3));
    Result<std::unique_ptr<shm::SharedPoolStore>> r = attach_session_pools(session);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::incompatible);
    CHECK(r.error().field == "pools[1].cuda_device");
  }
  SECTION("a handle that is not 128 hex digits") {
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    session.pools.push_back(gpu_pool(1, std::string(127, 'a') + "z"));
    Result<std::unique_ptr<shm::SharedPoolStore>> r = attach_session_pools(session);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
    CHECK(r.error().field == "pools[1].cuda_ipc_handle");
  }
  SECTION("well-formed handles on a machine that cannot import them") {
    if (probe_cuda_device().available) return;  // the device checks import real ones
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    Result<std::unique_ptr<shm::SharedPoolStore>> r = attach_session_pools(session);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::io);
    CHECK(r.error().reason == probe_cuda_device().reason);
  }
}

TEST_CASE("the node descriptor carries each pool's CUDA IPC handle and device", "[node][gpu_pools]") {
  ScratchDir dir("gpu-pools-descriptor");
  NodeDescriptor d;
  d.host = "127.0.0.1";
  d.port = 4242;
  d.node_pid = 7;
  d.instance = "i";
  d.layout_path = "/layout.toml";
  d.block_tokens = 16;
  d.token_dir = dir.file("tokens");
  d.pools.push_back(gpu_pool(0, kWellFormedHandle));
  d.pools.push_back(PoolAttachment{CacheGroupId{1}, PoolId{2}, PoolGeneration{3}, "/kvrt.segment", 4096});
  REQUIRE(write_node_descriptor(d, dir.file("node.json")).ok());
  Result<NodeDescriptor> back = read_node_descriptor(dir.file("node.json"));
  REQUIRE(back.ok());
  REQUIRE(back->pools.size() == 2);
  CHECK(back->pools[0] == d.pools[0]);
  CHECK(back->pools[1] == d.pools[1]);
  CHECK(back->pools[1].cuda_ipc_handle.empty());
}

TEST_CASE("an executor over pools it cannot read answers decode with why, and still validates", "[node][gpu_pools]") {
  const CacheLayoutManifest layout =
      load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/small-two-group.toml").value();
  std::vector<uint64_t> base(layout.cache_groups.size(), 0);
  std::unique_ptr<ExecutorService> executor = ExecutorService::create_without_pools(layout, base, "pools on GPU");
  DecodeAttentionOp op;
  op.request = RequestId{1};
  op.q_heads = 1;
  Result<AttentionOutput> out = executor->decode(op, BlockTableView{});
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().code == ErrorCode::incompatible);
  CHECK(out.error().field == "pool_backend");
  CHECK(out.error().reason == "pools on GPU");
  CHECK(executor->validate().ok());
}

}  // namespace kvrt::test
