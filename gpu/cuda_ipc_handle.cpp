// CudaIpcHandle text form; built with or without CUDA (a worker without a
// GPU still parses and reports a receipt's handle).
#include "gpu/cuda_ipc.hpp"
#include "services/common/hex.hpp"

namespace kvrt::gpu {

std::string CudaIpcHandle::hex() const { return to_hex(bytes); }

Result<CudaIpcHandle> CudaIpcHandle::from_hex(std::string_view text) {
  if (text.size() != 128)
    return make_error(ErrorCode::invalid_argument,
                      "a CUDA IPC handle is 128 hex digits, got " + std::to_string(text.size()) + " characters",
                      "handle");
  CudaIpcHandle h;
  for (size_t i = 0; i < 64; ++i) {
    const int hi = hex_digit_value(text[2 * i]), lo = hex_digit_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return make_error(ErrorCode::invalid_argument, "non-hex character at " + std::to_string(2 * i), "handle");
    h.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return h;
}

}  // namespace kvrt::gpu
