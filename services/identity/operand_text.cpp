#include "services/identity/operand_text.hpp"

#include <algorithm>

namespace kvrt {
namespace {

void append_escaped(std::string& out, std::string_view v) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u >= 0x7F) {
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xF]);
    } else {
      out.push_back(c);
    }
  }
}

// The window of v that starts a few characters before the first difference.
std::string window(std::string_view v, size_t diff) {
  const size_t lead = kOperandWindowChars / 2;
  const size_t start = std::min(diff > lead ? diff - lead : 0, v.size());
  const size_t len = std::min(kOperandWindowChars, v.size() - start);
  std::string out = "\"";
  if (start > 0) out += "...";
  append_escaped(out, v.substr(start, len));
  if (start + len < v.size()) out += "...";
  out += "\"";
  return out;
}

}  // namespace

size_t first_difference(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

std::string quote_operand(std::string_view v, bool empty_means_none) {
  if (v.empty() && empty_means_none) return "(none)";
  std::string out = "\"";
  append_escaped(out, v);
  out += "\"";
  return out;
}

std::string describe_operands(std::string_view producer, std::string_view consumer, bool empty_means_none) {
  const bool abbreviate = producer.size() > kOperandFullChars || consumer.size() > kOperandFullChars;
  const size_t diff = first_difference(producer, consumer);
  auto render = [&](std::string_view v) {
    if (!abbreviate || (v.empty() && empty_means_none)) return quote_operand(v, empty_means_none);
    return window(v, diff);
  };
  std::string out = "producer " + render(producer) + " vs consumer " + render(consumer);
  if (abbreviate)
    out += " (" + std::to_string(producer.size()) + " vs " + std::to_string(consumer.size()) +
           " chars, first difference at char " + std::to_string(diff) + ")";
  return out;
}

}  // namespace kvrt
