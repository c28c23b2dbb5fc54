#pragma once
// Scratch memory an attention call may keep between calls (FlashInfer's
// "workspace buffer" habit): the partial-state buffers of split-K decode,
// Hydragen's per-partition (O, LSE) and ChunkAttention's materialised
// (u, m, l) rows are megabytes at serving sizes, and allocating and zeroing
// them on every call would cost as much as the attention itself (fresh pages
// fault in and are cleared by the kernel). A caller that runs many calls
// (an actor, a model's layer loop) owns one Workspace and passes it in; a
// call without one uses a temporary.
//
// Storage handed out is uninitialised: every schedule writes each element it
// later reads. Not thread-safe; one call at a time per workspace.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "services/executor/online_softmax.hpp"

namespace kvrt::executor {

class Workspace {
 public:
  // Distinct buffers one call may hold at once.
  enum class Slot : uint8_t { valid = 0, m, l, u, lse, count };

  // n uninitialised values of T in `slot`, valid until the next take() of it.
  template <class T>
  std::span<T> take(Slot slot, std::size_t n) {
    const std::size_t i = static_cast<std::size_t>(slot);
    const std::size_t bytes = n * sizeof(T);
    if (bytes > capacity_[i]) {
      buffers_[i].reset(new std::byte[bytes]);
      capacity_[i] = bytes;
    }
    return std::span<T>(reinterpret_cast<T*>(buffers_[i].get()), n);
  }

 private:
  std::array<std::unique_ptr<std::byte[]>, std::size_t(Slot::count)> buffers_{};
  std::array<std::size_t, std::size_t(Slot::count)> capacity_{};
};

// Partial states of `rows` rows in workspace storage (valid, m, l, u), laid
// out like PartialStates but never initialised: the writer sets every field.
template <class T>
struct PartialBuffer {
  uint32_t v_dim = 0;
  std::span<uint64_t> valid;
  std::span<T> m, l, u;

  static PartialBuffer take(Workspace& w, uint64_t rows, uint32_t lanes) {
    PartialBuffer b;
    b.v_dim = lanes;
    b.valid = w.take<uint64_t>(Workspace::Slot::valid, rows);
    b.m = w.take<T>(Workspace::Slot::m, rows);
    b.l = w.take<T>(Workspace::Slot::l, rows);
    b.u = w.take<T>(Workspace::Slot::u, rows * lanes);
    return b;
  }
  StateRef<T> row(uint64_t r) { return StateRef<T>{&valid[r], &m[r], &l[r], &u[r * v_dim]}; }
  // Copies row `from` of a worker's states into row r.
  void store(uint64_t r, const PartialStates<T>& from, uint32_t row) {
    valid[r] = from.valid[row];
    m[r] = from.m[row];
    l[r] = from.l[row];
    std::copy_n(&from.u[uint64_t{row} * v_dim], v_dim, &u[r * v_dim]);
  }
};

}  // namespace kvrt::executor
