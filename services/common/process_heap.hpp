#pragma once
// The heap policy of a kvrt process (glibc malloc).
//
// A node batch receipt is tens to hundreds of KiB (86 KiB for 256 one-block
// allocations), and every message passes through a few buffers of that size
// (Cap'n Proto output, the actor's wire copy, the middleman's buffer). With
// glibc's defaults a freed buffer at the top of the heap is given back to the
// OS and the next message faults its pages in again; on this VM a page fault
// costs microseconds. A serving process keeps its heap instead: freed memory
// is reused, not trimmed per message, which makes a 256-operation batch
// 10-30% faster per operation (`kvrt bench rpc`, docs/benchmarks.md).
namespace kvrt {

// Keeps up to `retain_bytes` of freed heap in the process (a cap, not a
// reservation), grows the heap in steps of a quarter of it, and serves every
// allocation below `mmap_threshold_bytes` from the heap. Call once, early,
// before threads start. Returns false where the C library has no such knobs.
bool keep_heap_for_serving(unsigned long retain_bytes = 64ul << 20, unsigned long mmap_threshold_bytes = 32ul << 20);

}  // namespace kvrt
