#pragma once
// Lower-case hexadecimal text of bytes, and back: the one encoding every
// digest, token, ticket and handle of kvrt prints and parses.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvrt {

// Two lower-case hex digits per byte, most significant nibble first.
std::string to_hex(std::span<const uint8_t> bytes);
// One hex digit ('0'-'9', 'a'-'f', 'A'-'F'), or -1.
int hex_digit_value(char c);
// Parses exactly out.size() bytes from 2 * out.size() digits (either case);
// false, leaving `out` unspecified, for any other length or a non-hex digit.
bool from_hex(std::string_view text, std::span<uint8_t> out);

}  // namespace kvrt
