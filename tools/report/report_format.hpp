#pragma once
// Text helpers shared by the report renderers. A RunReport carries
// strings the run driver copied from configuration files and worker names, so
// they may hold anything: invalid UTF-8 breaks JSON serialisation and XML
// parsers, control characters break terminals, Markdown tables and XML 1.0.
// Every renderer passes such strings through one of the two cleaners below.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvrt::report {

// Valid UTF-8 with every malformed sequence (overlong, surrogate, > U+10FFFF,
// truncated) replaced by U+FFFD; everything else byte-for-byte. For JSON,
// whose serialiser escapes control characters itself.
std::string sanitize_utf8(std::string_view text);

// sanitize_utf8, then every character that XML 1.0 forbids or a terminal would
// interpret (C0 controls including tab and newline, DEL, U+FFFE, U+FFFF)
// replaced by U+FFFD, so the result is one printable line.
std::string printable(std::string_view text);

// Fixed-point decimal ("12.35"); "n/a" for NaN or infinity.
std::string fixed(double value, int decimals);
// Bytes in MiB with two decimals and the unit: 13107200 -> "12.50 MiB";
// below 0.01 MiB the exact bytes follow: 482 -> "0.00 MiB (482 bytes)".
std::string mib_text(uint64_t bytes);
// A fraction as a percentage with one decimal: 0.6912 -> "69.1 %"; "n/a" when absent.
std::string percent_text(std::optional<double> fraction);
// A ratio with two decimals and "x": 4 -> "4.00x"; "n/a" when absent (0x02F:
// an undefined ratio is reported as not applicable, never as a number).
std::string ratio_text(std::optional<double> ratio);

}  // namespace kvrt::report
