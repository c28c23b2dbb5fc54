#include "services/executor/scalar_convert.hpp"

#include <string>

#include "services/executor/simd.hpp"

namespace kvrt::executor {

Status check_storage_dtype(ScalarType dtype, const char* field) {
  switch (dtype) {
    case ScalarType::fp32:
    case ScalarType::fp16:
    case ScalarType::bf16:
      return Status::success();
    case ScalarType::fp8_e4m3:
    case ScalarType::int8:
      break;
  }
  return make_error(ErrorCode::executor_unsupported_dtype,
                    "storage dtype " + std::string(to_string(dtype)) +
                        " needs a quantisation schema the executor does not implement (fp32, fp16, bf16 only)",
                    field);
}

namespace {

// One loop per (dtype, contiguous) pair so that each vectorises on its own.
template <class Out>
KVRT_INLINE void widen_impl(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, Out* dst) {
  if (dtype == ScalarType::fp32) {
    const float* s = static_cast<const float*>(src);
    if (stride == 1)
      for (std::size_t i = 0; i < n; ++i) dst[i] = Out(s[i]);
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = Out(s[std::ptrdiff_t(i) * stride]);
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (dtype == ScalarType::bf16) {
    if (stride == 1)
      for (std::size_t i = 0; i < n; ++i) dst[i] = Out(bf16_to_float(s[i]));
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = Out(bf16_to_float(s[std::ptrdiff_t(i) * stride]));
    return;
  }
  KVRT_ASSERT(dtype == ScalarType::fp16, "widen_scalars on an unchecked dtype");
  if (stride == 1)
    for (std::size_t i = 0; i < n; ++i) dst[i] = Out(fp16_to_float(s[i]));
  else
    for (std::size_t i = 0; i < n; ++i) dst[i] = Out(fp16_to_float(s[std::ptrdiff_t(i) * stride]));
}

}  // namespace

KVRT_SIMD_CLONES
void widen_scalars(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, float* dst) {
  widen_impl(dtype, src, stride, n, dst);
}

void widen_scalars(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, double* dst) {
  widen_impl(dtype, src, stride, n, dst);
}

void narrow_scalars(ScalarType dtype, const float* src, std::size_t n, void* dst) {
  switch (dtype) {
    case ScalarType::fp32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case ScalarType::fp16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = float_to_fp16(src[i]);
      return;
    }
    case ScalarType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      return;
    }
    case ScalarType::fp8_e4m3:
    case ScalarType::int8:
      break;
  }
  KVRT_ASSERT(false, "narrow_scalars on an unchecked dtype " + std::string(to_string(dtype)));
}

double load_scalar(ScalarType dtype, const void* src) {
  double out = 0;
  widen_impl(dtype, src, 1, 1, &out);
  return out;
}

}  // namespace kvrt::executor
