// Driver VMM entry points for the mapper's CUDA realisation (spec 0x06B: reserve virtual tensors, create physical pages
// unmapped, map at the frontier, unmap). Includes only CUDA and standard headers (docs/stack-notes.md).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "cuda_vmm_shim.hpp"

namespace {

struct DriverVmm {
  int status = 0;  // 0, or the negated cudaError_t of the failed lookup
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 export_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 import_handle = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
};

// The ABI of every VMM call has been stable since CUDA 10.2; asking for the
// 12.0 versions works with any driver a CUDA 13 runtime accepts.
constexpr unsigned int kDriverAbi = 12000;

template <class Fn>
int resolve(const char* symbol, Fn* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t rc = cudaGetDriverEntryPointByVersion(symbol, &fn, kDriverAbi, cudaEnableDefault, &found);
  if (rc != cudaSuccess) return -static_cast<int>(rc);
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) return -static_cast<int>(cudaErrorSymbolNotFound);
  *out = reinterpret_cast<Fn>(fn);
  return 0;
}

DriverVmm load() {
  DriverVmm d;
  int rc = 0;
  if (rc == 0) rc = resolve("cuMemGetAllocationGranularity", &d.granularity);
  if (rc == 0) rc = resolve("cuMemAddressReserve", &d.address_reserve);
  if (rc == 0) rc = resolve("cuMemAddressFree", &d.address_free);
  if (rc == 0) rc = resolve("cuMemCreate", &d.create);
  if (rc == 0) rc = resolve("cuMemRelease", &d.release);
  if (rc == 0) rc = resolve("cuMemMap", &d.map);
  if (rc == 0) rc = resolve("cuMemUnmap", &d.unmap);
  if (rc == 0) rc = resolve("cuMemSetAccess", &d.set_access);
  if (rc == 0) rc = resolve("cuMemExportToShareableHandle", &d.export_handle);
  if (rc == 0) rc = resolve("cuMemImportFromShareableHandle", &d.import_handle);
  if (rc == 0) rc = resolve("cuGetErrorString", &d.error_string);
  d.status = rc;
  return d;
}

// Resolved once, thread-safely (function-local static); the background
// mapping thread and the owner thread share it read-only afterwards.
const DriverVmm& driver() {
  static const DriverVmm d = load();
  return d;
}

// Makes `device`'s primary context current on the calling thread (CUDA 12+
// initialises it in cudaSetDevice). Driver VMM calls need a current context,
// and the mapper may call from its background mapping thread, so every entry
// point does this first; it is a thread-local check when already current.
int enter(int device) {
  if (driver().status != 0) return driver().status;
  const cudaError_t rc = cudaSetDevice(device);
  return rc == cudaSuccess ? 0 : -static_cast<int>(rc);
}

CUmemAllocationProp exportable_device_memory(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

extern "C" {

int kvrt_vmm_granularity(int device, uint64_t* bytes) {
  if (int rc = enter(device); rc != 0) return rc;
  const CUmemAllocationProp prop = exportable_device_memory(device);
  size_t g = 0;
  const CUresult rc = driver().granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  *bytes = g;
  return static_cast<int>(rc);
}

int kvrt_vmm_address_reserve(int device, uint64_t bytes, uint64_t alignment, uint64_t* va) {
  if (int rc = enter(device); rc != 0) return rc;
  CUdeviceptr ptr = 0;
  const CUresult rc = driver().address_reserve(&ptr, bytes, alignment, 0, 0);
  *va = ptr;
  return static_cast<int>(rc);
}

int kvrt_vmm_address_free(int device, uint64_t va, uint64_t bytes) {
  if (int rc = enter(device); rc != 0) return rc;
  return static_cast<int>(driver().address_free(static_cast<CUdeviceptr>(va), bytes));
}

int kvrt_vmm_create(int device, uint64_t bytes, uint64_t* handle) {
  if (int rc = enter(device); rc != 0) return rc;
  const CUmemAllocationProp prop = exportable_device_memory(device);
  CUmemGenericAllocationHandle h = 0;
  const CUresult rc = driver().create(&h, bytes, &prop, 0);
  *handle = h;
  return static_cast<int>(rc);
}

int kvrt_vmm_release(uint64_t handle) {
  if (driver().status != 0) return driver().status;
  return static_cast<int>(driver().release(static_cast<CUmemGenericAllocationHandle>(handle)));
}

int kvrt_vmm_map(int device, uint64_t va, uint64_t bytes, uint64_t handle) {
  if (int rc = enter(device); rc != 0) return rc;
  const CUdeviceptr ptr = static_cast<CUdeviceptr>(va);
  CUresult rc = driver().map(ptr, bytes, 0, static_cast<CUmemGenericAllocationHandle>(handle), 0);
  if (rc != CUDA_SUCCESS) return static_cast<int>(rc);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  rc = driver().set_access(ptr, bytes, &access, 1);
  if (rc != CUDA_SUCCESS) (void)driver().unmap(ptr, bytes);  // never leave a mapped but inaccessible page
  return static_cast<int>(rc);
}

int kvrt_vmm_unmap(int device, uint64_t va, uint64_t bytes) {
  if (int rc = enter(device); rc != 0) return rc;
  return static_cast<int>(driver().unmap(static_cast<CUdeviceptr>(va), bytes));
}

int kvrt_vmm_export_fd(int device, uint64_t handle, int* fd) {
  if (int rc = enter(device); rc != 0) return rc;
  int out = -1;
  const CUresult rc = driver().export_handle(&out, static_cast<CUmemGenericAllocationHandle>(handle),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  *fd = out;
  return static_cast<int>(rc);
}

int kvrt_vmm_import_fd(int device, int fd, uint64_t* handle) {
  if (int rc = enter(device); rc != 0) return rc;
  CUmemGenericAllocationHandle h = 0;
  // The POSIX-fd handle type passes the descriptor itself, cast to a pointer.
  const CUresult rc = driver().import_handle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  *handle = h;
  return static_cast<int>(rc);
}

const char* kvrt_vmm_error_string(int code) {
  if (code < 0) return cudaGetErrorString(static_cast<cudaError_t>(-code));
  const char* text = nullptr;
  if (driver().error_string != nullptr && driver().error_string(static_cast<CUresult>(code), &text) == CUDA_SUCCESS &&
      text != nullptr)
    return text;
  static thread_local char unknown[48];
  std::snprintf(unknown, sizeof unknown, "CUresult %d", code);
  return unknown;
}

}  // extern "C"
