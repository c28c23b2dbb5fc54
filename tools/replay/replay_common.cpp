#include "tools/replay/replay_common.hpp"

#include <istream>
#include <limits>
#include <ostream>

namespace kvrt::replay {

std::string_view to_string(ReplayErrorType type) {
  switch (type) {
    case ReplayErrorType::parse_error:
      return "ParseError";
    case ReplayErrorType::unknown_op:
      return "UnknownOp";
    case ReplayErrorType::missing_field:
      return "MissingField";
    case ReplayErrorType::wrong_type:
      return "WrongType";
    case ReplayErrorType::invalid_value:
      return "InvalidValue";
    case ReplayErrorType::unknown_handle:
      return "UnknownHandle";
    case ReplayErrorType::handle_in_use:
      return "HandleInUse";
  }
  return "Error";
}

std::string ReplayError::text() const { return std::string(to_string(type)) + ": " + message; }

namespace {

std::string quoted(std::string_view key) {
  std::string out(1, '\'');  // appended piecewise: g++ 12 misreports "'" + string as -Wrestrict
  out += key;
  out += '\'';
  return out;
}

// A JSON integer within int64, or nullopt (floats, bools, huge unsigned).
std::optional<int64_t> as_int64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

}  // namespace

void FieldReader::fail(ReplayErrorType type, std::string message) {
  if (!error_) error_ = ReplayError{type, std::move(message)};
}

bool FieldReader::has(std::string_view key) const {
  const auto it = line_.find(key);
  return it != line_.end() && !it->is_null();
}

const nlohmann::json* FieldReader::field(std::string_view key, bool required) {
  if (error_) return nullptr;
  const auto it = line_.find(key);
  if (it == line_.end() || it->is_null()) {
    if (required) fail(ReplayErrorType::missing_field, "field " + quoted(key) + " is required");
    return nullptr;
  }
  return &*it;
}

int64_t FieldReader::integer(std::string_view key) {
  const nlohmann::json* v = field(key, true);
  if (v == nullptr) return 0;
  const std::optional<int64_t> i = as_int64(*v);
  if (!i) fail(ReplayErrorType::wrong_type, "field " + quoted(key) + " must be an integer (64-bit signed)");
  return i.value_or(0);
}

std::optional<int64_t> FieldReader::optional_integer(std::string_view key) {
  if (!has(key)) return std::nullopt;
  const int64_t v = integer(key);
  if (!ok()) return std::nullopt;
  return v;
}

std::string FieldReader::string(std::string_view key) {
  const nlohmann::json* v = field(key, true);
  if (v == nullptr) return {};
  if (!v->is_string()) {
    fail(ReplayErrorType::wrong_type, "field " + quoted(key) + " must be a string");
    return {};
  }
  return v->get<std::string>();
}

std::optional<std::string> FieldReader::optional_string(std::string_view key) {
  if (!has(key)) return std::nullopt;
  std::string v = string(key);
  if (!ok()) return std::nullopt;
  return v;
}

std::vector<int64_t> FieldReader::integer_list(std::string_view key) {
  std::vector<int64_t> out;
  const nlohmann::json* v = field(key, true);
  if (v == nullptr) return out;
  if (!v->is_array()) {
    fail(ReplayErrorType::wrong_type, "field " + quoted(key) + " must be a list of integers");
    return out;
  }
  out.reserve(v->size());
  for (size_t k = 0; k < v->size(); ++k) {
    const std::optional<int64_t> i = as_int64((*v)[k]);
    if (!i) {
      fail(ReplayErrorType::wrong_type,
           "field " + quoted(key) + " element " + std::to_string(k) + " must be an integer (64-bit signed)");
      return {};
    }
    out.push_back(*i);
  }
  return out;
}

ReplaySummary run_trace(std::istream& in, std::ostream& out, const OpHandler& handler) {
  ReplaySummary summary;
  std::string raw;
  for (uint64_t i = 0; std::getline(in, raw); ++i) {
    ++summary.lines;
    const size_t first = raw.find_first_not_of(" \t\r\n\f\v");
    if (first == std::string::npos || raw[first] == '#') continue;
    ++summary.ops;

    OutFields line_out;
    line_out["i"] = i;
    nlohmann::json parsed = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
    std::optional<ReplayError> error;
    if (parsed.is_discarded()) {
      line_out["op"] = nullptr;
      error = ReplayError{ReplayErrorType::parse_error, "the line is not valid JSON"};
    } else if (!parsed.is_object()) {
      line_out["op"] = nullptr;
      error = ReplayError{ReplayErrorType::wrong_type, "a trace line must be a JSON object"};
    } else {
      const auto op = parsed.find("op");
      line_out["op"] = op == parsed.end() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(*op);
      if (op == parsed.end() || op->is_null())
        error = ReplayError{ReplayErrorType::missing_field, "field 'op' is required"};
      else if (!op->is_string())
        error = ReplayError{ReplayErrorType::wrong_type, "field 'op' must be a string"};
      else {
        OpOutcome outcome = handler(op->get<std::string>(), parsed);
        if (auto* fields = std::get_if<OutFields>(&outcome))
          for (auto& [k, v] : fields->items()) line_out[k] = std::move(v);
        else
          error = std::get<ReplayError>(std::move(outcome));
      }
    }
    if (error) {
      line_out["error"] = error->text();
      ++summary.errors;
    }
    out << line_out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  }
  out.flush();
  return summary;
}

}  // namespace kvrt::replay
