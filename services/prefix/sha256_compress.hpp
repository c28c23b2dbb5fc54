#pragma once
// SHA-256 compression (FIPS 180-4) over whole 64-byte blocks, for the hash
// chain's hot path. The chain message of a block starts with its tokens (see
// hash_chain.hpp), so the token part of block i+1 is compressed from the IV
// independently of h_i and can run interleaved with block i's dependent
// final compression: two compressions in flight on the SHA extensions.
//
// Only the x86 SHA extensions (SHA-NI) are implemented here; sha_ni_available()
// tells whether this CPU has them. Without them the chain hasher falls back to
// OpenSSL's EVP one-shot over the same message bytes, which tests also use as
// the reference for this code (bit-identical digests).
#include <cstddef>
#include <cstdint>

namespace kvrt::sha256x {

// Working state h0..h7 in FIPS order.
struct State {
  uint32_t h[8];
};

inline constexpr State kInitialState{
    {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u}};

bool sha_ni_available();

// state <- compress(state, block) for `blocks` consecutive 64-byte blocks.
// Requires sha_ni_available().
void compress(State& state, const uint8_t* data, size_t blocks);

// Two independent compressions of one 64-byte block each, interleaved round
// by round. Requires sha_ni_available().
void compress_pair(State& a, const uint8_t* a_block, State& b, const uint8_t* b_block);

// Big-endian serialisation of the state: the digest bytes.
void store_digest(const State& s, uint8_t out[32]);

}  // namespace kvrt::sha256x
