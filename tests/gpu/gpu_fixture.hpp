#pragma once
// Shared by the CUDA device checks (kvrt_gpu_tests): device buffers and
// device copies of the [executor] suites' plain pools.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "gpu/cuda_attention.hpp"
#include "gpu/cuda_attention_shim.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {

// cudaMalloc memory, freed by the destructor.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) { REQUIRE(kvrt_cuda_malloc(&ptr_, bytes == 0 ? 16 : bytes) == 0); }
  ~DeviceBytes() {
    if (ptr_ != nullptr) kvrt_cuda_free(ptr_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  DeviceBytes(DeviceBytes&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  void upload(const void* src, size_t bytes) { REQUIRE(kvrt_cuda_memcpy_h2d(ptr_, src, bytes) == 0); }
  template <class T>
  std::vector<T> download(size_t count) const {
    std::vector<T> out(count);
    REQUIRE(kvrt_cuda_memcpy_d2h(out.data(), ptr_, count * sizeof(T)) == 0);
    return out;
  }
  // Every float becomes NaN (0xffffffff), so an unwritten element fails.
  void poison() { REQUIRE(kvrt_cuda_memset(ptr_, 0xff, bytes_) == 0); }
  gpu::DeviceFloats floats() const { return gpu::DeviceFloats{static_cast<float*>(ptr_), bytes_ / sizeof(float)}; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// A host PlainPool copied to the device, with the device view of its layer.
struct DevicePool {
  explicit DevicePool(PlainPool& host) : k(host.k_bytes().size()), v(host.v_bytes().size()) {
    k.upload(host.k_bytes().data(), host.k_bytes().size());
    v.upload(host.v_bytes().data(), host.v_bytes().size());
    const auto& s = host.shape();
    auto view = executor::plain_kv_view(
        s, executor::KvTensorBytes{static_cast<const std::byte*>(k.data()), k.size(), s.k_dtype},
        executor::KvTensorBytes{static_cast<const std::byte*>(v.data()), v.size(), s.v_dtype});
    REQUIRE(view.ok());
    layer.view = *view;
  }
  DeviceBytes k, v;
  gpu::DeviceKvLayer layer;
};

inline DeviceBytes device_floats(const std::vector<float>& host) {
  DeviceBytes d(host.size() * sizeof(float));
  d.upload(host.data(), host.size() * sizeof(float));
  return d;
}

}  // namespace kvrt::test
