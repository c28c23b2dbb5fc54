// GPU pools for the node (with the GPU backend the session receipt carries
// CUDA IPC handles instead of segment names): what runs without a device.
// The config option, the typed refusal of a node that cannot make them, the
// checks a worker applies to a session's pools before it imports anything,
// the descriptor that carries the handles, and the executor's kernel seam
// the GPU node fills with the CUDA decode kernel. On a machine with a GPU, gpu/run-device-checks.sh runs a
// node with GPU pools and a worker process against it.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "engine/session_pools.hpp"
#include "gpu/cuda_pool_store.hpp"
#include "gpu/cuda_probe.hpp"
#include "node/node_config.hpp"
#include "services/executor/executor_service.hpp"
#include "services/identity/layout_loader.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

PoolAttachment gpu_pool(uint32_t group, std::string handle, uint32_t device = 0) {
  PoolAttachment a{CacheGroupId{group}, PoolId{1 + group}, PoolGeneration{1}, "", 1 << 20};
  a.cuda_ipc_handle = std::move(handle);
  a.cuda_device = device;
  return a;
}

const std::string kWellFormedHandle(128, 'a');

// attach_session_pools refuses `session` with `code`, naming `field`.
void require_refused(const SessionReceipt& session, ErrorCode code, const std::string& field) {
  Result<std::unique_ptr<shm::SharedPoolStore>> r = attach_session_pools(session);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == code);
  CHECK(r.error().field == field);
}

}  // namespace

TEST_CASE("node config: pool_backend is shm by default, cuda on request, nothing else", "[node][gpu_pools][config]") {
  const std::string head = "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\n";
  Result<NodeConfig> plain = parse_node_config(head, "plain.toml");
  REQUIRE(plain.ok());
  CHECK(plain->pool_backend == PoolBackend::shm);
  Result<NodeConfig> cuda = parse_node_config(head + "pool_backend = \"cuda\"\n", "cuda.toml");
  REQUIRE(cuda.ok());
  CHECK(cuda->pool_backend == PoolBackend::cuda);
  Result<NodeConfig> bad = parse_node_config(head + "pool_backend = \"rdma\"\n", "bad.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().reason.find("pool_backend") != std::string::npos);
  CHECK(bad.error().reason.find("rdma") != std::string::npos);
}

TEST_CASE("a node configured for GPU pools hands its IPC handles to worker sessions only, or stops with the reason",
          "[node][gpu_pools]") {
  ScratchDir dir("gpu-pools-node");
  NodeRunOptions o;
  o.config_path = test_node_config(dir, "pool_backend = \"cuda\"\n");
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
    CHECK(p.cuda_ipc_handle.empty());  // the file names the device, never the handle
    CHECK(p.cuda_device == 0);
  }
  // A worker session allowed a namespace receives the handles; an admin none.
  Result<std::unique_ptr<Client>> worker = Client::connect(d, read_token_file(d.token_path("worker-0")).value());
  REQUIRE(worker.ok());
  REQUIRE((*worker)->session().pools.size() == d.pools.size());
  for (const PoolAttachment& p : (*worker)->session().pools) CHECK(p.cuda_ipc_handle.size() == 128);
  Result<std::unique_ptr<Client>> admin = Client::connect(d, read_token_file(d.token_path("operator")).value());
  REQUIRE(admin.ok());
  CHECK((*admin)->session().pools.empty());
}

TEST_CASE("GPU pools per trust domain: a session receives its own domain's IPC handles only", "[node][gpu_pools]") {
  ScratchDir dir("gpu-pools-domains");
  // tests/data/node/node-domains-test.toml on GPU pools (no segments to name).
  std::ifstream in(std::string(KVRT_SOURCE_DIR) + "/tests/data/node/node-domains-test.toml");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "pool_segments = \"unnamed\"";
  REQUIRE(config.find(from) != std::string::npos);
  config.replace(config.find(from), from.size(), "pool_backend = \"cuda\"");
  const std::string layout_key = "layout = \"";
  config.insert(config.find(layout_key) + layout_key.size(), std::string(KVRT_SOURCE_DIR) + "/tests/data/node/");
  std::ofstream(dir.file("node.toml")) << config;
  REQUIRE(parse_node_config(config, "node.toml").ok());
  NodeRunOptions o;
  o.config_path = dir.file("node.toml");
  o.descriptor_path = dir.file("node.json");
  Result<std::unique_ptr<NodeInstance>> started = NodeInstance::start(o);
  if (!probe_cuda_device().available) {
    REQUIRE_FALSE(started.ok());
    CHECK(started.error().field == "pool_backend");
    return;
  }
  INFO((started.ok() ? std::string("ok") : started.error().describe()));
  REQUIRE(started.ok());
  const NodeDescriptor d = read_node_descriptor(o.descriptor_path).value();
  REQUIRE(d.pools.size() == 6);  // three domains x two groups
  const auto session_of = [&](const char* principal) {
    Result<std::unique_ptr<Client>> c = Client::connect(d, read_token_file(d.token_path(principal)).value());
    REQUIRE(c.ok());
    return std::move(*c);
  };
  auto a = session_of("worker-a");
  auto c = session_of("worker-c");
  REQUIRE(a->session().pools.size() == 2);
  REQUIRE(c->session().pools.size() == 2);
  for (const PoolAttachment& pa : a->session().pools)
    for (const PoolAttachment& pc : c->session().pools) {
      CHECK(pa.pool != pc.pool);
      CHECK(pa.cuda_ipc_handle != pc.cuda_ipc_handle);
      CHECK(pa.cuda_ipc_handle.size() == 128);
    }
  CHECK(attach_session_pools(*a).ok());
}

TEST_CASE("a worker refuses malformed GPU pool attachments before it imports anything", "[node][gpu_pools]") {
  SessionReceipt session;
  SECTION("no pool") { require_refused(session, ErrorCode::invalid_argument, "pools"); }
  SECTION("GPU and shared-memory pools mixed") {
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    session.pools.push_back(PoolAttachment{CacheGroupId{1}, PoolId{2}, PoolGeneration{1}, "/kvrt.x", 1 << 20});
    require_refused(session, ErrorCode::invalid_argument, "pools");
    CHECK(session_pools_on_gpu(session));
  }
  SECTION("a pool on another device") {
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    session.pools.push_back(gpu_pool(1, kWellFormedHandle, 3));
    require_refused(session, ErrorCode::incompatible, "pools[1].cuda_device");
  }
  SECTION("a handle that is not 128 hex digits") {
    session.pools.push_back(gpu_pool(0, kWellFormedHandle));
    session.pools.push_back(gpu_pool(1, std::string(127, 'a') + "z"));
    require_refused(session, ErrorCode::invalid_argument, "pools[1].cuda_ipc_handle");
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

TEST_CASE("the node descriptor names each GPU pool's device, never its CUDA IPC handle", "[node][gpu_pools]") {
  ScratchDir dir("gpu-pools-descriptor");
  NodeDescriptor d;
  d.host = "127.0.0.1";
  d.port = 4242;
  d.node_pid = 7;
  d.instance = "i";
  d.layout_path = "/layout.toml";
  d.block_tokens = 16;
  d.token_dir = dir.file("tokens");
  d.pools.push_back(gpu_pool(0, kWellFormedHandle, 3));
  d.pools.push_back(PoolAttachment{CacheGroupId{1}, PoolId{2}, PoolGeneration{3}, "/kvrt.segment", 4096});
  REQUIRE(write_node_descriptor(d, dir.file("node.json")).ok());
  Result<NodeDescriptor> back = read_node_descriptor(dir.file("node.json"));
  REQUIRE(back.ok());
  REQUIRE(back->pools.size() == 2);
  // The handle is a capability to the pool's memory: only session receipts
  // carry it (to sessions allowed a namespace), never a file on disk.
  CHECK(back->pools[0].cuda_ipc_handle.empty());
  CHECK(back->pools[0].cuda_device == d.pools[0].cuda_device);
  CHECK(back->pools[0].pool == d.pools[0].pool);
  CHECK(back->pools[0].segment_bytes == d.pools[0].segment_bytes);
  std::ifstream file(dir.file("node.json"));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  CHECK(text.find(kWellFormedHandle) == std::string::npos);
  CHECK(back->pools[1] == d.pools[1]);
  CHECK(back->pools[1].cuda_ipc_handle.empty());
}

TEST_CASE("the executor runs the decode kernel it is given (the CUDA one on a GPU node)", "[node][gpu_pools]") {
  // The seam a GPU node uses: ExecutorService resolves the request's table
  // and the layer's view as always, and hands both to the injected kernel.
  const CacheLayoutManifest layout =
      load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/small-two-group.toml").value();
  const uint32_t layers = layout.layer_count();
  std::vector<std::byte> marker(layers);
  std::vector<executor::PagedKvView> views(layers);
  for (const CacheGroupLayout& g : layout.cache_groups)
    for (uint32_t l = g.layer_start; l < g.layer_end; ++l) {
      views[l].k.base = &marker[l];  // never read: the kernel below only looks at the address
      views[l].v.base = &marker[l];
      views[l].k.head_dim = views[l].v.head_dim = g.head_dim;
      views[l].kv_heads = g.kv_heads_local;
      views[l].block_tokens = layout.allocator_block_size;
    }
  const uint32_t layer = layers - 1;
  uint32_t g = 0;
  while (!layout.cache_groups[g].contains_layer(layer)) ++g;
  const CacheGroupLayout& group = layout.cache_groups[g];
  std::vector<uint64_t> base(layout.cache_groups.size(), 1000);

  struct Seen {
    int calls = 0;
    const std::byte* view_base = nullptr;
    std::vector<uint32_t> slots, valid;
    uint64_t context = 0;
  };
  auto seen = std::make_shared<Seen>();
  auto recording = [seen](const executor::PagedKvView& view,
                          const executor::DecodeArgs& args) -> Result<executor::DecodeReceipt> {
    ++seen->calls;
    seen->view_base = view.k.base;
    const executor::KvBlockTable& t = args.requests[0].table;
    seen->slots.assign(t.slots.begin(), t.slots.end());
    seen->valid.assign(t.valid_rows.begin(), t.valid_rows.end());
    seen->context = t.context_tokens;
    for (float& x : args.outputs) x = 0.5f;
    for (float& x : args.lse) x = 2.0f;
    executor::DecodeReceipt r;
    r.kv_rows = 20;
    r.kv_bytes = 640;
    return r;
  };
  std::unique_ptr<ExecutorService> executor = ExecutorService::create(layout, views, base, 4, recording).value();

  // A table of two blocks in every group, version 3: block 1007 full (16
  // rows), then `tail` holding `tail_rows`.
  auto two_block_table = [&](uint32_t tail, uint32_t tail_rows) {
    BlockTableView t;
    t.fence.table_version = TableVersion{3};
    t.context_tokens = 16 + tail_rows;
    t.groups.resize(layout.cache_groups.size());
    for (auto& entries : t.groups)
      for (const auto& [block, rows] : {std::pair{1007u, 16u}, std::pair{tail, tail_rows}})
        entries.push_back(
            BlockTableEntry{PhysicalBlockHandle{PoolId{1}, group.group_id, PhysicalBlockId{block}, BlockGeneration{1}},
                            rows, kNoCacheKey});
    return t;
  };
  const BlockTableView table = two_block_table(1002, 4);
  DecodeAttentionOp op;
  op.request = RequestId{9};
  op.table_version = TableVersion{3};
  op.layer = layer;
  op.q_heads = group.kv_heads_local * 2;
  op.queries.assign(uint64_t{op.q_heads} * group.head_dim, 0.25f);
  Result<AttentionOutput> out = executor->decode(op, table);
  REQUIRE(out.ok());
  CHECK(seen->calls == 1);
  CHECK(seen->view_base == &marker[layer]);           // the layer's own view
  CHECK(seen->slots == std::vector<uint32_t>{7, 2});  // block id - the group's base
  CHECK(seen->valid == std::vector<uint32_t>{16, 4});
  CHECK(seen->context == 20);
  CHECK(out->kv_rows == 20);
  CHECK(out->outputs == std::vector<float>(uint64_t{op.q_heads} * group.head_dim, 0.5f));
  CHECK(out->lse == std::vector<float>(op.q_heads, 2.0f));

  // A kernel's refusal is the op's answer; the service keeps serving.
  auto refusing = [](const executor::PagedKvView&, const executor::DecodeArgs&) -> Result<executor::DecodeReceipt> {
    return make_error(ErrorCode::io, "cudaMemcpy (queries) failed: lost device", "cudaMemcpy (queries)");
  };
  std::unique_ptr<ExecutorService> failing = ExecutorService::create(layout, views, base, 1, refusing).value();
  Result<AttentionOutput> refused = failing->decode(op, table);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::io);
  CHECK(failing->validate().ok());
  // A stale table version never reaches the kernel.
  op.table_version = TableVersion{2};
  CHECK(executor->decode(op, table).error().code == ErrorCode::stale_table_version);
  CHECK(seen->calls == 1);

  SECTION("shared-prefix ops run the shared kernel it is given (the CUDA cascade on a GPU node)") {
    struct SharedSeen {
      int calls = 0;
      const std::byte* view_base = nullptr;
      size_t sequences = 0, chunks = 0;
    };
    auto shared_seen = std::make_shared<SharedSeen>();
    auto cascade = [shared_seen](const executor::PagedKvView& view,
                                 const executor::SharedPrefixArgs& args) -> Result<executor::SharedPrefixReceipt> {
      ++shared_seen->calls;
      shared_seen->view_base = view.k.base;
      shared_seen->sequences = args.snapshot->sequences.size();
      shared_seen->chunks = args.snapshot->chunks.size();
      // Sequence s answers 1 + s: the service must hand outputs back in member order.
      for (size_t s = 0; s < shared_seen->sequences; ++s) {
        const size_t o_row = args.outputs.size() / shared_seen->sequences;
        std::fill_n(args.outputs.begin() + static_cast<ptrdiff_t>(s * o_row), o_row, 1.0f + static_cast<float>(s));
      }
      for (float& x : args.lse) x = 3.0f;
      executor::SharedPrefixReceipt r;
      r.ledger.unique_rows = 24;
      return r;
    };
    std::unique_ptr<ExecutorService> gpu_node =
        ExecutorService::create(layout, views, base, 1, recording, cascade).value();
    // Two requests holding block 1007 (16 rows) and then a block of their own.
    const BlockTableView second = two_block_table(1005, 8);
    SharedPrefixDecodeOp shared;
    shared.members = {SharedDecodeRequest{RequestId{9}, TableVersion{3}, 0},
                      SharedDecodeRequest{RequestId{10}, TableVersion{3}, 0}};
    shared.layer = layer;
    shared.q_heads = op.q_heads;
    shared.queries.assign(2 * uint64_t{op.q_heads} * group.head_dim, 0.25f);
    shared.design = SharedPrefixDesign::hydragen;
    const BlockTableView tables[] = {table, second};
    Result<SharedPrefixOutput> out = gpu_node->shared_decode(shared, tables);
    REQUIRE(out.ok());
    CHECK(shared_seen->calls == 1);
    CHECK(shared_seen->view_base == &marker[layer]);
    CHECK(shared_seen->sequences == 2);
    CHECK(shared_seen->chunks >= 3);  // the shared block, then each request's own
    // Hydragen was asked; the cascade runs ChunkAttention's two phases and says so.
    CHECK(out->design == SharedPrefixDesign::chunk_attention);
    CHECK(out->fallback_reason.find("CUDA cascade") != std::string::npos);
    CHECK(out->rows_read == 24);
    REQUIRE(out->outputs.size() == 2);
    std::set<float> answers;
    for (size_t m = 0; m < 2; ++m) {
      CHECK(out->outputs[m].request == shared.members[m].request);
      answers.insert(out->outputs[m].outputs.front());
      CHECK(out->outputs[m].lse == std::vector<float>(op.q_heads, 3.0f));
    }
    CHECK(answers == std::set<float>{1.0f, 2.0f});
    CHECK(seen->calls == 1);  // the decode kernel was not used

    // Per request (asked, or nothing shared) goes to the decode kernel, once per member.
    shared.design = SharedPrefixDesign::per_request;
    Result<SharedPrefixOutput> each = gpu_node->shared_decode(shared, tables);
    REQUIRE(each.ok());
    CHECK(each->design == SharedPrefixDesign::per_request);
    CHECK(shared_seen->calls == 1);
    CHECK(seen->calls == 3);
  }
}

}  // namespace kvrt::test
