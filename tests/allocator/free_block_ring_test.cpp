// [allocator][ring] FreeBlockRing, the FIFO of FREE blocks: a
// seeded random walk of every operation, single and bulk, across the wrap
// point, against std::deque as the reference; the seed is printed on failure.
#include "services/allocator/free_block_ring.hpp"

#include <catch2/catch.hpp>
#include <deque>
#include <random>
#include <vector>

namespace kvrt {
namespace {

void check_same(const FreeBlockRing& ring, const std::deque<uint32_t>& ref) {
  REQUIRE(ring.size() == ref.size());
  REQUIRE(ring.empty() == ref.empty());
  const std::vector<uint32_t> members = ring.members();
  REQUIRE(std::vector<uint32_t>(ref.begin(), ref.end()) == members);
}

}  // namespace

TEST_CASE("free block ring: random single and bulk operations match a deque across the wrap", "[allocator][ring]") {
  for (const uint64_t seed : {20261130ull, 7ull, 424242ull}) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    for (const uint32_t capacity : {1u, 2u, 7u, 64u}) {
      INFO("capacity " << capacity);
      FreeBlockRing ring(capacity);
      std::deque<uint32_t> ref;
      // Blocks not in the ring, so a block is never queued twice (as in a pool).
      std::vector<uint32_t> outside(capacity);
      for (uint32_t b = 0; b < capacity; ++b) outside[b] = b;
      auto take_outside = [&] {
        const size_t k = rng() % outside.size();
        const uint32_t b = outside[k];
        outside[k] = outside.back();
        outside.pop_back();
        return b;
      };
      for (int step = 0; step < 4000; ++step) {
        const int op = static_cast<int>(rng() % 5);
        if (op == 0 && !outside.empty()) {
          const uint32_t b = take_outside();
          ring.push_back(b);
          ref.push_back(b);
        } else if (op == 1 && !outside.empty()) {  // rollback returns a reservation to the front
          const uint32_t b = take_outside();
          ring.push_front(b);
          ref.push_front(b);
        } else if (op == 2 && !ref.empty()) {
          REQUIRE(ring.pop_front() == ref.front());
          outside.push_back(ref.front());
          ref.pop_front();
        } else if (op == 3 && !ref.empty()) {  // allocate's run
          const uint32_t n = static_cast<uint32_t>(rng() % (ref.size() + 1));
          std::vector<uint32_t> popped;
          ring.pop_front_n(n, [&](uint32_t b) { popped.push_back(b); });
          REQUIRE(popped == std::vector<uint32_t>(ref.begin(), ref.begin() + n));
          ref.erase(ref.begin(), ref.begin() + n);
          outside.insert(outside.end(), popped.begin(), popped.end());
        } else if (op == 4 && !outside.empty()) {  // release's run
          const uint32_t n = static_cast<uint32_t>(rng() % (outside.size() + 1));
          std::vector<uint32_t> run;
          for (uint32_t i = 0; i < n; ++i) run.push_back(take_outside());
          ring.push_back_n(run.data(), n);
          ref.insert(ref.end(), run.begin(), run.end());
        }
        check_same(ring, ref);
      }
    }
  }
}

}  // namespace kvrt
