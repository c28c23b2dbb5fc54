#pragma once
// Shared machinery of `kvrt replay <index>` (docs/replay-format.md):
// the JSON-lines loop, typed field access, and the error line.
//
// Contract (FORMAT.md): one JSON object per line; blank lines and lines
// starting with '#' are skipped but counted; every other line prints one JSON
// line with "i" (0-based line number), "op", then the op's fields. A bad line
// prints {"i":..,"op":..,"error":"<Type>: <message>"}, changes nothing, and
// the run continues.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvrt::replay {

// The <Type> of an error line.
enum class ReplayErrorType : uint8_t {
  parse_error,     // the line is not JSON
  unknown_op,      // "op" names no operation of this index
  missing_field,   // a required field is absent
  wrong_type,      // a field (or the line) has the wrong JSON type
  invalid_value,   // right type, value out of the op's domain
  unknown_handle,  // names a lock handle / request that is not held
  handle_in_use,   // names a lock handle that is already held
};
std::string_view to_string(ReplayErrorType type);  // "ParseError", "UnknownOp", ...

struct ReplayError {
  ReplayErrorType type = ReplayErrorType::invalid_value;
  std::string message;
  std::string text() const;  // "<Type>: <message>"
};

// Output fields of one op, in print order (FORMAT.md: order does not matter
// to a reader, but a stable order keeps outputs diffable byte for byte).
using OutFields = nlohmann::ordered_json;
using OpOutcome = std::variant<OutFields, ReplayError>;

// Typed reads of one op object. The first failed read is kept and later reads
// return defaults, so a handler reads everything, then checks ok() once.
class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& line) : line_(line) {}

  bool has(std::string_view key) const;  // present and not null
  int64_t integer(std::string_view key);
  std::optional<int64_t> optional_integer(std::string_view key);
  std::string string(std::string_view key);
  std::optional<std::string> optional_string(std::string_view key);  // absent or null -> nullopt
  std::vector<int64_t> integer_list(std::string_view key);

  bool ok() const { return !error_.has_value(); }
  const ReplayError& error() const { return *error_; }
  void fail(ReplayErrorType type, std::string message);  // records unless an error is already kept

 private:
  const nlohmann::json* field(std::string_view key, bool required);
  const nlohmann::json& line_;
  std::optional<ReplayError> error_;
};

struct ReplaySummary {
  uint64_t lines = 0;   // lines read, including skipped ones
  uint64_t ops = 0;     // op lines answered, errors included
  uint64_t errors = 0;  // error lines printed
};

// Applies one op: `op` is the line's "op" string, `line` the whole object.
using OpHandler = std::function<OpOutcome(const std::string& op, const nlohmann::json& line)>;

// Reads `in` to the end and prints one result line per op line on `out`.
// The state fields an index appends after every op are the handler's job.
ReplaySummary run_trace(std::istream& in, std::ostream& out, const OpHandler& handler);

}  // namespace kvrt::replay
