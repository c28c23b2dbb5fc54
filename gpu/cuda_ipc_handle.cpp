// CudaIpcHandle text form; built with or without CUDA (a worker without a
// GPU still parses and reports a receipt's handle).
#include "gpu/cuda_ipc.hpp"

namespace kvrt::gpu {

std::string CudaIpcHandle::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(128);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

Result<CudaIpcHandle> CudaIpcHandle::from_hex(std::string_view text) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() != 128)
    return make_error(ErrorCode::invalid_argument,
                      "a CUDA IPC handle is 128 hex digits, got " + std::to_string(text.size()) + " characters",
                      "handle");
  CudaIpcHandle h;
  for (size_t i = 0; i < 64; ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return make_error(ErrorCode::invalid_argument, "non-hex character at " + std::to_string(2 * i), "handle");
    h.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return h;
}

}  // namespace kvrt::gpu
