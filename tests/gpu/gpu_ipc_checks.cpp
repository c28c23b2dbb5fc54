// [gpu][ipc] Pools shared with another process, as a node shares them with
// its workers (CUDA IPC import of pools exported by another process):
//   - cudaMalloc pools: this process exports K, V and an output buffer as
//     CUDA IPC handles; a child process (this binary, --ipc-child) imports
//     them, runs paged decode over the imported pools into the imported
//     output, and exits. The parent's own decode must equal the child's bit
//     for bit (same kernels, same plan, same bytes).
//   - VMM pages (the mapper's CUDA backing): a handle exported as a POSIX fd
//     is inherited by a child (--vmm-child), which imports and maps it and
//     checks the bytes against a digest the parent passes on its command line.
#include "tests/gpu/gpu_ipc_checks.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "gpu/cuda_ipc.hpp"
#include "gpu/cuda_vmm_backing.hpp"
#include "tests/gpu/gpu_fixture.hpp"

extern char** environ;

namespace kvrt::test {
namespace {

// The scenario both processes rebuild from the same seed: fp16 pools, d =
// 128, GQA 32/8, five requests over scattered blocks.
struct IpcScenario {
  PagedScenario paged;
  std::vector<float> queries;
  executor::HeadMapping heads{32, 8};
  IpcScenario() : paged(make()) {
    std::mt19937_64 rng(0x1BC2);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    queries.resize(paged.contexts.size() * heads.q_heads * 128);
    for (float& x : queries) x = u(rng);
  }
  static PagedScenario make() {
    std::mt19937_64 rng(0x1BC1);
    return make_paged_scenario(PlainPoolShape{0, 16, 8, 128, 128, ScalarType::fp16, ScalarType::fp16},
                               {17, 600, 1024, 2500, 9000}, rng, true);
  }
  uint64_t output_floats() const { return queries.size(); }
};

gpu::DeviceKvLayer layer_over(const PlainPoolShape& s, const void* k, uint64_t k_bytes, const void* v,
                              uint64_t v_bytes) {
  auto view = executor::plain_kv_view(s, executor::KvTensorBytes{static_cast<const std::byte*>(k), k_bytes, s.k_dtype},
                                      executor::KvTensorBytes{static_cast<const std::byte*>(v), v_bytes, s.v_dtype});
  if (!view.ok()) return {};
  return gpu::DeviceKvLayer{*view};
}

int spawn_and_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

}  // namespace

int run_ipc_child(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: --ipc-child <k handle> <v handle> <out handle>\n");
    return 2;
  }
  IpcScenario sc;
  std::unique_ptr<gpu::CudaIpcMapping> mapped[3];
  for (int i = 0; i < 3; ++i) {
    auto h = gpu::CudaIpcHandle::from_hex(argv[2 + i]);
    if (!h.ok()) return std::fprintf(stderr, "child: %s\n", h.error().describe().c_str()), 3;
    auto m = gpu::cuda_ipc_import(*h);
    if (!m.ok()) return std::fprintf(stderr, "child: %s\n", m.error().describe().c_str()), 4;
    mapped[i] = std::move(m).value();
  }
  const PlainPoolShape& s = sc.paged.pool.shape();
  const gpu::DeviceKvLayer layer = layer_over(s, mapped[0]->data(), sc.paged.pool.k_bytes().size(), mapped[1]->data(),
                                              sc.paged.pool.v_bytes().size());
  void* dq = nullptr;
  if (kvrt_cuda_malloc(&dq, sc.queries.size() * sizeof(float)) != 0 ||
      kvrt_cuda_memcpy_h2d(dq, sc.queries.data(), sc.queries.size() * sizeof(float)) != 0)
    return 5;
  gpu::DeviceAttentionWorkspace ws;
  const auto requests = sc.paged.decode_requests();
  auto r = gpu::cuda_paged_decode(layer, sc.heads, requests, {static_cast<float*>(dq), sc.queries.size()},
                                  {static_cast<float*>(mapped[2]->data()), sc.output_floats()}, {}, {}, ws);
  kvrt_cuda_free(dq);
  if (!r.ok()) return std::fprintf(stderr, "child: %s\n", r.error().describe().c_str()), 6;
  return 0;
}

int run_vmm_child(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: --vmm-child <fd> <bytes> <fnv1a>\n");
    return 2;
  }
  const int fds[1] = {std::atoi(argv[2])};
  const uint64_t bytes = std::strtoull(argv[3], nullptr, 10);
  auto view = map_cuda_peer_view(0, fds, bytes);
  if (!view.ok()) return std::fprintf(stderr, "child: %s\n", view.error().describe().c_str()), 3;
  std::vector<uint8_t> page(bytes);
  if (auto s = (*view)->read(0, page); !s.ok())
    return std::fprintf(stderr, "child: %s\n", s.error().describe().c_str()), 4;
  return std::to_string(fnv1a(page)) == argv[4] ? 0 : 5;
}

TEST_CASE("cuda ipc: a worker process decodes from pools this process exported", "[gpu][ipc]") {
  IpcScenario sc;
  DevicePool pool(sc.paged.pool);
  DeviceBytes dq = device_floats(sc.queries), mine(sc.output_floats() * sizeof(float)),
              theirs(sc.output_floats() * sizeof(float));
  mine.poison();
  theirs.poison();
  gpu::DeviceAttentionWorkspace ws;
  const auto requests = sc.paged.decode_requests();
  auto r = gpu::cuda_paged_decode(pool.layer, sc.heads, requests, dq.floats(), mine.floats(), {}, {}, ws);
  REQUIRE(r.ok());
  auto hk = gpu::cuda_ipc_export(pool.k.data());
  auto hv = gpu::cuda_ipc_export(pool.v.data());
  auto ho = gpu::cuda_ipc_export(theirs.data());
  REQUIRE(hk.ok());
  REQUIRE(hv.ok());
  REQUIRE(ho.ok());
  REQUIRE(spawn_and_wait({"kvrt_gpu_tests", "--ipc-child", hk->hex(), hv->hex(), ho->hex()}) == 0);
  const auto a = mine.download<uint32_t>(sc.output_floats());
  const auto b = theirs.download<uint32_t>(sc.output_floats());
  REQUIRE(a == b);  // bit for bit, and no NaN left behind
  for (uint32_t bits : a) REQUIRE(bits != 0xffffffffu);
}

TEST_CASE("cuda ipc: handles travel as text and bad text is refused", "[gpu][ipc]") {
  gpu::CudaIpcHandle h;
  for (size_t i = 0; i < 64; ++i) h.bytes[i] = static_cast<uint8_t>(i * 37 + 5);
  auto back = gpu::CudaIpcHandle::from_hex(h.hex());
  REQUIRE(back.ok());
  REQUIRE(back->bytes == h.bytes);
  REQUIRE(!gpu::CudaIpcHandle::from_hex("abc").ok());
  std::string bad = h.hex();
  bad[17] = 'x';
  auto refused = gpu::CudaIpcHandle::from_hex(bad);
  REQUIRE(!refused.ok());
  REQUIRE(refused.error().field == "handle");
}

TEST_CASE("cuda vmm: a page handle exported as an fd is mapped by another process", "[gpu][ipc][vmm]") {
  auto g = cuda_vmm_granularity(0);
  REQUIRE(g.ok());
  auto backing = make_cuda_vmm_backing(0);
  REQUIRE(backing.ok());
  CudaVmmBacking& dev = **backing;
  REQUIRE(dev.create(2 * *g, 2 * *g, *g).ok());
  REQUIRE(dev.map(0, *g, *g).ok());  // pool handle 1 at VA page 0
  std::mt19937_64 rng(0xFD);
  std::vector<uint8_t> bytes(*g);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  REQUIRE(dev.write(0, bytes).ok());
  auto fd = dev.export_handle_fd(1);
  REQUIRE(fd.ok());
  REQUIRE(fcntl(*fd, F_SETFD, 0) == 0);  // inherited by the child across exec
  const int status = spawn_and_wait(
      {"kvrt_gpu_tests", "--vmm-child", std::to_string(*fd), std::to_string(*g), std::to_string(fnv1a(bytes))});
  close(*fd);
  dev.release();
  REQUIRE(status == 0);
}

}  // namespace kvrt::test
