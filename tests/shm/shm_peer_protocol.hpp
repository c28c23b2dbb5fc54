#pragma once
// Shared by tests/shm_pool_test.cpp and the kvrt_shm_peer helper process: which
// rows a two-process check touches, the seeded bytes written there, and the
// digest both sides report. Only names, numbers and digests cross the process
// boundary (argv and a pipe), never pointers.
#include <charconv>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/digest.hpp"
#include "shm/block_pool_segment.hpp"

namespace kvrt::shm::peer {

// Rows [token_begin, token_end) of one block, in K and V, all layers and heads.
struct RowSelection {
  uint32_t block = 0;
  uint32_t token_begin = 0;
  uint32_t token_end = 0;
};

// "block:begin-end,block:begin-end"
inline std::string format_selection(const std::vector<RowSelection>& rows) {
  std::string out;
  for (const auto& r : rows) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.block) + ':' + std::to_string(r.token_begin) + '-' + std::to_string(r.token_end);
  }
  return out;
}

inline std::optional<std::vector<RowSelection>> parse_selection(std::string_view text) {
  std::vector<RowSelection> rows;
  const auto number = [&](char stop, uint32_t& out) {
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    if (ec != std::errc{}) return false;
    text.remove_prefix(static_cast<size_t>(ptr - text.data()));
    if (stop == '\0') return true;
    if (text.empty() || text.front() != stop) return false;
    text.remove_prefix(1);
    return true;
  };
  while (!text.empty()) {
    RowSelection r;
    if (!number(':', r.block) || !number('-', r.token_begin) || !number('\0', r.token_end)) return std::nullopt;
    rows.push_back(r);
    if (!text.empty()) {
      if (text.front() != ',') return std::nullopt;
      text.remove_prefix(1);
    }
  }
  return rows;
}

// The pool a process believes it addresses; every block reference carries it,
// so a wrong id or a stale generation is rejected by the pool, not assumed.
struct PoolName {
  PoolId id;
  PoolGeneration generation;
};

// Visits the selected bytes in a fixed order (selection order, K then V,
// increasing offset), so both processes walk them identically.
template <class Pool, class F>
Status for_each_selected_span(Pool& pool, PoolName named, const std::vector<RowSelection>& rows, F&& f) {
  for (const auto& r : rows) {
    for (TensorKind kind : {TensorKind::K, TensorKind::V}) {
      const PoolBlockRef ref{named.id, named.generation, PhysicalSlot{r.block}};
      RowRuns runs;
      KVRT_TRY_ASSIGN(runs, pool.row_runs(ref, kind, r.token_begin, r.token_end));
      Status status;
      runs.for_each([&](ByteRun run) {
        if (!status.ok()) return;
        auto span = pool.bytes(run);
        if (!span.ok())
          status = span.error();
        else
          f(*span);
      });
      KVRT_TRY(status);
    }
  }
  return Status::success();
}

// Fills the selection with bytes of a seeded stream; returns their digest.
inline Result<Sha256Digest> write_seeded(BlockPoolSegment& pool, PoolName named, const std::vector<RowSelection>& rows,
                                         uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string written;
  KVRT_TRY(for_each_selected_span(pool, named, rows, [&](std::span<uint8_t> span) {
    for (uint8_t& b : span) b = static_cast<uint8_t>(rng() >> 56);
    written.append(reinterpret_cast<const char*>(span.data()), span.size());
  }));
  return sha256(written);
}

// The bytes the seeded stream puts into a selection of `total` bytes.
inline std::string seeded_bytes(uint64_t seed, uint64_t total) {
  std::mt19937_64 rng(seed);
  std::string out(total, '\0');
  for (char& c : out) c = static_cast<char>(rng() >> 56);
  return out;
}

// Reads the selection back, concatenated.
inline Result<std::string> read_selected(const BlockPoolSegment& pool, PoolName named,
                                         const std::vector<RowSelection>& rows) {
  std::string out;
  KVRT_TRY(for_each_selected_span(pool, named, rows, [&](std::span<const uint8_t> span) {
    out.append(reinterpret_cast<const char*>(span.data()), span.size());
  }));
  return out;
}

}  // namespace kvrt::shm::peer
