// CudaVmmBacking and CudaPeerView over cuda_vmm_shim.hpp (compiled by g++;
// see cuda_vmm_backing.hpp for the mapping of PageBacking onto the driver).
#include "gpu/cuda_vmm_backing.hpp"

#include <string>

#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "gpu/cuda_vmm_shim.hpp"

namespace kvrt {
namespace {

Error driver_error(const char* call, int rc) {
  return make_error(ErrorCode::os_mapping_failed, std::string(call) + ": " + kvrt_vmm_error_string(rc), call);
}

Error runtime_error(const char* call, int rc) {
  return make_error(ErrorCode::io, std::string(call) + ": " + kvrt_cuda_error_string(rc), call);
}

class DriverVmmBacking final : public CudaVmmBacking {
 public:
  explicit DriverVmmBacking(int device) : device_(device) {}
  ~DriverVmmBacking() override { release(); }
  DriverVmmBacking(const DriverVmmBacking&) = delete;
  DriverVmmBacking& operator=(const DriverVmmBacking&) = delete;

  Status create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) override {
    if (base_ != 0) return make_error(ErrorCode::invalid_argument, "backing already created", "backing");
    uint64_t granularity = 0;
    if (int rc = kvrt_vmm_granularity(device_, &granularity); rc != 0)
      return driver_error("cuMemGetAllocationGranularity", rc);
    if (page_group_bytes == 0 || granularity == 0 || page_group_bytes % granularity != 0)
      return make_error(ErrorCode::config_field,
                        "G = " + std::to_string(page_group_bytes) + " B is not a multiple of the device's VMM " +
                            "granularity (" + std::to_string(granularity) + " B)",
                        "page_group_bytes");
    if (reserved_bytes % page_group_bytes != 0 || pool_bytes % page_group_bytes != 0)
      return make_error(ErrorCode::invalid_argument, "reservation or pool is not a whole number of page groups",
                        "reserved_bytes");
    uint64_t va = 0;
    if (int rc = kvrt_vmm_address_reserve(device_, reserved_bytes, page_group_bytes, &va); rc != 0)
      return driver_error("cuMemAddressReserve", rc);
    base_ = va;
    reserved_bytes_ = reserved_bytes;
    page_bytes_ = page_group_bytes;
    mapped_.assign(reserved_bytes / page_group_bytes, false);
    // Physical pages exist before any is mapped (0x06B init).
    for (uint64_t h = 0; h < pool_bytes / page_group_bytes; ++h) {
      uint64_t handle = 0;
      if (int rc = kvrt_vmm_create(device_, page_group_bytes, &handle); rc != 0) {
        release();
        return driver_error("cuMemCreate", rc);
      }
      handles_.push_back(handle);
    }
    return Status::success();
  }

  Status map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) override {
    KVRT_TRY(check_range(va_offset, bytes));
    if (pool_offset % page_bytes_ != 0 || pool_offset / page_bytes_ + bytes / page_bytes_ > handles_.size())
      return make_error(ErrorCode::coordinate_out_of_range, "mapping outside the handle pool", "pool_offset");
    const uint64_t first = va_offset / page_bytes_, count = bytes / page_bytes_;
    for (uint64_t i = 0; i < count; ++i) {
      // cuMemMap refuses a mapped range; MAP_FIXED semantics (PageBacking)
      // say map() replaces what the page showed, so unmap it first.
      if (Status s = unmap_page(first + i); !s.ok()) return undo(first, i, s);
      const uint64_t handle = handles_[pool_offset / page_bytes_ + i];
      if (int rc = kvrt_vmm_map(device_, base_ + (first + i) * page_bytes_, page_bytes_, handle); rc != 0)
        return undo(first, i, driver_error("cuMemMap", rc));
      mapped_[first + i] = true;
    }
    return Status::success();
  }

  Status unmap(uint64_t va_offset, uint64_t bytes) override {
    KVRT_TRY(check_range(va_offset, bytes));
    for (uint64_t p = va_offset / page_bytes_; p < (va_offset + bytes) / page_bytes_; ++p) KVRT_TRY(unmap_page(p));
    return Status::success();
  }

  void release() override {
    if (base_ == 0 && handles_.empty()) return;
    for (uint64_t p = 0; p < mapped_.size(); ++p) (void)unmap_page(p);
    for (uint64_t h : handles_) (void)kvrt_vmm_release(h);
    if (base_ != 0) (void)kvrt_vmm_address_free(device_, base_, reserved_bytes_);
    handles_.clear();
    mapped_.clear();
    base_ = reserved_bytes_ = page_bytes_ = 0;
  }

  std::byte* reservation_base() const override { return reinterpret_cast<std::byte*>(base_); }
  int device() const override { return device_; }

  Result<int> export_handle_fd(uint64_t handle) override {
    if (handle >= handles_.size())
      return make_error(ErrorCode::coordinate_out_of_range, "handle " + std::to_string(handle) + " does not exist",
                        "handle");
    int fd = -1;
    if (int rc = kvrt_vmm_export_fd(device_, handles_[handle], &fd); rc != 0)
      return driver_error("cuMemExportToShareableHandle", rc);
    return fd;
  }

  Status write(uint64_t va_offset, std::span<const uint8_t> data) override {
    KVRT_TRY(check_mapped(va_offset, data.size()));
    if (int rc = kvrt_cuda_memcpy_h2d(reinterpret_cast<void*>(base_ + va_offset), data.data(), data.size()); rc != 0)
      return runtime_error("cudaMemcpy", rc);
    return Status::success();
  }

  Status read(uint64_t va_offset, std::span<uint8_t> out) const override {
    KVRT_TRY(check_mapped(va_offset, out.size()));
    if (int rc = kvrt_cuda_memcpy_d2h(out.data(), reinterpret_cast<const void*>(base_ + va_offset), out.size());
        rc != 0)
      return runtime_error("cudaMemcpy", rc);
    return Status::success();
  }

  Status copy_on_device(uint64_t src_offset, uint64_t dst_offset, uint64_t bytes) override {
    KVRT_TRY(check_mapped(src_offset, bytes));
    KVRT_TRY(check_mapped(dst_offset, bytes));
    if (src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
      return make_error(ErrorCode::invalid_argument, "source and destination overlap", "dst_offset");
    const uint64_t copy[3] = {src_offset, dst_offset, bytes};
    if (int rc = kvrt_cuda_copy_ranges(reinterpret_cast<void*>(base_), copy, 1); rc != 0)
      return runtime_error("copy_ranges_kernel", rc);
    return Status::success();
  }

 private:
  Status check_range(uint64_t va_offset, uint64_t bytes) const {
    if (base_ == 0) return make_error(ErrorCode::invalid_argument, "backing not created", "backing");
    if (bytes == 0 || va_offset % page_bytes_ != 0 || bytes % page_bytes_ != 0)
      return make_error(ErrorCode::invalid_argument, "not whole page groups", "offset");
    if (va_offset + bytes > reserved_bytes_)
      return make_error(ErrorCode::coordinate_out_of_range, "range outside the reservation", "offset");
    return Status::success();
  }

  // A device access to an unmapped page is an illegal address that poisons
  // the context, so host copies check every page they touch first.
  Status check_mapped(uint64_t va_offset, uint64_t bytes) const {
    if (base_ == 0) return make_error(ErrorCode::invalid_argument, "backing not created", "backing");
    if (bytes == 0 || va_offset + bytes > reserved_bytes_ || va_offset + bytes < va_offset)
      return make_error(ErrorCode::coordinate_out_of_range, "range outside the reservation", "offset");
    for (uint64_t p = va_offset / page_bytes_; p <= (va_offset + bytes - 1) / page_bytes_; ++p)
      if (!mapped_[p])
        return make_error(ErrorCode::page_not_mapped, "page " + std::to_string(p) + " of the reservation is not mapped",
                          "offset");
    return Status::success();
  }

  Status unmap_page(uint64_t page) {
    if (!mapped_[page]) return Status::success();
    if (int rc = kvrt_vmm_unmap(device_, base_ + page * page_bytes_, page_bytes_); rc != 0)
      return driver_error("cuMemUnmap", rc);
    mapped_[page] = false;
    return Status::success();
  }

  // Unmaps the `done` pages this map() call mapped, then reports `error`.
  Status undo(uint64_t first, uint64_t done, Status error) {
    for (uint64_t i = 0; i < done; ++i) (void)unmap_page(first + i);
    return error;
  }

  int device_;
  uint64_t base_ = 0;              // device virtual address of the reservation
  uint64_t reserved_bytes_ = 0;    // [bytes of address space]
  uint64_t page_bytes_ = 0;        // G [bytes]
  std::vector<uint64_t> handles_;  // handle id -> CUmemGenericAllocationHandle
  std::vector<bool> mapped_;       // reservation page -> mapped
};

class DriverPeerView final : public CudaPeerView {
 public:
  DriverPeerView(int device, uint64_t page_bytes) : device_(device), page_bytes_(page_bytes) {}
  ~DriverPeerView() override {
    for (uint64_t p = 0; p < mapped_pages_; ++p) (void)kvrt_vmm_unmap(device_, base_ + p * page_bytes_, page_bytes_);
    for (uint64_t h : handles_) (void)kvrt_vmm_release(h);
    if (base_ != 0) (void)kvrt_vmm_address_free(device_, base_, bytes_);
  }
  DriverPeerView(const DriverPeerView&) = delete;
  DriverPeerView& operator=(const DriverPeerView&) = delete;

  Status build(std::span<const int> fds) {
    bytes_ = fds.size() * page_bytes_;
    uint64_t va = 0;
    if (int rc = kvrt_vmm_address_reserve(device_, bytes_, page_bytes_, &va); rc != 0)
      return driver_error("cuMemAddressReserve", rc);
    base_ = va;
    for (int fd : fds) {
      uint64_t handle = 0;
      if (int rc = kvrt_vmm_import_fd(device_, fd, &handle); rc != 0)
        return driver_error("cuMemImportFromShareableHandle", rc);
      handles_.push_back(handle);
      if (int rc = kvrt_vmm_map(device_, base_ + mapped_pages_ * page_bytes_, page_bytes_, handle); rc != 0)
        return driver_error("cuMemMap", rc);
      ++mapped_pages_;
    }
    return Status::success();
  }

  uint64_t bytes() const override { return bytes_; }
  Status read(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset + out.size() > bytes_ || offset + out.size() < offset)
      return make_error(ErrorCode::coordinate_out_of_range, "read outside the view", "offset");
    if (int rc = kvrt_cuda_memcpy_d2h(out.data(), reinterpret_cast<const void*>(base_ + offset), out.size()); rc != 0)
      return runtime_error("cudaMemcpy", rc);
    return Status::success();
  }

 private:
  int device_;
  uint64_t page_bytes_;
  uint64_t base_ = 0;
  uint64_t bytes_ = 0;
  uint64_t mapped_pages_ = 0;
  std::vector<uint64_t> handles_;
};

Status require_device(int device) {
  const CudaDeviceProbe probe = probe_cuda_device();
  if (!probe.available) return make_error(ErrorCode::io, probe.reason, "cuda");
  if (device < 0 || device >= probe.device_count)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "device " + std::to_string(device) + " of " + std::to_string(probe.device_count), "device");
  return Status::success();
}

}  // namespace

Result<uint64_t> cuda_vmm_granularity(int device) {
  KVRT_TRY(require_device(device));
  uint64_t g = 0;
  if (int rc = kvrt_vmm_granularity(device, &g); rc != 0) return driver_error("cuMemGetAllocationGranularity", rc);
  return g;
}

Result<std::unique_ptr<CudaVmmBacking>> make_cuda_vmm_backing(int device) {
  KVRT_TRY(require_device(device));
  return std::unique_ptr<CudaVmmBacking>(new DriverVmmBacking(device));
}

Result<std::unique_ptr<CudaPeerView>> map_cuda_peer_view(int device, std::span<const int> fds,
                                                         uint64_t page_group_bytes) {
  KVRT_TRY(require_device(device));
  if (fds.empty() || page_group_bytes == 0)
    return make_error(ErrorCode::invalid_argument, "a view needs at least one page of G > 0 bytes", "fds");
  auto view = std::make_unique<DriverPeerView>(device, page_group_bytes);
  KVRT_TRY(view->build(fds));  // on error the destructor undoes what was built
  return std::unique_ptr<CudaPeerView>(std::move(view));
}

}  // namespace kvrt
