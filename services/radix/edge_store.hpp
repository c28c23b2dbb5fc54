#pragma once
// EdgeStore: the memory of a tree's edges, recycled by size class.
//
// Why not malloc/free per edge: evicting a node frees its edge, and glibc's
// free() of a multi-kilobyte chunk reads the chunk's own header and its
// neighbours' (coalescing), which for a cold edge are 2-5 cache misses —
// several hundred ns per evicted node, more than everything else eviction
// does (0x08E). Here a released block goes onto a free list kept outside the
// block, so releasing never touches the block's memory, and the next edge of
// that class reuses it.
//
// Size classes are 4 per power of two (at most 25% slack per block). Blocks
// are returned to the system only by clear() or destruction: the store holds
// at most the peak edge memory per class, which the pool capacity bounds.
#include <cstdint>
#include <memory>
#include <vector>

namespace kvrt {

class EdgeStore {
 public:
  EdgeStore() = default;
  EdgeStore(EdgeStore&&) noexcept = default;
  EdgeStore& operator=(EdgeStore&&) noexcept = default;
  EdgeStore(const EdgeStore&) = delete;
  EdgeStore& operator=(const EdgeStore&) = delete;

  struct Block {
    uint64_t* words = nullptr;
    uint32_t size_class = 0;
  };
  // A block of at least `words` 64-bit words, contents unspecified.
  Block acquire(size_t words);
  // Returns a block to its class's free list without touching its memory.
  void release(Block block) {
    if (block.words != nullptr) free_[block.size_class].push_back(block.words);
  }
  // Frees every block, in use or not (the tree is being emptied).
  void clear();

  size_t reserved_words() const { return reserved_words_; }  // held from the system [words]

 private:
  static size_t size_class(size_t words);
  static size_t class_words(size_t size_class);

  std::vector<std::vector<uint64_t*>> free_;         // per class
  std::vector<std::unique_ptr<uint64_t[]>> blocks_;  // every block ever acquired
  size_t reserved_words_ = 0;
};

}  // namespace kvrt
