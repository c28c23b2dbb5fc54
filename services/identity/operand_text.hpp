#pragma once
// Renders the two operands of a failed equality check for an Error reason
// (docs/conventions.md: failures print their operands). Identity values are often long
// (64-hex digests, adapter ids), and two digests that share a long prefix
// would read as equal if both were merely truncated; so a long pair is shown
// as a window around its first differing character.
#include <cstddef>
#include <string>
#include <string_view>

namespace kvrt {

// Values up to this many characters are printed whole [characters].
inline constexpr size_t kOperandFullChars = 24;
// Width of the window printed around the first difference of a long pair [characters].
inline constexpr size_t kOperandWindowChars = 16;

// Index of the first character at which a and b differ; min(|a|, |b|) when
// one is a prefix of the other (equal strings: their common length).
size_t first_difference(std::string_view a, std::string_view b);

// Quoted, with non-printable bytes escaped as \xNN; "(none)" for an empty value
// when empty_means_none (adapter or transform identity "no adapter").
std::string quote_operand(std::string_view v, bool empty_means_none = false);

// "producer X vs consumer Y", abbreviated for long values as
// "producer \"...9b1c4e...\" vs consumer \"...9b1d00...\" (64 vs 64 chars, first difference at char 40)".
std::string describe_operands(std::string_view producer, std::string_view consumer, bool empty_means_none = false);

}  // namespace kvrt
