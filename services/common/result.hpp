#pragma once
// Result<T>: a value or a typed Error (C++20 has no std::expected). Accessing
// the wrong alternative is a bug and asserts with the error's description.
#include <utility>
#include <variant>

#include "services/common/assert.hpp"
#include "services/common/error.hpp"

namespace kvrt {

template <class T>
class [[nodiscard]] Result {
 public:
  using value_type = T;
  // By reference, not by value: a receipt returned in a loop is moved once
  // into the answer, not twice.
  Result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(const T& value) : v_(std::in_place_index<0>, value) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    KVRT_ASSERT(ok(), std::get<1>(v_).describe());
    return std::get<0>(v_);
  }
  const T& value() const& {
    KVRT_ASSERT(ok(), std::get<1>(v_).describe());
    return std::get<0>(v_);
  }
  T&& value() && {
    KVRT_ASSERT(ok(), std::get<1>(v_).describe());
    return std::get<0>(std::move(v_));
  }
  const Error& error() const {
    KVRT_ASSERT(!ok(), "Result holds a value, not an error");
    return std::get<1>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

// Status: Result without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}
  static Status success() { return Status{}; }
  bool ok() const { return error_.code == ErrorCode::ok; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }

 private:
  Error error_{};
};

}  // namespace kvrt

// Propagate a typed error from an expression returning Result<T> (or Status).
#define KVRT_TRY_ASSIGN(lhs, expr)                               \
  do {                                                           \
    auto kvrt_try_result_ = (expr);                              \
    if (!kvrt_try_result_.ok()) return kvrt_try_result_.error(); \
    lhs = std::move(kvrt_try_result_).value();                   \
  } while (0)

#define KVRT_TRY(expr)                                           \
  do {                                                           \
    auto kvrt_try_status_ = (expr);                              \
    if (!kvrt_try_status_.ok()) return kvrt_try_status_.error(); \
  } while (0)
