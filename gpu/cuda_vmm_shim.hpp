#pragma once
// Plain C entry points over the CUDA driver's virtual memory management API
// (cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap,
// cuMemExportToShareableHandle), implemented by cuda_vmm_shim.cu. No CUDA type
// appears here, so g++ translation units include it (docs/stack-notes.md).
//
// libcuda is never linked: the shim resolves every driver entry point once
// through cudaGetDriverEntryPointByVersion (the static runtime dlopens the
// driver), so a binary built with CUDA still starts on a machine without one.
//
// Return codes: 0 = success; > 0 a CUresult of the driver call; < 0 the
// negated cudaError_t of a runtime call (device selection, entry-point
// lookup). kvrt_vmm_error_string names either kind.
// Addresses and handles travel as uint64_t (CUdeviceptr and
// CUmemGenericAllocationHandle are both 64-bit).
#include <cstdint>

extern "C" {
// Minimum granularity [bytes] of pinned device memory on `device` that can be
// exported as a POSIX file descriptor: every G must be a multiple of it.
int kvrt_vmm_granularity(int device, uint64_t* bytes);
// Reserves `bytes` of device virtual address space aligned to `alignment`.
int kvrt_vmm_address_reserve(int device, uint64_t bytes, uint64_t alignment, uint64_t* va);
int kvrt_vmm_address_free(int device, uint64_t va, uint64_t bytes);
// Creates `bytes` of physical device memory, exportable as a POSIX fd.
int kvrt_vmm_create(int device, uint64_t bytes, uint64_t* handle);
int kvrt_vmm_release(uint64_t handle);
// Maps all of `handle` (`bytes` long) at `va` and grants `device` read-write
// access to it (cuMemMap does not make the range accessible by itself).
int kvrt_vmm_map(int device, uint64_t va, uint64_t bytes, uint64_t handle);
// Returns [va, va + bytes) to reserved, inaccessible address space.
int kvrt_vmm_unmap(int device, uint64_t va, uint64_t bytes);
// Exports `handle` as a new POSIX file descriptor owned by the caller.
int kvrt_vmm_export_fd(int device, uint64_t handle, int* fd);
// Imports a handle from a POSIX fd (exported here or by another process); the
// fd stays owned by the caller.
int kvrt_vmm_import_fd(int device, int fd, uint64_t* handle);
const char* kvrt_vmm_error_string(int code);
}
