#pragma once
// Shared by tests/shm_allocator_two_process_test.cpp and the
// kvrt_shm_store_peer helper process: the row positions an allocator receipt
// names, as they cross a process boundary (argv), and the seeded rows a peer
// writes there. Only segment names, numbers and digests cross, never pointers
// (block_pool_segment.hpp).
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvrt::shm::store_peer {

// rows consecutive token rows of one block: rows [first_row, first_row + rows)
// of pool slot `slot` of group index `group`, holding the request's tokens
// first_token, first_token + 1, ... [rows, tokens]
struct RowSpan {
  uint32_t group = 0;
  uint32_t slot = 0;
  uint32_t first_row = 0;
  uint32_t rows = 0;
  uint32_t first_token = 0;
  friend bool operator==(const RowSpan&, const RowSpan&) = default;
};

// "group:slot:first_row:rows:first_token,..."
inline std::string format_spans(const std::vector<RowSpan>& spans) {
  std::string out;
  for (const RowSpan& s : spans) {
    if (!out.empty()) out += ',';
    out += std::to_string(s.group) + ':' + std::to_string(s.slot) + ':' + std::to_string(s.first_row) + ':' +
           std::to_string(s.rows) + ':' + std::to_string(s.first_token);
  }
  return out;
}

inline std::optional<std::vector<RowSpan>> parse_spans(std::string_view text) {
  std::vector<RowSpan> spans;
  const auto number = [&](char stop, uint32_t& out) {
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc{}) return false;
    text.remove_prefix(static_cast<size_t>(ptr - text.data()));
    if (stop == '\0') return true;
    if (text.empty() || text.front() != stop) return false;
    text.remove_prefix(1);
    return true;
  };
  while (!text.empty()) {
    RowSpan s;
    if (!number(':', s.group) || !number(':', s.slot) || !number(':', s.first_row) || !number(':', s.rows) ||
        !number('\0', s.first_token))
      return std::nullopt;
    spans.push_back(s);
    if (!text.empty()) {
      if (text.front() != ',') return std::nullopt;
      text.remove_prefix(1);
      if (text.empty()) return std::nullopt;  // trailing comma
    }
  }
  return spans;
}

}  // namespace kvrt::shm::store_peer
