// `kvrt ledger`: the byte ledgers of spec 0x02 for a layout and a request
// family, reconciled as in 0x0D, with the 0x02F arena and the 0x02G tail
// expectation. With no arguments it prints the 0x0D TP-local worked ledger
// (config/ledgers/tp-local-worked.toml); flags override the scenario.
#include <charconv>
#include <iostream>
#include <optional>

#include "apps/kvrt/ledger_render.hpp"
#include "apps/kvrt/subcommand_registry.hpp"
#include "services/identity/layout_loader.hpp"
#include "tools/ledger/ledger_scenario.hpp"

namespace kvrt::app {
namespace {

struct LedgerOptions {
  std::string scenario = "config/ledgers/tp-local-worked.toml";
  // Overrides, kept as text so that a non-numeric value is a typed error (exit 2).
  std::optional<std::string> layout;
  std::optional<std::string> lengths;      // "33,25,16" [rows]
  std::optional<std::string> reserved;     // "64,48,32" [rows]
  std::optional<std::string> pool_blocks;  // [blocks]
  bool shared_prefix = false;
  bool no_shared_prefix = false;
  std::optional<std::string> prompt_tokens;  // model-wide capacity pressure (0x0D)
  std::optional<std::string> hit_tokens;
  std::optional<std::string> generated_tokens;
  bool json = false;
};

// One unsigned decimal integer; anything else names the flag.
Result<uint64_t> parse_count(std::string_view text, const std::string& field) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range)
    return make_error(ErrorCode::invalid_argument, "'" + std::string(text) + "' exceeds 2^64 - 1", field);
  if (text.empty() || ec != std::errc{} || ptr != end)
    return make_error(ErrorCode::invalid_argument, "'" + std::string(text) + "' is not an unsigned decimal integer",
                      field);
  return value;
}

// "33,25,16" -> {33, 25, 16}; an element error names "--flag[i]".
Result<std::vector<uint64_t>> parse_list(const std::string& text, const std::string& flag) {
  std::vector<uint64_t> out;
  size_t start = 0;
  for (size_t i = 0;; ++i) {
    const size_t comma = text.find(',', start);
    const std::string_view item = std::string_view(text).substr(start, comma - start);
    uint64_t v = 0;
    KVRT_TRY_ASSIGN(v, parse_count(item, flag + "[" + std::to_string(i) + "]"));
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Applies command-line overrides to the scenario. New lengths without
// --reserved reserve exactly the committed rows (no rectangular slack), since
// the scenario's reservations belong to its own family.
Status apply_overrides(const LedgerOptions& o, LedgerScenario& s) {
  if (o.layout) s.layout = *o.layout;
  if (o.lengths) {
    KVRT_TRY_ASSIGN(s.lengths, parse_list(*o.lengths, "--lengths"));
    if (!o.reserved) s.reserved_rows = s.lengths;
  }
  if (o.reserved) KVRT_TRY_ASSIGN(s.reserved_rows, parse_list(*o.reserved, "--reserved"));
  if (o.pool_blocks) KVRT_TRY_ASSIGN(s.pool_blocks, parse_count(*o.pool_blocks, "--pool-blocks"));
  if (o.shared_prefix) s.shared_prefix = true;
  if (o.no_shared_prefix) s.shared_prefix = false;
  return Status::success();
}

Result<std::optional<CapacityPressure>> pressure_for(const LedgerOptions& o, const RowLedger& row) {
  if (!o.prompt_tokens && !o.hit_tokens && !o.generated_tokens) return std::optional<CapacityPressure>{};
  if (!o.prompt_tokens)
    return make_error(ErrorCode::invalid_argument, "--hit-tokens and --generated-tokens need --prompt-tokens",
                      "--prompt-tokens");
  CapacityPressureInput in;
  KVRT_TRY_ASSIGN(in.prompt_tokens, parse_count(*o.prompt_tokens, "--prompt-tokens"));
  if (o.hit_tokens) KVRT_TRY_ASSIGN(in.prefix_hit_tokens, parse_count(*o.hit_tokens, "--hit-tokens"));
  if (o.generated_tokens) KVRT_TRY_ASSIGN(in.generated_tokens, parse_count(*o.generated_tokens, "--generated-tokens"));
  CapacityPressure c;
  KVRT_TRY_ASSIGN(c, capacity_pressure(row, in));
  return std::optional<CapacityPressure>{c};
}

int run_ledger(const LedgerOptions& o) {
  auto scenario = load_ledger_scenario(default_config_path(o.scenario));
  if (!scenario.ok()) return report_error("ledger", scenario.error());
  const Status overridden = apply_overrides(o, *scenario);
  if (!overridden.ok()) return report_error("ledger", overridden.error());
  auto manifest = load_layout_manifest(default_config_path(scenario->layout));
  if (!manifest.ok()) return report_error("ledger", manifest.error());
  auto report = build_ledger_report(*scenario, *manifest);
  if (!report.ok()) return report_error("ledger", report.error());
  auto pressure = pressure_for(o, report->ledgers.row);
  if (!pressure.ok()) return report_error("ledger", pressure.error());

  if (o.json)
    std::cout << ledger_report_json(*report, *pressure).dump(2) << "\n";
  else
    print_ledger_report(std::cout, *report, *pressure);
  return 0;
}

const SubcommandRegistration kRegistration{
    "ledger", [](CLI::App& parent) {
      auto opts = std::make_shared<LedgerOptions>();
      auto* sub = parent.add_subcommand(
          "ledger", "Print the byte ledgers of spec 0x02 (default: the 0x0D TP-local worked ledger)");
      sub->add_option("--scenario", opts->scenario, "ledger scenario TOML")->capture_default_str();
      sub->add_option("--layout", opts->layout, "layout manifest TOML (overrides the scenario's)");
      sub->add_option("--lengths", opts->lengths, "committed rows per request A, B, C, ...: 33,25,16");
      sub->add_option("--reserved", opts->reserved,
                      "rectangular reserved rows per request: 64,48,32 (default with --lengths: the lengths)");
      sub->add_option("--pool-blocks", opts->pool_blocks, "provisioned pool blocks");
      auto* shared = sub->add_flag("--shared-prefix", opts->shared_prefix,
                                   "nested exact-prefix family: shorter requests share the longest's blocks");
      auto* priv = sub->add_flag("--no-shared-prefix", opts->no_shared_prefix, "every request owns private blocks");
      shared->excludes(priv);
      sub->add_option("--prompt-tokens", opts->prompt_tokens, "capacity pressure: prompt length [tokens]");
      sub->add_option("--hit-tokens", opts->hit_tokens, "capacity pressure: exact prefix hit [tokens]");
      sub->add_option("--generated-tokens", opts->generated_tokens, "capacity pressure: response length [tokens]");
      sub->add_flag("--json", opts->json, "print one JSON object (bytes, rows, blocks)");
      return [opts] { return run_ledger(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
