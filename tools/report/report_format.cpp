#include "tools/report/report_format.hpp"

#include <cmath>
#include <cstdio>

#include "services/common/units.hpp"

namespace kvrt::report {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Length of the well-formed UTF-8 sequence starting at text[i] (Unicode 15,
// table 3-7), or 0 when it is malformed; *code receives the code point.
size_t utf8_sequence(std::string_view text, size_t i, uint32_t* code) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    *code = b0;
    return 1;
  }
  size_t len = 0;
  uint32_t cp = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const uint8_t b = byte(i + k);
    const uint8_t min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  *code = cp;
  return len;
}

template <class Keep>
std::string clean(std::string_view text, Keep keep) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_sequence(text, i, &cp);
    if (len == 0) {  // one malformed byte becomes one replacement character
      out += kReplacement;
      ++i;
      continue;
    }
    if (keep(cp))
      out.append(text.substr(i, len));
    else
      out += kReplacement;
    i += len;
  }
  return out;
}

}  // namespace

std::string sanitize_utf8(std::string_view text) {
  return clean(text, [](uint32_t) { return true; });
}

std::string printable(std::string_view text) {
  return clean(text, [](uint32_t cp) { return cp >= 0x20 && cp != 0x7F && cp != 0xFFFE && cp != 0xFFFF; });
}

std::string fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "n/a";
  char buf[64];
  // Beyond 1e40 the digits would not fit the buffer; no run produces such a
  // figure, but the text must stay well formed, so use scientific notation.
  std::snprintf(buf, sizeof buf, std::fabs(value) >= 1e40 ? "%.*e" : "%.*f", decimals, value);
  return buf;
}

std::string mib_text(uint64_t bytes) {
  std::string text = fixed(static_cast<double>(bytes) / static_cast<double>(kMiB), 2) + " MiB";
  // Below 0.005 MiB two decimals print 0.00 (or 0.01): a metadata ledger of a
  // few hundred bytes (0x02E) must not read as nothing, so add the bytes.
  if (bytes > 0 && bytes < kMiB / 100) text += " (" + std::to_string(bytes) + " bytes)";
  return text;
}

std::string percent_text(std::optional<double> fraction) {
  if (!fraction || !std::isfinite(*fraction)) return "n/a";
  return fixed(*fraction * 100.0, 1) + " %";
}

std::string ratio_text(std::optional<double> ratio) {
  if (!ratio || !std::isfinite(*ratio)) return "n/a";
  return fixed(*ratio, 2) + "x";
}

}  // namespace kvrt::report
