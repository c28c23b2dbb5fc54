#pragma once
// field_count<T>(): the number of members of an aggregate, counted at compile
// time by brace-initialising T from ever more values that convert to anything.
// The codec static_asserts each core type's count so that a field added to a
// core struct cannot be silently dropped on the wire.
#include <cstddef>
#include <type_traits>
#include <utility>

namespace kvrt::codec::detail {

struct AnyField {
  template <class T>
  constexpr operator T() const;  // unevaluated use only
};

template <class T, class... Args>
concept brace_initializable_from = requires {
  T{std::declval<Args>()...};
};

template <class T, class... Args>
constexpr size_t field_count_from() {
  if constexpr (brace_initializable_from<T, Args..., AnyField>)
    return field_count_from<T, Args..., AnyField>();
  else
    return sizeof...(Args);
}

template <class T>
constexpr size_t field_count() {
  static_assert(std::is_aggregate_v<T>, "field_count needs an aggregate");
  return field_count_from<T>();
}

}  // namespace kvrt::codec::detail
