// CUDA device checks. Without a usable device this prints
// "skipped: no CUDA device" and exits 77, which CTest reports as skipped.
// With one, every check compares the CUDA backend with the CPU backend on the
// same seeded input, byte for byte.
#include <cstdio>
#include <random>
#include <vector>

#include "services/compute/compute_backend.hpp"

namespace {

int fail(const char* what, const kvrt::Error& e) {
  std::printf("FAIL %s: %s\n", what, e.describe().c_str());
  return 1;
}

int check_copy_ranges(kvrt::ComputeBackend& gpu, uint64_t seed) {
  auto cpu = kvrt::make_cpu_backend();
  std::mt19937_64 rng(seed);
  const uint64_t bytes = 64 * 16 * 1024;  // 64 blocks of 16 KiB
  std::vector<uint8_t> init(bytes);
  for (auto& b : init) b = static_cast<uint8_t>(rng());
  // Disjoint block-granular copies (COW of r rows, 0x05C) plus unaligned ones.
  std::vector<kvrt::ByteRangeCopy> copies;
  for (uint64_t i = 0; i < 16; ++i) copies.push_back({i * 16384, (32 + i) * 16384, (i % 16 + 1) * 1024});
  copies.push_back({3, 48 * 16384 + 5, 1001});
  auto g = gpu.allocate(bytes);
  auto c = cpu->allocate(bytes);
  if (!g.ok()) return fail("allocate", g.error());
  if (auto s = gpu.write(**g, 0, init); !s.ok()) return fail("write", s.error());
  if (auto s = cpu->write(**c, 0, init); !s.ok()) return fail("write", s.error());
  if (auto s = gpu.copy_ranges(**g, copies); !s.ok()) return fail("copy_ranges", s.error());
  if (auto s = cpu->copy_ranges(**c, copies); !s.ok()) return fail("copy_ranges", s.error());
  std::vector<uint8_t> got(bytes), want(bytes);
  if (auto s = gpu.read(**g, 0, got); !s.ok()) return fail("read", s.error());
  if (auto s = cpu->read(**c, 0, want); !s.ok()) return fail("read", s.error());
  if (got != want) {
    std::printf("FAIL copy_ranges: device bytes differ from CPU reference (seed %llu)\n",
                static_cast<unsigned long long>(seed));
    return 1;
  }
  // A rejected call changes nothing.
  kvrt::ByteRangeCopy bad{0, bytes - 10, 64};
  if (gpu.copy_ranges(**g, std::span(&bad, 1)).ok()) {
    std::printf("FAIL copy_ranges accepted an out-of-bounds range\n");
    return 1;
  }
  std::printf("ok   copy_ranges (%zu ranges, seed %llu)\n", copies.size(), static_cast<unsigned long long>(seed));
  return 0;
}

}  // namespace

int main() {
  kvrt::CudaDeviceProbe probe = kvrt::probe_cuda_device();
  if (!probe.available) {
    std::printf("skipped: %s\n", probe.reason.c_str());
    return 77;
  }
  std::printf("device: %s (sm_%d%d), %d device(s)\n", probe.device_name.c_str(), probe.compute_capability_major,
              probe.compute_capability_minor, probe.device_count);
  auto gpu = kvrt::make_cuda_backend();
  if (!gpu.ok()) return fail("make_cuda_backend", gpu.error());
  int failures = 0;
  failures += check_copy_ranges(**gpu, 20261130);
  return failures == 0 ? 0 : 1;
}
