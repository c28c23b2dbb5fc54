#pragma once
// Child-process entry points of tests/gpu_ipc_checks.cpp, dispatched by
// tests/gpu_main.cpp before Catch2 sees the command line.
namespace kvrt::test {
int run_ipc_child(int argc, char** argv);  // --ipc-child <k> <v> <out>
int run_vmm_child(int argc, char** argv);  // --vmm-child <fd> <bytes> <fnv1a>
int run_gpu_bench(int argc, char** argv);  // --bench [--quick] [--json]
}  // namespace kvrt::test
