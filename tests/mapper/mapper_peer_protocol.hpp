#pragma once
// Shared by tests/mapper_cross_process_test.cpp (node role) and
// tests/mapper_peer_main.cpp (worker role): the seeded row bytes both sides
// regenerate independently, and the fd number the worker's socket arrives on.
#include <cstdint>

namespace kvrt::test {

inline constexpr int kMapperPeerSocketFd = 3;  // dup2 target of the worker's socket end

// Byte `index` of the rows seeded with `seed` (a splitmix-style mix, so a
// shifted or swapped page shows up as a mismatch).
inline uint8_t seeded_row_byte(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint8_t>(z ^ (z >> 31));
}

}  // namespace kvrt::test
