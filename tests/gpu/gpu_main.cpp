// kvrt_gpu_tests: the CUDA device checks (Catch2, tags [gpu]...). Without a
// usable device it prints "skipped: <reason>" and exits 77, which CTest
// reports as skipped (docs/stack-notes.md); CI never has a GPU. With one:
//   kvrt_gpu_tests [catch2 arguments]     every check, or a tag such as "[ipc]"
//   kvrt_gpu_tests --bench [--quick] [--json]   the kernel benchmark table
// --ipc-child and --vmm-child are the other process of the [ipc] checks.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>

#include "gpu/cuda_probe.hpp"
#include "tests/gpu/gpu_ipc_checks.hpp"

int main(int argc, char** argv) {
  const kvrt::CudaDeviceProbe probe = kvrt::probe_cuda_device();
  if (!probe.available) {
    std::printf("skipped: %s\n", probe.reason.c_str());
    return 77;
  }
#ifndef KVRT_GPU_CHECKS_ABSENT
  if (argc >= 2 && std::strcmp(argv[1], "--ipc-child") == 0) return kvrt::test::run_ipc_child(argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "--vmm-child") == 0) return kvrt::test::run_vmm_child(argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "--bench") == 0) return kvrt::test::run_gpu_bench(argc, argv);
  std::printf("device: %s (sm_%d%d), %d device(s)\n", probe.device_name.c_str(), probe.compute_capability_major,
              probe.compute_capability_minor, probe.device_count);
  return Catch::Session().run(argc, argv);
#else
  return 77;  // unreachable: a build without CUDA never finds a device
#endif
}
