// Telemetry hygiene (spec 0x0CE): metric labels are stable low-cardinality
// identifiers, never raw prompts, token lists or unsalted cache keys.
#include <catch2/catch.hpp>

#include "services/authorization/namespace_grant.hpp"
#include "services/telemetry/metric_label_hygiene.hpp"

using namespace kvrt;

namespace {

std::optional<LabelViolation> verdict(const std::string& key, const std::string& value) {
  return classify_label(MetricLabel{key, value});
}

}  // namespace

TEST_CASE("0x0CE fixtures: raw_prompt_in_metrics and unsalted_cache_key_in_metrics", "[telemetry][hygiene]") {
  const std::string prompt = "Summarize the attached contract for ACME Corp and list every penalty clause.";
  const std::string block_hash = sha256("parent|tokens|extras").hex();  // a concrete, unsalted key

  const std::vector<MetricLabel> raw_prompt_in_metrics{{"namespace", "prod-eu1/tenant-a"}, {"request", prompt}};
  auto e = validate_metric_labels(raw_prompt_in_metrics);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code == ErrorCode::telemetry_forbidden_label);
  CHECK(e.error().reason == "raw_prompt_in_metrics");
  CHECK(e.error().field == "request");
  CHECK(e.error().describe().find("ACME") == std::string::npos);  // never quoted

  const std::vector<MetricLabel> unsalted_cache_key_in_metrics{{"bucket", "index_miss"}, {"block", block_hash}};
  e = validate_metric_labels(unsalted_cache_key_in_metrics);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().reason == "unsalted_cache_key_in_metrics");
  CHECK(e.error().field == "block");
  CHECK(e.error().describe().find(block_hash.substr(0, 16)) == std::string::npos);

  // The salted form of the same key is acceptable, and unlinkable across namespaces.
  const std::string salted_a = salted_metric_key(cache_salt_digest("salt-a"), sha256("parent|tokens|extras"));
  const std::string salted_b = salted_metric_key(cache_salt_digest("salt-b"), sha256("parent|tokens|extras"));
  CHECK(salted_a != salted_b);
  CHECK(salted_a.size() == 20);
  CHECK(validate_metric_labels(std::vector<MetricLabel>{{"block_hash", salted_a}}).ok());
}

TEST_CASE("label rules: identifiers pass, prompts, token lists and keys do not", "[telemetry][hygiene]") {
  CHECK_FALSE(verdict("namespace", "prod-eu1/tenant-a"));
  CHECK_FALSE(verdict("bucket", "stale_generation"));
  CHECK_FALSE(verdict("worker", "worker-3"));
  CHECK_FALSE(verdict("pool", "12"));
  CHECK_FALSE(verdict("day", "2024-01-01"));
  CHECK_FALSE(verdict("kernel_abi", "paged_decode_p16_v1"));

  CHECK(verdict("tokens", "12") == LabelViolation::token_list_in_metrics);  // by key
  CHECK(verdict("batch", "[128000, 791, 4062]") == LabelViolation::token_list_in_metrics);
  CHECK(verdict("batch", "128000 791 4062") == LabelViolation::token_list_in_metrics);
  CHECK(verdict("batch", "128000,791") == LabelViolation::token_list_in_metrics);
  CHECK(verdict("prompt_kind", "chat") == LabelViolation::raw_prompt_in_metrics);  // by key
  CHECK(verdict("request", "hello world") == LabelViolation::raw_prompt_in_metrics);
  CHECK(verdict("request", std::string(65, 'a')) == LabelViolation::raw_prompt_in_metrics);
  CHECK(verdict("request", "") == LabelViolation::raw_prompt_in_metrics);
  CHECK(verdict("request", "what?") == LabelViolation::raw_prompt_in_metrics);
  CHECK(verdict("cache_key", "4711") == LabelViolation::unsalted_cache_key_in_metrics);  // by key
  CHECK(verdict("id", "deadbeefdeadbeef") == LabelViolation::unsalted_cache_key_in_metrics);
  CHECK(verdict("id", "sk1-DEADBEEFDEADBEEF") == LabelViolation::unsalted_cache_key_in_metrics);  // not our form
  CHECK(verdict("Bad-Key", "x") == LabelViolation::malformed_key);
  CHECK(validate_metric_labels(std::vector<MetricLabel>{{"ok", "x"}, {"9lives", "x"}}).error().field == "labels[1]");
}
