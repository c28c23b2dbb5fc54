#pragma once
// StateDigest: an incrementally maintained digest of an owner's committed
// state, so a receipt costs O(what changed), never O(pool) (0x04D).
//
// The committed state is a multiset of entries (a request header, one block
// table cell, one block's generation/frontier/key, one lease...). Each entry
// is a tuple of up to four 64-bit words, the first one a domain tag. The
// digest is the sum, modulo 2^64 in each of two lanes, of a 128-bit
// pseudo-random image of every entry. Adding or removing one entry is O(1),
// independent of order, and validate() recomputes the same sum from scratch.
//
// This is a divergence detector, not a cryptographic commitment: the lanes use
// two independent multiply-fold mixes (wyhash's "mum"), so two different
// states collide with probability ~2^-128 for non-adversarial inputs. Clients
// never choose the entries' words, only the owner does.
#include <cstdint>
#include <string>

namespace kvrt {

struct StateDigest {
  uint64_t lo = 0;
  uint64_t hi = 0;
  std::string hex() const;  // 32 hex digits, hi then lo
  friend bool operator==(const StateDigest&, const StateDigest&) = default;
};

namespace detail {
inline uint64_t mum(uint64_t a, uint64_t b) {
  unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}
}  // namespace detail

class MultisetDigest {
 public:
  struct Entry {
    uint64_t w0, w1, w2, w3;
  };

  static StateDigest image(const Entry& e) {
    using detail::mum;
    // Two independent lanes; each word enters both through a different key.
    const uint64_t lo =
        mum(mum(e.w0 ^ 0xa0761d6478bd642full, e.w1 ^ 0xe7037ed1a0b428dbull) ^ e.w2, e.w3 ^ 0x8ebc6af09c88c6e3ull);
    const uint64_t hi =
        mum(mum(e.w0 ^ 0x589965cc75374cc3ull, e.w1 ^ 0x1d8e4e27c47d124full) ^ e.w3, e.w2 ^ 0x9e3779b97f4a7c15ull);
    return StateDigest{lo, hi};
  }

  // Images for owners whose entries change by counting (the
  // allocator: a block's generation and valid rows, a request's table
  // version and length move by small steps on the hot path). Such an entry's
  // image is pair_image(identity, fixed fields) plus sum_k counter_k * C_k,
  // where the C_k are pseudo-random odd coefficients of the identity. A
  // counter step then changes the digest by step * C_k, one multiply-add per
  // lane instead of removing and adding two full images. Two states with the
  // same identities collide only where sum_i dcounter_i * C_i == 0 (mod 2^64)
  // in both lanes; with odd, identity-keyed coefficients and counters far below
  // 2^32, that needs a 2^-128 coincidence like the images above.
  static StateDigest pair_image(uint64_t a, uint64_t b) {
    using detail::mum;
    return StateDigest{mum(a ^ 0x2d358dccaa6c78a5ull, b ^ 0x8bb84b93962eacc9ull),
                       mum(a ^ 0x4b33a62ed433d4a3ull, b ^ 0x4d5a2da51de1aa47ull)};
  }
  struct Coefficients {
    StateDigest first, second;  // two counters' coefficients, each odd in both lanes
  };
  // `kind` separates entry kinds that share identity words.
  static Coefficients coefficients(uint64_t kind, uint64_t identity) {
    // One 64x64->128 product per lane; the rotated factor brings the
    // identity's high bits into the product's low half.
    const uint64_t x = identity ^ kind;
    const unsigned __int128 p =
        static_cast<unsigned __int128>(x ^ 0xa0761d6478bd642full) * (((x << 29) | (x >> 35)) ^ 0xe7037ed1a0b428dbull);
    const unsigned __int128 q =
        static_cast<unsigned __int128>(x ^ 0x8ebc6af09c88c6e3ull) * (((x << 41) | (x >> 23)) ^ 0x589965cc75374cc3ull);
    return Coefficients{{static_cast<uint64_t>(p) | 1, static_cast<uint64_t>(q) | 1},
                        {static_cast<uint64_t>(p >> 64) | 1, static_cast<uint64_t>(q >> 64) | 1}};
  }
  // One odd coefficient per lane for an entry with a single counter word
  // (the two halves of one product): half the multiplies of coefficients().
  static StateDigest coefficient(uint64_t kind, uint64_t identity) {
    const uint64_t x = identity ^ kind;
    const unsigned __int128 p =
        static_cast<unsigned __int128>(x ^ 0x8ebc6af09c88c6e3ull) * (((x << 29) | (x >> 35)) ^ 0x1d8e4e27c47d124full);
    return StateDigest{static_cast<uint64_t>(p) | 1, static_cast<uint64_t>(p >> 64) | 1};
  }
  // c * k in each lane (mod 2^64): a counter's term, or a step of it.
  static StateDigest scaled(const StateDigest& c, uint64_t k) { return StateDigest{c.lo * k, c.hi * k}; }

  void add(const Entry& e) {
    const StateDigest d = image(e);
    sum_.lo += d.lo;
    sum_.hi += d.hi;
  }
  void remove(const Entry& e) {
    const StateDigest d = image(e);
    sum_.lo -= d.lo;
    sum_.hi -= d.hi;
  }
  // Replace one entry by its successor (remove old, add new).
  void replace(const Entry& before, const Entry& after) {
    remove(before);
    add(after);
  }
  void add_digest(const StateDigest& d) {
    sum_.lo += d.lo;
    sum_.hi += d.hi;
  }
  void remove_digest(const StateDigest& d) {
    sum_.lo -= d.lo;
    sum_.hi -= d.hi;
  }
  const StateDigest& value() const { return sum_; }

 private:
  StateDigest sum_{};
};

}  // namespace kvrt
