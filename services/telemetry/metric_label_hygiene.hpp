#pragma once
// Telemetry hygiene (spec 0x0CE): metrics need stable low-cardinality
// identifiers, never raw prompts, token lists or unsalted concrete cache
// keys. Every label kvrt exports passes validate_metric_labels first; the
// checked fixture rejects raw_prompt_in_metrics and
// unsalted_cache_key_in_metrics.
//
// The rules are an allow-list, not a guess at what a prompt looks like:
//   - a key is [a-z_][a-z0-9_]*, at most 64 characters;
//   - a key that names prompt text or tokens (contains "prompt", "text" or
//     "token") is refused whatever its value;
//   - a value is at most 64 characters of [A-Za-z0-9._:/@-]; anything else
//     (spaces, punctuation, long text) is free text: raw_prompt_in_metrics;
//   - two or more integers separated by commas, spaces or brackets are a
//     token list (checked before the free-text rule);
//   - a run of 16 or more hex digits is a digest or key: unsalted unless the
//     whole value is the salted form salted_metric_key() produces; a key
//     naming a cache key or hash ("key", "hash", "digest") must carry that
//     salted form.
// Errors never quote the offending value: quoting it would leak it into logs.
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "services/common/digest.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct MetricLabel {
  std::string key;
  std::string value;
};

enum class LabelViolation : uint8_t {
  malformed_key = 0,
  raw_prompt_in_metrics = 1,
  token_list_in_metrics = 2,
  unsalted_cache_key_in_metrics = 3,
};
std::string_view to_string(LabelViolation v);

std::optional<LabelViolation> classify_label(const MetricLabel& label);

// ErrorCode::telemetry_forbidden_label, reason = the violation's name,
// field = the label key (or "labels[i]" when the key itself is malformed).
Status validate_metric_labels(std::span<const MetricLabel> labels);

// "sk1-" + 16 hex digits of a keyed SHA-256 of the cache key under the
// namespace's salt digest: stable within a namespace, unlinkable across
// namespaces, and not reversible to the concrete key.
std::string salted_metric_key(const Sha256Digest& namespace_salt_digest, const Sha256Digest& cache_key);

}  // namespace kvrt
