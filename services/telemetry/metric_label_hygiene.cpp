#include "services/telemetry/metric_label_hygiene.hpp"

namespace kvrt {
namespace {

constexpr std::string_view kSaltedPrefix = "sk1-";
constexpr size_t kSaltedHexDigits = 16;
constexpr size_t kMaxLength = 64;
constexpr size_t kDigestRun = 16;  // hex digits that make a value look like a key or digest

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool valid_key(std::string_view k) {
  if (k.empty() || k.size() > kMaxLength) return false;
  if (!((k[0] >= 'a' && k[0] <= 'z') || k[0] == '_')) return false;
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '_')) return false;
  return true;
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' || c == '_' || c == ':' ||
         c == '/' || c == '@' || c == '-';
}

// Two or more integers, separated only by commas, whitespace and brackets.
bool looks_like_token_list(std::string_view v) {
  size_t numbers = 0;
  size_t i = 0;
  while (i < v.size()) {
    const char c = v[i];
    // A minus sign starts a number only after a separator ("2024-01-01" is a date, not three ids).
    const bool after_separator = i == 0 || !is_digit(v[i - 1]);
    if (is_digit(c) || (c == '-' && after_separator && i + 1 < v.size() && is_digit(v[i + 1]))) {
      ++numbers;
      ++i;
      while (i < v.size() && is_digit(v[i])) ++i;
    } else if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']' || c == '(' || c == ')') {
      ++i;
    } else {
      return false;
    }
  }
  return numbers >= 2;
}

bool longest_hex_run_at_least(std::string_view v, size_t n) {
  size_t run = 0;
  for (char c : v) {
    run = is_hex(c) ? run + 1 : 0;
    if (run >= n) return true;
  }
  return false;
}

bool is_salted_form(std::string_view v) {
  if (v.size() != kSaltedPrefix.size() + kSaltedHexDigits || !v.starts_with(kSaltedPrefix)) return false;
  for (char c : v.substr(kSaltedPrefix.size()))
    if (!(is_digit(c) || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool key_names(std::string_view key, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words)
    if (key.find(w) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::string_view to_string(LabelViolation v) {
  switch (v) {
    case LabelViolation::malformed_key:
      return "malformed_key";
    case LabelViolation::raw_prompt_in_metrics:
      return "raw_prompt_in_metrics";
    case LabelViolation::token_list_in_metrics:
      return "token_list_in_metrics";
    case LabelViolation::unsalted_cache_key_in_metrics:
      return "unsalted_cache_key_in_metrics";
  }
  return "unknown_label_violation";
}

std::optional<LabelViolation> classify_label(const MetricLabel& label) {
  if (!valid_key(label.key)) return LabelViolation::malformed_key;
  if (key_names(label.key, {"token"})) return LabelViolation::token_list_in_metrics;
  if (key_names(label.key, {"prompt", "text"})) return LabelViolation::raw_prompt_in_metrics;
  const std::string_view v = label.value;
  if (looks_like_token_list(v)) return LabelViolation::token_list_in_metrics;
  if (v.empty() || v.size() > kMaxLength) return LabelViolation::raw_prompt_in_metrics;
  for (char c : v)
    if (!identifier_char(c)) return LabelViolation::raw_prompt_in_metrics;
  if (is_salted_form(v)) return std::nullopt;
  if (longest_hex_run_at_least(v, kDigestRun) || key_names(label.key, {"key", "hash", "digest"}))
    return LabelViolation::unsalted_cache_key_in_metrics;
  return std::nullopt;
}

Status validate_metric_labels(std::span<const MetricLabel> labels) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto v = classify_label(labels[i]);
    if (!v) continue;
    const std::string field = *v == LabelViolation::malformed_key ? "labels[" + std::to_string(i) + "]" : labels[i].key;
    return make_error(ErrorCode::telemetry_forbidden_label, std::string(to_string(*v)), field);
  }
  return Status::success();
}

std::string salted_metric_key(const Sha256Digest& namespace_salt_digest, const Sha256Digest& cache_key) {
  const Sha256Digest d =
      CanonicalWriter("kvrt.metric_key.v1").digest("salt", namespace_salt_digest).digest("key", cache_key).finish();
  return std::string(kSaltedPrefix) + d.hex().substr(0, kSaltedHexDigits);
}

}  // namespace kvrt
