// keep_heap_for_serving (process_heap.hpp): a freed large message buffer stays
// in the process for the next message instead of going back to the OS.
#include "services/common/process_heap.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

TEST_CASE("a serving heap keeps a freed 8 MiB buffer for reuse", "[process_heap]") {
#if defined(__SANITIZE_ADDRESS__)
  SUCCEED("AddressSanitizer replaces malloc: glibc's knobs do not apply");
#elif !defined(__GLIBC__)
  SUCCEED("no glibc malloc knobs on this C library");
#else
  REQUIRE(kvrt::keep_heap_for_serving());
  constexpr size_t kBuffer = 8u << 20;
  // With glibc's defaults an 8 MiB block is its own mapping, unmapped on
  // free; here it comes from the heap, and the heap is not trimmed after it.
  void* p = std::malloc(kBuffer);
  REQUIRE(p != nullptr);
  std::memset(p, 1, kBuffer);
  const size_t mapped_while_held = mallinfo2().hblkhd;
  const size_t heap_while_held = mallinfo2().arena;
  std::free(p);
  CHECK(mapped_while_held < kBuffer);           // not a separate mapping
  CHECK(heap_while_held >= kBuffer);            // carved from the heap
  CHECK(mallinfo2().arena == heap_while_held);  // and the heap kept it
#endif
}
