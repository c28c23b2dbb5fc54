#include <cstring>
#include <vector>

#include "services/compute/compute_backend.hpp"

namespace kvrt {

Status check_copy_ranges(uint64_t buffer_bytes, std::span<const ByteRangeCopy> copies) {
  for (size_t i = 0; i < copies.size(); ++i) {
    const auto& c = copies[i];
    const std::string where = "copies[" + std::to_string(i) + "]";
    if (c.bytes > buffer_bytes || c.src_offset > buffer_bytes - c.bytes || c.dst_offset > buffer_bytes - c.bytes)
      return make_error(ErrorCode::invalid_argument,
                        "range of " + std::to_string(c.bytes) + " bytes at src " + std::to_string(c.src_offset) +
                            " / dst " + std::to_string(c.dst_offset) + " exceeds buffer of " +
                            std::to_string(buffer_bytes) + " bytes",
                        where);
    const bool disjoint = c.src_offset + c.bytes <= c.dst_offset || c.dst_offset + c.bytes <= c.src_offset;
    if (c.bytes != 0 && !disjoint)
      return make_error(ErrorCode::invalid_argument, "source and destination ranges overlap", where);
  }
  return Status::success();
}

namespace {

class HostBuffer final : public BackendBuffer {
 public:
  explicit HostBuffer(uint64_t bytes) : data_(bytes) {}
  uint64_t size_bytes() const override { return data_.size(); }
  uint8_t* data() { return data_.data(); }
  const uint8_t* data() const { return data_.data(); }

 private:
  std::vector<uint8_t> data_;
};

Status check_span(const BackendBuffer& b, uint64_t offset, uint64_t bytes) {
  if (bytes > b.size_bytes() || offset > b.size_bytes() - bytes)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " exceed buffer of " +
                          std::to_string(b.size_bytes()) + " bytes",
                      "offset");
  return Status::success();
}

class CpuBackend final : public ComputeBackend {
 public:
  std::string_view name() const override { return "cpu"; }
  Result<std::unique_ptr<BackendBuffer>> allocate(uint64_t bytes) override {
    return std::unique_ptr<BackendBuffer>(new HostBuffer(bytes));
  }
  Status write(BackendBuffer& buffer, uint64_t offset, std::span<const uint8_t> data) override {
    KVRT_TRY(check_span(buffer, offset, data.size()));
    std::memcpy(static_cast<HostBuffer&>(buffer).data() + offset, data.data(), data.size());
    return Status::success();
  }
  Status read(const BackendBuffer& buffer, uint64_t offset, std::span<uint8_t> out) override {
    KVRT_TRY(check_span(buffer, offset, out.size()));
    std::memcpy(out.data(), static_cast<const HostBuffer&>(buffer).data() + offset, out.size());
    return Status::success();
  }
  Status copy_ranges(BackendBuffer& buffer, std::span<const ByteRangeCopy> copies) override {
    KVRT_TRY(check_copy_ranges(buffer.size_bytes(), copies));
    uint8_t* base = static_cast<HostBuffer&>(buffer).data();
    for (const auto& c : copies) std::memcpy(base + c.dst_offset, base + c.src_offset, c.bytes);
    return Status::success();
  }
};

}  // namespace

std::unique_ptr<ComputeBackend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kvrt
