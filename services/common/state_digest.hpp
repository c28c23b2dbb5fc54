#pragma once
// StateDigest: an incrementally maintained digest of an owner's committed
// state (issue 3: "a receipt costs O(what changed), never O(pool)").
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
    const uint64_t lo = mum(mum(e.w0 ^ 0xa0761d6478bd642full, e.w1 ^ 0xe7037ed1a0b428dbull) ^ e.w2,
                            e.w3 ^ 0x8ebc6af09c88c6e3ull);
    const uint64_t hi = mum(mum(e.w0 ^ 0x589965cc75374cc3ull, e.w1 ^ 0x1d8e4e27c47d124full) ^ e.w3,
                            e.w2 ^ 0x9e3779b97f4a7c15ull);
    return StateDigest{lo, hi};
  }

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
