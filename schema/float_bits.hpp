#pragma once
// Bitwise equality for the generated types' operator== when a member holds
// floats: a receipt that carries a NaN equals itself, and +0 and -0 differ
// (exactness is about bits). Every other member compares with ==.
#include <cstring>
#include <vector>

namespace kvrt {

template <class T>
bool same_bits(const T& a, const T& b) {
  return a == b;
}
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

}  // namespace kvrt
