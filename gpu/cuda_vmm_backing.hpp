#pragma once
// The mapper's CUDA realisation (spec 0x06B/0x06C):
// the same PageBacking interface as MemfdBacking, over the driver's virtual
// memory management API, reached only through cuda_vmm_shim.hpp:
// - create():  cuMemAddressReserve of M_VA = 2LBR bytes of device address
//   space (address space, not HBM, 0x06A), then N_handle = pool / G physical
//   handles of G bytes each with cuMemCreate, exportable as POSIX fds. One
//   handle per page group: cuMemMap maps a handle whole (its offset argument
//   "currently must be zero"), so the pool cannot be one allocation addressed
//   by offset as the memfd pool is; handle h is pool bytes [h*G, (h+1)*G).
// - map():     cuMemMap of handle pool_offset/G at the page, then
//   cuMemSetAccess read-write for the device.
// - unmap():   cuMemUnmap; the range stays reserved and inaccessible.
// - release(): unmap what is mapped, cuMemRelease every handle, free the VA.
// Other processes get a handle as a POSIX fd (cuMemExportToShareableHandle;
// cudaIpcGetMemHandle does not work on VMM memory, docs/stack-notes.md), sent over a
// Unix socket with SCM_RIGHTS like the memfd pool, and rebuild the view with
// CudaPeerView. reservation_base() is a device address.
//
// Built with nvcc only; without CUDA (or without a device) the factories
// return a typed error and callers take the memfd path.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "services/mapper/page_backing.hpp"

namespace kvrt {

class CudaVmmBacking : public PageBacking {
 public:
  // A new POSIX fd for handle `handle` [handle id], owned by the caller.
  virtual Result<int> export_handle_fd(uint64_t handle) = 0;
  // Host <-> device copies through the reservation (the mapped pages only):
  // [va_offset, va_offset + bytes) of the contiguous virtual tensors.
  virtual Status write(uint64_t va_offset, std::span<const uint8_t> data) = 0;
  virtual Status read(uint64_t va_offset, std::span<uint8_t> out) const = 0;
  // A device kernel copies byte ranges inside the reservation (offsets from
  // its base): plain strides across page groups, no block table (0x0BJ).
  virtual Status copy_on_device(uint64_t src_offset, uint64_t dst_offset, uint64_t bytes) = 0;
  virtual int device() const = 0;
};

// The worker side: a contiguous device view of handles received as fds,
// page i backed by fds[i]. Unmapped and released on destruction.
class CudaPeerView {
 public:
  virtual ~CudaPeerView() = default;
  virtual uint64_t bytes() const = 0;  // fds.size() * G [bytes]
  virtual Status read(uint64_t offset, std::span<uint8_t> out) const = 0;
};

// Minimum page-group size G [bytes] the device can map and export.
Result<uint64_t> cuda_vmm_granularity(int device);
// Errors: io (no CUDA build / no device / driver refused).
Result<std::unique_ptr<CudaVmmBacking>> make_cuda_vmm_backing(int device);
// Imports every fd (each one handle of `page_group_bytes`) and maps them in
// order into a fresh reservation. The fds stay owned by the caller.
Result<std::unique_ptr<CudaPeerView>> map_cuda_peer_view(int device, std::span<const int> fds,
                                                         uint64_t page_group_bytes);

}  // namespace kvrt
