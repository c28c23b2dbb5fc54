#include "tools/chaos/chaos_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "services/common/splitmix64.hpp"
#include "services/common/toml_reader.hpp"

namespace kvrt::chaos {

namespace {

constexpr std::array<std::string_view, kFaultKindCount> kFaultKeys{
    "worker_sigkill", "worker_sigstop", "worker_hang", "worker_sigterm",  "node_sigkill",
    "fault_point",    "hostile_client", "transport",   "namespace_update"};

std::string resolve(const std::string& base_file, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_file).parent_path() / path).lexically_normal().string();
}

Status refuse_unknown(const TomlReader& reader, const toml::table& table, const std::string& where,
                      const std::set<std::string>& known) {
  for (const auto& [key, node] : table)
    if (!known.contains(std::string(key.str())))
      return reader.field_error(&node, where, std::string(key.str()), "unknown key");
  return Status::success();
}

Result<ChaosConfig> read_chaos_config(const TomlReader& reader, const std::string& origin) {
  ChaosConfig c;
  c.config_path = origin;
  const toml::table* chaos = reader.root()["chaos"].as_table();
  if (chaos == nullptr) return make_error(ErrorCode::config_field, origin + ": missing table [chaos]", "chaos");
  KVRT_TRY(
      refuse_unknown(reader, *chaos, "chaos",
                     {"seed", "duration_s", "workers", "worker_duration_s", "node_config", "stop_ms",
                      "settle_timeout_ms", "validate_every_ms", "admin_principal", "baseline_s", "hostile_principal",
                      "hostile_ms", "alternate_node_config", "transport_delay_ms", "worker_call_timeout_ms",
                      "engine_slots", "engine_run_config", "engine_workload", "channel_only"}));
  for (const auto& [key, node] : reader.root())
    if (key.str() != "chaos" && key.str() != "faults")
      return reader.field_error(&node, "", std::string(key.str()), "unknown table");
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "seed", 1, 0, INT64_MAX));
  c.seed = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "duration_s", 60, 1, 24 * 3600));
  c.duration_s = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "workers", 4, 1, 64));
  c.workers = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "worker_duration_s", 4, 1, 3600));
  c.worker_duration_s = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "stop_ms", 300, 1, 60000));
  c.stop_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "settle_timeout_ms", 15000, 100, 600000));
  c.settle_timeout_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "validate_every_ms", 1000, 10, 600000));
  c.validate_every_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "baseline_s", 0, 0, 24 * 3600));
  c.baseline_s = static_cast<uint32_t>(v);
  std::string node_config;
  KVRT_TRY_ASSIGN(node_config, reader.string(*chaos, "chaos", "node_config", "node.toml"));
  if (node_config.empty())
    return reader.field_error(chaos->get("node_config"), "chaos", "node_config", "must name a node config file");
  c.node_config_path = resolve(origin, node_config);
  std::string alternate;
  KVRT_TRY_ASSIGN(alternate, reader.string(*chaos, "chaos", "alternate_node_config", ""));
  if (!alternate.empty()) c.alternate_node_config_path = resolve(origin, alternate);
  KVRT_TRY_ASSIGN(c.admin_principal, reader.string(*chaos, "chaos", "admin_principal", "chaos-admin"));
  KVRT_TRY_ASSIGN(c.hostile_principal, reader.string(*chaos, "chaos", "hostile_principal", "chaos-hostile"));
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "hostile_ms", 2000, 10, 600000));
  c.hostile_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "transport_delay_ms", 200, 1, 600000));
  c.transport_delay_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "worker_call_timeout_ms", 3000, 10, 3600000));
  c.worker_call_timeout_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*chaos, "chaos", "engine_slots", 0, 0, 64));
  c.engine_slots = static_cast<uint32_t>(v);
  if (c.engine_slots > c.workers)
    return reader.field_error(chaos->get("engine_slots"), "chaos", "engine_slots",
                              "must be at most workers (" + std::to_string(c.workers) + ")");
  KVRT_TRY_ASSIGN(c.channel_only, reader.boolean(*chaos, "chaos", "channel_only", false));
  std::string path;
  KVRT_TRY_ASSIGN(path, reader.string(*chaos, "chaos", "engine_run_config", "run.toml"));
  c.engine_run_config_path = resolve(origin, path);
  KVRT_TRY_ASSIGN(path, reader.string(*chaos, "chaos", "engine_workload", "workloads/chaos-engine.toml"));
  c.engine_workload_path = resolve(origin, path);
  if (const toml::table* faults = reader.root()["faults"].as_table()) {
    KVRT_TRY(refuse_unknown(reader, *faults, "faults", std::set<std::string>(kFaultKeys.begin(), kFaultKeys.end())));
    for (size_t k = 0; k < kFaultKindCount; ++k) {
      KVRT_TRY_ASSIGN(v, reader.integer(*faults, "faults", std::string(kFaultKeys[k]), 0, 0, 60000));
      c.per_minute[k] = static_cast<uint32_t>(v);
    }
    // The schedule is drawn whole before the campaign starts: bound it.
    uint64_t per_minute = 0;
    for (uint32_t r : c.per_minute) per_minute += r;
    if (per_minute * c.duration_s / 60 > kMaxScheduledFaults)
      return reader.field_error(faults, "", "faults",
                                "the rates schedule about " + std::to_string(per_minute * c.duration_s / 60) +
                                    " faults in duration_s; at most " + std::to_string(kMaxScheduledFaults));
  }
  return c;
}

}  // namespace

std::string_view to_string(FaultKind kind) { return kFaultKeys.at(static_cast<size_t>(kind)); }

Result<ChaosConfig> parse_chaos_config(std::string_view text, const std::string& origin) {
  auto reader = TomlReader::parse(text, origin);
  if (!reader.ok()) return reader.error();
  return read_chaos_config(*reader, origin);
}

Result<ChaosConfig> load_chaos_config(const std::string& path) {
  auto reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return read_chaos_config(*reader, std::filesystem::absolute(path).lexically_normal().string());
}

std::vector<FaultEvent> make_fault_schedule(const ChaosConfig& config, uint64_t seed) {
  std::vector<FaultEvent> events;
  const double horizon_ms = 1000.0 * config.duration_s;
  for (size_t k = 0; k < kFaultKindCount; ++k) {
    if (config.per_minute[k] == 0) continue;
    // One stream per kind: changing one kind's rate leaves the others' moments alone.
    SplitMix64 rng{splitmix64(seed ^ (0x9e37u * (k + 1)))};
    const double mean_gap_ms = 60000.0 / config.per_minute[k];
    double t = 0;
    while (true) {
      // u in (0, 1]: 53 random bits, never 0, so the logarithm is finite.
      const double u = (static_cast<double>(rng.next() >> 11) + 1.0) * 0x1.0p-53;
      t += -std::log(u) * mean_gap_ms;
      if (t >= horizon_ms) break;
      const auto kind = static_cast<FaultKind>(k);
      uint32_t slot = 0;
      if (is_worker_fault(kind))
        slot = static_cast<uint32_t>(rng.next() % config.workers);
      else if (kind != FaultKind::node_sigkill)
        slot = static_cast<uint32_t>(rng.next() >> 32);
      events.push_back(FaultEvent{static_cast<uint64_t>(t), kind, slot});
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const FaultEvent& a, const FaultEvent& b) {
    return a.at_ms != b.at_ms ? a.at_ms < b.at_ms : a.kind < b.kind;
  });
  return events;
}

}  // namespace kvrt::chaos
