#pragma once
// splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator whose
// outputs pass BigCrush, cheap enough not to dominate the work it drives. The
// one definition kvrt draws from: model weights, workloads, worker token
// rows, benchmarks and test fixtures all call it, so "seed s" means the same
// stream everywhere.
#include <cstdint>

namespace kvrt {

// The output function: mixes one 64-bit word into another, bijectively.
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The generator's increment (the golden ratio in 64 bits).
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ull;

// One step from state x: the output of the state after x.
constexpr uint64_t splitmix64(uint64_t x) { return splitmix64_mix(x + kSplitMix64Gamma); }

// The stream: next() advances the state by the gamma and mixes it.
struct SplitMix64 {
  uint64_t state = 0;
  constexpr uint64_t next() { return splitmix64_mix(state += kSplitMix64Gamma); }
};

}  // namespace kvrt
