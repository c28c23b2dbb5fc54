#include "services/common/process_heap.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc (features.h) before it is tested

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvrt {

bool keep_heap_for_serving(unsigned long retain_bytes, unsigned long mmap_threshold_bytes) {
#if defined(__GLIBC__)
  // Setting either threshold also turns off glibc's dynamic mmap threshold.
  bool ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold_bytes)) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(retain_bytes)) == 1 && ok;
  // Grow the heap in large steps, so growth is rare as well as trimming.
  ok = mallopt(M_TOP_PAD, static_cast<int>(retain_bytes / 4)) == 1 && ok;
  return ok;
#else
  (void)retain_bytes;
  (void)mmap_threshold_bytes;
  return false;
#endif
}

}  // namespace kvrt
