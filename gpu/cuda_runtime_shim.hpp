#pragma once
// Plain C-style entry points implemented by cuda_runtime_shim.cu. Return values
// are cudaError_t codes as int (0 = success); kvrt_cuda_error_string names them.
// Nothing here needs a CUDA header, so g++ translation units can include it.
#include <cstddef>
#include <cstdint>

extern "C" {
int kvrt_cuda_device_count(int* count);
int kvrt_cuda_device_info(int device, char* name, size_t name_len, int* major, int* minor);
int kvrt_cuda_malloc(void** ptr, size_t bytes);
int kvrt_cuda_free(void* ptr);
int kvrt_cuda_memcpy_h2d(void* dst, const void* src, size_t bytes);
int kvrt_cuda_memcpy_d2h(void* dst, const void* src, size_t bytes);
// `height` rows of `width` bytes, row i at dst + i * dst_pitch and src + i *
// src_pitch, host to device (to_device != 0) or device to host; one
// cudaMemcpy2D where the pitches allow it.
int kvrt_cuda_memcpy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
                        int to_device);
// copies[3*i+0..2] = {src_offset, dst_offset, bytes} inside the device buffer at base.
int kvrt_cuda_copy_ranges(void* base, const uint64_t* copies, size_t count);
const char* kvrt_cuda_error_string(int code);
}
