#include "node/node_config.hpp"

#include <algorithm>
#include <filesystem>

#include "metrics/listen_address.hpp"
#include "node/node_config_fields.hpp"
#include "services/authorization/trust_domain_plan.hpp"

namespace kvrt {

std::string_view name_of(PoolBackend backend) { return backend == PoolBackend::cuda ? "cuda" : "shm"; }
std::string_view name_of(NodeScheduler scheduler) {
  return scheduler == NodeScheduler::polling ? "polling" : "sharing";
}
std::string_view name_of(PrefixIndexKind index) { return index == PrefixIndexKind::radix ? "radix" : "hash_chain"; }
std::string_view name_of(PoolSegments segments) { return segments == PoolSegments::unnamed ? "unnamed" : "named"; }
std::string_view config_name_of(ReusePolicy policy) {
  return policy == ReusePolicy::immutable_partial_tail ? "immutable_partial_tail" : "full_block";
}

Result<NodeScheduler> read_node_scheduler(const TomlReader& reader, const toml::table& table, const std::string& where,
                                          const std::string& field) {
  return reader.choice<NodeScheduler>(table, where, field, name_of(NodeScheduler::sharing),
                                      {{name_of(NodeScheduler::sharing), NodeScheduler::sharing},
                                       {name_of(NodeScheduler::polling), NodeScheduler::polling}});
}

Result<PrefixIndexKind> read_prefix_index_kind(const TomlReader& reader, const toml::table& table,
                                               const std::string& where, const std::string& field) {
  return reader.choice<PrefixIndexKind>(table, where, field, name_of(PrefixIndexKind::hash_chain),
                                        {{name_of(PrefixIndexKind::hash_chain), PrefixIndexKind::hash_chain},
                                         {name_of(PrefixIndexKind::radix), PrefixIndexKind::radix}});
}

Result<PoolSegments> read_pool_segments(const TomlReader& reader, const toml::table& table, const std::string& where,
                                        const std::string& field) {
  return reader.choice<PoolSegments>(
      table, where, field, name_of(PoolSegments::named),
      {{name_of(PoolSegments::named), PoolSegments::named}, {name_of(PoolSegments::unnamed), PoolSegments::unnamed}});
}

Result<ReusePolicy> read_reuse_policy(const TomlReader& reader, const toml::table& table, const std::string& where,
                                      const std::string& field) {
  return reader.choice<ReusePolicy>(
      table, where, field, config_name_of(ReusePolicy::full_block),
      {{config_name_of(ReusePolicy::full_block), ReusePolicy::full_block},
       {config_name_of(ReusePolicy::immutable_partial_tail), ReusePolicy::immutable_partial_tail}});
}

namespace {

Result<NodeConfig> read_node_config(const TomlReader& reader) {
  NodeConfig c;
  c.config_path = reader.path();
  const toml::table* node = reader.root()["node"].as_table();
  if (node == nullptr) return make_error(ErrorCode::config_field, reader.path() + ": missing table [node]", "node");
  std::string layout;
  KVRT_TRY_ASSIGN(layout, reader.string(*node, "node", "layout"));
  const std::filesystem::path base = std::filesystem::path(reader.path()).parent_path();
  c.layout_path = std::filesystem::path(layout).is_absolute() ? layout : (base / layout).lexically_normal().string();
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "blocks_per_group", std::nullopt, 1, int64_t{1} << 24));
  c.blocks_per_group = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(c.pool_backend, reader.choice<PoolBackend>(*node, "node", "pool_backend", name_of(PoolBackend::shm),
                                                             {{name_of(PoolBackend::shm), PoolBackend::shm},
                                                              {name_of(PoolBackend::cuda), PoolBackend::cuda}}));
  KVRT_TRY_ASSIGN(c.host, reader.string(*node, "node", "host", std::string("127.0.0.1")));
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "port", 0, 0, 65535));
  c.port = static_cast<uint16_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "heartbeat_interval_ms", 250, 10, 60000));
  c.heartbeat_interval_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "connection_timeout_ms", 2000, 50, 600000));
  c.connection_timeout_ms = static_cast<uint32_t>(v);
  if (c.connection_timeout_ms <= c.heartbeat_interval_ms)
    return reader.field_error(node->get("connection_timeout_ms"), "node", "connection_timeout_ms",
                              "must exceed heartbeat_interval_ms (" + std::to_string(c.heartbeat_interval_ms) +
                                  " ms), or every worker times out");
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "scheduler_threads", 2, 1, 256));
  c.scheduler_threads = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(c.scheduler, read_node_scheduler(reader, *node, "node", "scheduler"));
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "scheduler_poll_attempts", 1000000, 1, int64_t{1} << 32));
  c.scheduler_poll_attempts = static_cast<uint32_t>(std::min<int64_t>(v, UINT32_MAX));
  KVRT_TRY_ASSIGN(c.session_channel, reader.boolean(*node, "node", "session_channel", true));
  KVRT_TRY_ASSIGN(c.pool_segments, read_pool_segments(reader, *node, "node", "pool_segments"));
  if (c.pool_segments == PoolSegments::unnamed && !c.session_channel)
    return reader.field_error(node->get("pool_segments"), "node", "pool_segments",
                              "unnamed segments are handed over the session channel: session_channel must be true");
  if (c.pool_segments == PoolSegments::unnamed && c.pool_backend != PoolBackend::shm)
    return reader.field_error(node->get("pool_segments"), "node", "pool_segments",
                              "applies to shared-memory pools (pool_backend = \"shm\"); GPU pools are handed to "
                              "sessions as CUDA IPC handles");
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "max_requests", 1 << 14, 1, 1 << 20));
  c.max_requests = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(c.fault_injection, reader.boolean(*node, "node", "fault_injection", false));
  KVRT_TRY_ASSIGN(c.zero_on_recycle, reader.boolean(*node, "node", "zero_on_recycle", false));
  KVRT_TRY_ASSIGN(c.prefix_index, read_prefix_index_kind(reader, *node, "node", "prefix_index"));
  KVRT_TRY_ASSIGN(c.reuse_policy, read_reuse_policy(reader, *node, "node", "reuse_policy"));
  KVRT_TRY_ASSIGN(v, reader.integer(*node, "node", "radix_budget_blocks", 0, 0, int64_t{1} << 24));
  c.radix_budget_blocks =
      v == 0 ? static_cast<uint32_t>(std::max<uint64_t>(1, c.blocks_per_group / 2)) : static_cast<uint32_t>(v);
  if (c.radix_budget_blocks > c.blocks_per_group)
    return reader.field_error(node->get("radix_budget_blocks"), "node", "radix_budget_blocks",
                              "exceeds blocks_per_group (" + std::to_string(c.blocks_per_group) + ")");
  std::string eviction;
  KVRT_TRY_ASSIGN(eviction, reader.string(*node, "node", "radix_eviction", std::string("lru")));
  if (Result<EvictionPolicy> p = parse_eviction_policy(eviction); p.ok())
    c.radix_eviction = p.value();
  else
    return reader.field_error(node->get("radix_eviction"), "node", "radix_eviction", p.error().reason);
  KVRT_TRY_ASSIGN(c.authorization, read_authorization_config(reader));
  if (const toml::table* mapper = reader.root()["mapper"].as_table(); mapper != nullptr) {
    c.mapper.enabled = true;
    KVRT_TRY_ASSIGN(v, reader.integer(*mapper, "mapper", "request_slots", std::nullopt, 1, 4096));
    c.mapper.request_slots = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(v, reader.integer(*mapper, "mapper", "max_tokens", std::nullopt, 1, int64_t{1} << 24));
    c.mapper.max_tokens = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(v, reader.integer(*mapper, "mapper", "page_group_bytes", 0, 0, int64_t{1} << 30));
    c.mapper.page_group_bytes = static_cast<uint64_t>(v);
    KVRT_TRY_ASSIGN(v, reader.integer(*mapper, "mapper", "handle_count", std::nullopt, 1, int64_t{1} << 22));
    c.mapper.handle_count = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(c.mapper.map_ahead, reader.boolean(*mapper, "mapper", "map_ahead", true));
  }
  if (const toml::table* tier = reader.root()["tier"].as_table(); tier != nullptr) {
    c.tier.enabled = true;
    KVRT_TRY_ASSIGN(c.tier.directory, reader.string(*tier, "tier", "directory"));
    if (c.tier.directory.empty())
      return reader.field_error(tier->get("directory"), "tier", "directory", "a directory for the saved sessions");
    KVRT_TRY_ASSIGN(v, reader.integer(*tier, "tier", "budget_mib", 1024, 1, int64_t{1} << 30));
    c.tier.budget_mib = static_cast<uint64_t>(v);
  }
  if (const toml::table* events = reader.root()["events"].as_table(); events != nullptr) {
    NodeEventsConfig& e = c.events;
    KVRT_TRY_ASSIGN(e.enabled, reader.boolean(*events, "events", "enabled", true));
    KVRT_TRY_ASSIGN(e.endpoint, reader.string(*events, "events", "endpoint", e.endpoint));
    KVRT_TRY_ASSIGN(e.replay_endpoint, reader.string(*events, "events", "replay_endpoint", e.replay_endpoint));
    KVRT_TRY_ASSIGN(v, reader.integer(*events, "events", "buffer_steps", e.buffer_steps, 1, 1 << 24));
    e.buffer_steps = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(v, reader.integer(*events, "events", "hwm", e.hwm, 0, int64_t{1} << 30));
    e.hwm = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(v, reader.integer(*events, "events", "max_queue_size", e.max_queue_size, 1, int64_t{1} << 30));
    e.max_queue_size = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(e.topic, reader.string(*events, "events", "topic", e.topic));
    std::string hashes;
    KVRT_TRY_ASSIGN(hashes, reader.string(*events, "events", "block_hashes", std::string("bytes")));
    if (hashes != "bytes" && hashes != "int")
      return reader.field_error(events->get("block_hashes"), "events", "block_hashes",
                                "\"bytes\" (the digest) or \"int\" (its low 64 bits, as vLLM's int hashes)");
    e.int_block_hashes = hashes == "int";
    KVRT_TRY_ASSIGN(v, reader.integer(*events, "events", "data_parallel_rank", 0, 0, 1 << 20));
    e.data_parallel_rank = static_cast<uint32_t>(v);
    if (e.enabled && e.endpoint.empty())
      return reader.field_error(events->get("endpoint"), "events", "endpoint", "a ZMQ address to bind is required");
  }
  if (const toml::table* metrics = reader.root()["metrics"].as_table(); metrics != nullptr) {
    NodeMetricsConfig& m = c.metrics;
    KVRT_TRY_ASSIGN(m.enabled, reader.boolean(*metrics, "metrics", "enabled", true));
    KVRT_TRY_ASSIGN(m.listen, reader.string(*metrics, "metrics", "listen", m.listen));
    if (Result<std::pair<std::string, uint16_t>> a = metrics::parse_listen_address(m.listen); !a.ok())
      return reader.field_error(metrics->get("listen"), "metrics", "listen", a.error().reason);
    const auto millis = [&](const char* key, uint32_t& field, int64_t low) -> Status {
      int64_t ms = 0;
      KVRT_TRY_ASSIGN(ms, reader.integer(*metrics, "metrics", key, field, low, int64_t{1} << 31));
      field = static_cast<uint32_t>(ms);
      return Status::success();
    };
    KVRT_TRY(millis("alert_interval_ms", m.alert_interval_ms, 10));
    KVRT_TRY(millis("alert_window_ms", m.alert_window_ms, 10));
    KVRT_TRY(millis("reference_leak_grace_ms", m.reference_leak_grace_ms, 0));
    KVRT_TRY(millis("map_wait_slo_ms", m.map_wait_slo_ms, 0));
    KVRT_TRY_ASSIGN(
        v, reader.integer(*metrics, "metrics", "stable_tolerance_percent", m.stable_tolerance_percent, 0, 100));
    m.stable_tolerance_percent = static_cast<uint32_t>(v);
    if (m.alert_window_ms < m.alert_interval_ms)
      return reader.field_error(metrics->get("alert_window_ms"), "metrics", "alert_window_ms",
                                "must cover at least one alert_interval_ms");
  }
  KVRT_TRY_ASSIGN(c.domain_pools, reader.boolean(*node, "node", "domain_pools", false));
  if (c.domain_pools) {
    const auto refuse = [&](const std::string& why) {
      return reader.field_error(node->get("domain_pools"), "node", "domain_pools", why);
    };
    // GPU pools are handed as IPC handles in session receipts only; shared
    // memory must have no name, or any process of the user could open it.
    if (c.pool_backend == PoolBackend::shm && c.pool_segments != PoolSegments::unnamed)
      return refuse("a domain's pools are handed only to its sessions: needs pool_segments = \"unnamed\"");
    if (c.fault_injection) return refuse("fault_injection arms one pool set's fault points: not with domain_pools");
    if (c.mapper.enabled) return refuse("every worker maps the [mapper] page pool: not with domain_pools");
    if (Result<TrustDomainPlan> plan = TrustDomainPlan::create(c.authorization); !plan.ok())
      return make_error(plan.error().code, reader.path() + ": " + plan.error().reason, plan.error().field);
  }
  return c;
}

}  // namespace

Result<NodeConfig> load_node_config(const std::string& path) {
  Result<TomlReader> reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return read_node_config(*reader);
}

Result<NodeConfig> parse_node_config(std::string_view text, const std::string& origin) {
  Result<TomlReader> reader = TomlReader::parse(text, origin);
  if (!reader.ok()) return reader.error();
  return read_node_config(*reader);
}

}  // namespace kvrt
