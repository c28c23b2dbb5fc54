// [gpu][backend] / [gpu][vmm]: the CUDA backend against the CPU backend on
// the same seeded input, byte for byte, and the mapper's CUDA page backing
// (gpu/cuda_vmm_backing.hpp) through a map / write / read / export / unmap
// round trip (check_vmm_mapper below).
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/cuda_error.hpp"
#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "gpu/cuda_vmm_backing.hpp"
#include "services/mapper/prefetching_backing.hpp"
#include "services/mapper/vmm_mapper.hpp"

namespace {

int fail(const char* what, const kvrt::Error& e) {
  std::printf("FAIL %s: %s\n", what, e.describe().c_str());
  return 1;
}

// The device copy kernel the mapper's CUDA page backing uses
// (kvrt_cuda_copy_ranges): disjoint block-granular copies (COW of r rows,
// 0x05C) plus an unaligned one, against the same copies made on the host.
int check_copy_ranges(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t bytes = 64 * 16 * 1024;  // 64 blocks of 16 KiB
  std::vector<uint8_t> want(bytes);
  for (auto& b : want) b = static_cast<uint8_t>(rng());
  std::vector<uint64_t> flat;  // (source, destination, bytes) per copy
  for (uint64_t i = 0; i < 16; ++i) flat.insert(flat.end(), {i * 16384, (32 + i) * 16384, (i % 16 + 1) * 1024});
  flat.insert(flat.end(), {3, 48 * 16384 + 5, 1001});
  void* device = nullptr;
  if (int rc = kvrt_cuda_malloc(&device, bytes); rc != 0)
    return fail("cudaMalloc", kvrt::gpu::cuda_error("cudaMalloc", rc));
  int rc = kvrt_cuda_memcpy_h2d(device, want.data(), bytes);
  if (rc == 0) rc = kvrt_cuda_copy_ranges(device, flat.data(), flat.size() / 3);
  std::vector<uint8_t> got(bytes);
  if (rc == 0) rc = kvrt_cuda_memcpy_d2h(got.data(), device, bytes);
  (void)kvrt_cuda_free(device);
  if (rc != 0) return fail("copy_ranges", kvrt::gpu::cuda_error("copy_ranges_kernel", rc));
  for (size_t k = 0; k < flat.size(); k += 3)
    std::memmove(want.data() + flat[k + 1], want.data() + flat[k], flat[k + 2]);
  if (got != want) {
    std::printf("FAIL copy_ranges: device bytes differ from the host reference (seed %llu)\n",
                static_cast<unsigned long long>(seed));
    return 1;
  }
  std::printf("ok   copy_ranges (%zu ranges, seed %llu)\n", flat.size() / 3, static_cast<unsigned long long>(seed));
  return 0;
}

// The mapper over CUDA VMM (0x06B, 0x06C): L=1, B=2, rows of
// H_kv=8 x d_h=128 x 2 B = 2 KiB, G = the device's VMM granularity (2 MiB on
// H100/H200), two pages per slot, three bundles of 2 handles.
kvrt::MapperConfig vmm_config(uint64_t g) {
  kvrt::MapperConfig c;
  c.local_layers = 1;
  c.request_slots = 2;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.element_bytes = 2;
  c.page_group_bytes = g;
  c.max_tokens = static_cast<uint32_t>(2 * g / 2048);
  c.handle_count = 2 * 3;
  return c;
}

#define VMM_REQUIRE(expr, what)                                    \
  do {                                                             \
    auto vmm_status_ = (expr);                                     \
    if (!vmm_status_.ok()) return fail(what, vmm_status_.error()); \
  } while (0)

int mismatch(const char* what) {
  std::printf("FAIL vmm %s\n", what);
  return 1;
}

int check_vmm_mapper(uint64_t seed) {
  using namespace kvrt;
  auto granularity = cuda_vmm_granularity(0);
  if (!granularity.ok()) return fail("cuda_vmm_granularity", granularity.error());
  const uint64_t g = *granularity;
  const MapperConfig c = vmm_config(g);
  auto made_backing = make_cuda_vmm_backing(0);
  if (!made_backing.ok()) return fail("make_cuda_vmm_backing", made_backing.error());
  CudaVmmBacking* dev = made_backing->get();
  auto made = VmmMapper::init(c, std::move(made_backing).value());
  if (!made.ok()) return fail("VmmMapper::init (cuMemAddressReserve, cuMemCreate)", made.error());
  VmmMapper& m = *made.value();
  const MapperGeometry& geo = m.geometry();

  // Map: X's frontier covers both pages of its K0 and V0 ranges (4 handles).
  auto x = m.alloc_reqid(RequestId{1}, RequestGeneration{1}, c.max_tokens);
  if (!x.ok()) return fail("alloc_reqid", x.error());
  auto stepped = m.step({{RequestId{1}, c.max_tokens}}, MappingPath::synchronous);
  if (!stepped.ok()) return fail("step (cuMemMap, cuMemSetAccess)", stepped.error());
  VMM_REQUIRE(m.validate(), "validate after map");
  if (stepped->receipts.at(0).new_mappings.size() != 4) return mismatch("step mapped other than 2 pages x 2 tensors");

  // Write through the contiguous K0 range (two page groups, two handles),
  // let a device kernel copy it into V0 with plain strides, read V0 back.
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> rows(2 * g);
  for (auto& b : rows) b = static_cast<uint8_t>(rng());
  const uint64_t k0 = geo.page_offset(geo.tensor_index(0, KvTensorKind::key), x->slot.value, 0);
  const uint64_t v0 = geo.page_offset(geo.tensor_index(0, KvTensorKind::value), x->slot.value, 0);
  VMM_REQUIRE(dev->write(k0, rows), "write through the mapped K0 range");
  VMM_REQUIRE(dev->copy_on_device(k0, v0, 2 * g), "device copy K0 -> V0 across page groups");
  std::vector<uint8_t> back(2 * g);
  VMM_REQUIRE(dev->read(v0, back), "read back V0");
  if (back != rows) return mismatch("V0 bytes differ from what was written through K0");
  VMM_REQUIRE(m.append_rows(RequestId{1}, x->generation, c.max_tokens), "append_rows");

  // Export: the handle behind V0 page q=1 (0x06C translation), as a POSIX
  // fd, imported again and mapped into a second reservation, shows the same
  // bytes. (A worker process would receive the fd over SCM_RIGHTS.)
  const uint32_t first_row_of_page1 = geo.tokens_per_page();
  auto loc = m.translate(RequestId{1}, x->generation, 0, KvTensorKind::value, first_row_of_page1, 0, 0);
  if (!loc.ok()) return fail("translate", loc.error());
  auto fd = dev->export_handle_fd(loc->handle.value);
  if (!fd.ok()) return fail("export_handle_fd (cuMemExportToShareableHandle)", fd.error());
  {
    const int fds[1] = {*fd};
    auto view = map_cuda_peer_view(0, fds, g);
    close(*fd);
    if (!view.ok()) return fail("map_cuda_peer_view (cuMemImportFromShareableHandle)", view.error());
    std::vector<uint8_t> page(g);
    VMM_REQUIRE((*view)->read(0, page), "read through the imported handle");
    if (!std::equal(page.begin(), page.end(), rows.begin() + static_cast<std::ptrdiff_t>(g)))
      return mismatch("the exported handle shows other bytes than V0 page 1");
  }

  // Unmap: X frees with unmap_now; its range is reserved and inaccessible
  // again, so a host copy through it is refused before the device sees it.
  VMM_REQUIRE(m.free_reqid(RequestId{1}, x->generation, ReleaseMode::unmap_now), "free_reqid unmap_now (cuMemUnmap)");
  if (dev->read(v0, back).ok()) return mismatch("read through an unmapped range was not refused");
  // Remap: Y takes the same slot and the same handles; the physical page kept
  // its bytes (capacity is reused; the core still says no row is valid, 0x06E).
  auto y = m.alloc_reqid(RequestId{2}, RequestGeneration{1}, c.max_tokens);
  if (!y.ok()) return fail("alloc_reqid", y.error());
  VMM_REQUIRE(m.step({{RequestId{2}, c.max_tokens}}, MappingPath::synchronous), "step after unmap (remap)");
  if (y->slot != x->slot) return mismatch("Y did not take X's slot");
  VMM_REQUIRE(dev->read(v0, back), "read after remap");
  if (back != rows) return mismatch("remapped handles show other bytes");
  if (m.check_readable(RequestId{2}, y->generation, 1).ok()) return mismatch("old rows counted as valid K/V");
  VMM_REQUIRE(m.free_reqid(RequestId{2}, y->generation, ReleaseMode::retain), "free_reqid retain");
  VMM_REQUIRE(m.shutdown(), "shutdown (cuMemUnmap, cuMemRelease, cuMemAddressFree)");
  VMM_REQUIRE(m.validate(), "validate after shutdown");

  // One step ahead on the device: the background thread maps through the
  // same backing (it makes the device current on its own thread).
  auto async_backing = make_cuda_vmm_backing(0);
  if (!async_backing.ok()) return fail("make_cuda_vmm_backing", async_backing.error());
  auto prefetching = std::make_unique<PrefetchingBacking>(std::move(async_backing).value());
  PrefetchingBacking* prefetch = prefetching.get();
  auto am = VmmMapper::init(c, std::move(prefetching));
  if (!am.ok()) return fail("VmmMapper::init (prefetching)", am.error());
  VmmMapper& a = *am.value();
  auto z = a.alloc_reqid(RequestId{3}, RequestGeneration{1}, 1);
  if (!z.ok()) return fail("alloc_reqid", z.error());
  const std::vector<StepRequest> first{{RequestId{3}, first_row_of_page1}};  // exactly one page
  VMM_REQUIRE(a.step(first, MappingPath::asynchronous), "async first step");
  VMM_REQUIRE(prefetch->prefetch(a.plan_frontier_mappings(next_decode_step(first, c.max_tokens))), "prefetch");
  VMM_REQUIRE(a.step(next_decode_step(first, c.max_tokens), MappingPath::asynchronous), "async second step");
  const PrefetchStats st = prefetch->stats();
  if (st.hits != 2 || st.background_failures != 0) {
    std::printf("FAIL vmm prefetch: %llu hits, %llu background failures (want 2, 0)\n",
                static_cast<unsigned long long>(st.hits), static_cast<unsigned long long>(st.background_failures));
    return 1;
  }
  VMM_REQUIRE(a.validate(), "validate after async steps");
  VMM_REQUIRE(a.free_reqid(RequestId{3}, z->generation, ReleaseMode::retain), "free_reqid");
  VMM_REQUIRE(a.shutdown(), "async shutdown");
  std::printf("ok   vmm mapper (G = %llu B: map, write, device copy, read, export fd, unmap, remap, prefetch)\n",
              static_cast<unsigned long long>(g));
  return 0;
}

}  // namespace

TEST_CASE("cuda copy kernel: block copies match the host's byte for byte", "[gpu][backend]") {
  REQUIRE(kvrt::gpu::require_cuda_device().ok());
  REQUIRE(check_copy_ranges(20261130) == 0);
}

TEST_CASE("cuda vmm: the mapper maps, writes, exports, unmaps and remaps device pages", "[gpu][vmm]") {
  REQUIRE(check_vmm_mapper(20261130) == 0);
}
