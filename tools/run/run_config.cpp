#include "tools/run/run_config.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>
#include <sstream>

#include "node/node_config_fields.hpp"
#include "services/common/toml_reader.hpp"

namespace kvrt {

namespace {

std::string resolve(const std::string& base_file, const std::string& path) {
  if (std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_file).parent_path() / path).lexically_normal().string();
}

// TOML basic strings: quotes and backslashes escaped, nothing else needed for
// the names and paths written here (no control characters reach them: the
// workload loader refuses such namespaces).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

Result<UpdateSchedule> read_update_schedule(const TomlReader& reader) {
  UpdateSchedule u;
  const toml::table* t = reader.root()["updates"].as_table();
  if (t == nullptr) return u;
  static const std::set<std::string> known{"weights_every_ms",      "adapter_every_ms",  "adapters",
                                           "purge_tenant_every_ms", "purge_deadline_ms", "baseline"};
  for (const auto& [key, node] : *t)
    if (!known.contains(std::string(key.str())))
      return reader.field_error(&node, "updates", std::string(key.str()), "unknown key");
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, reader.integer(*t, "updates", "weights_every_ms", 0, 0, 3600000));
  u.weights_every_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*t, "updates", "adapter_every_ms", 0, 0, 3600000));
  u.adapter_every_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*t, "updates", "purge_tenant_every_ms", 0, 0, 3600000));
  u.purge_tenant_every_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*t, "updates", "purge_deadline_ms", 20, 0, 60000));
  u.purge_deadline_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(u.baseline, reader.boolean(*t, "updates", "baseline", true));
  if (t->contains("adapters")) KVRT_TRY_ASSIGN(u.adapters, reader.string_array(*t, "updates", "adapters"));
  const std::set<std::string> distinct(u.adapters.begin(), u.adapters.end());
  if (distinct.size() != u.adapters.size() || distinct.contains(""))
    return reader.field_error(t->get("adapters"), "updates", "adapters",
                              "adapter names must be distinct and non-empty");
  // A swap must change the adapter (0x01A: an invalidation that changes
  // nothing it claims to is refused), so the rotation needs two names.
  if (u.adapter_every_ms != 0 && u.adapters.size() < 2)
    return reader.field_error(t->get("adapter_every_ms"), "updates", "adapter_every_ms",
                              "adapter swaps need at least two names in adapters");
  return u;
}

}  // namespace

Result<RunConfig> load_run_config(const std::string& path) {
  auto reader_result = TomlReader::open(path);
  if (!reader_result.ok()) return reader_result.error();
  TomlReader reader = std::move(reader_result).value();
  RunConfig c;
  c.config_path = std::filesystem::absolute(path).lexically_normal().string();
  const toml::table* run = reader.root()["run"].as_table();
  if (run == nullptr) return make_error(ErrorCode::config_field, path + ": missing table [run]", "run");
  static const std::set<std::string> known{"workers",
                                           "workload",
                                           "layout",
                                           "blocks_per_group",
                                           "in_flight",
                                           "verify",
                                           "sample_interval_ms",
                                           "heartbeat_interval_ms",
                                           "connection_timeout_ms",
                                           "node_threads",
                                           "node_scheduler",
                                           "prefix_index",
                                           "reuse_policy",
                                           "pool_segments",
                                           "domain_pools",
                                           "radix_budget_blocks",
                                           "mapper_handle_percent",
                                           "mapper_map_ahead",
                                           "session_tier",
                                           "shared_prefix_site",
                                           "shared_prefix_design",
                                           "pool_backend",
                                           "staged_pools"};
  for (const auto& [key, node] : *run)
    if (!known.contains(std::string(key.str())))
      return reader.field_error(&node, "run", std::string(key.str()), "unknown key");
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "workers", 4, 1, 64));
  c.workers = static_cast<uint32_t>(v);
  std::string s;
  KVRT_TRY_ASSIGN(s, reader.string(*run, "run", "workload", std::string("workloads/default-mix.toml")));
  c.workload_path = resolve(c.config_path, s);
  KVRT_TRY_ASSIGN(s, reader.string(*run, "run", "layout", std::string("layouts/small-two-group.toml")));
  c.layout_path = resolve(c.config_path, s);
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "blocks_per_group", 2048, 16, int64_t{1} << 22));
  c.blocks_per_group = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "in_flight", 8, 1, 1024));
  c.in_flight = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(c.verify, reader.boolean(*run, "run", "verify", true));
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "sample_interval_ms", 100, 10, 60000));
  c.sample_interval_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "heartbeat_interval_ms", 250, 10, 60000));
  c.heartbeat_interval_ms = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "connection_timeout_ms", 5000, 50, 600000));
  c.connection_timeout_ms = static_cast<uint32_t>(v);
  if (c.connection_timeout_ms <= c.heartbeat_interval_ms)
    return reader.field_error(run->get("connection_timeout_ms"), "run", "connection_timeout_ms",
                              "must exceed heartbeat_interval_ms");
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "node_threads", 2, 1, 64));
  c.node_threads = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(c.node_scheduler, read_node_scheduler(reader, *run, "run", "node_scheduler"));
  KVRT_TRY_ASSIGN(c.prefix_index, read_prefix_index_kind(reader, *run, "run", "prefix_index"));
  KVRT_TRY_ASSIGN(c.reuse_policy, read_reuse_policy(reader, *run, "run", "reuse_policy"));
  KVRT_TRY_ASSIGN(c.pool_segments, read_pool_segments(reader, *run, "run", "pool_segments"));
  KVRT_TRY_ASSIGN(c.domain_pools, reader.boolean(*run, "run", "domain_pools", false));
  if (c.domain_pools && c.pool_segments != PoolSegments::unnamed)
    return reader.field_error(run->get("domain_pools"), "run", "domain_pools",
                              "a domain's pools are handed only to its workers: needs pool_segments = \"unnamed\"");
  KVRT_TRY_ASSIGN(c.pool_backend, reader.choice<PoolBackend>(*run, "run", "pool_backend", name_of(PoolBackend::shm),
                                                             {{name_of(PoolBackend::shm), PoolBackend::shm},
                                                              {name_of(PoolBackend::cuda), PoolBackend::cuda}}));
  if (c.pool_backend == PoolBackend::cuda && c.pool_segments != PoolSegments::named)
    return reader.field_error(run->get("pool_backend"), "run", "pool_backend",
                              "GPU pools are handed to workers as CUDA IPC handles: pool_segments does not apply");
  KVRT_TRY_ASSIGN(c.staged_pools, reader.boolean(*run, "run", "staged_pools", false));
  KVRT_TRY_ASSIGN(v,
                  reader.integer(*run, "run", "radix_budget_blocks", 0, 0, static_cast<int64_t>(c.blocks_per_group)));
  c.radix_budget_blocks = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, reader.integer(*run, "run", "mapper_handle_percent", 100, 1, 100));
  c.mapper_handle_percent = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(c.mapper_map_ahead, reader.boolean(*run, "run", "mapper_map_ahead", true));
  KVRT_TRY_ASSIGN(c.session_tier, reader.boolean(*run, "run", "session_tier", false));
  KVRT_TRY_ASSIGN(s, reader.string(*run, "run", "shared_prefix_site", std::string("worker")));
  if (auto site = parse_shared_prefix_site(s, "shared_prefix_site"); site.ok())
    c.shared_prefix_site = *site;
  else
    return reader.field_error(run->get("shared_prefix_site"), "run", "shared_prefix_site", site.error().reason);
  KVRT_TRY_ASSIGN(s, reader.string(*run, "run", "shared_prefix_design", std::string("auto")));
  if (auto design = parse_shared_prefix_design(s, "shared_prefix_design"); design.ok())
    c.shared_prefix_design = *design;
  else
    return reader.field_error(run->get("shared_prefix_design"), "run", "shared_prefix_design", design.error().reason);
  if (c.shared_prefix_design != SharedPrefixDesign::auto_ && c.shared_prefix_site != SharedPrefixSite::node)
    return reader.field_error(run->get("shared_prefix_design"), "run", "shared_prefix_design",
                              "names the node's design: needs shared_prefix_site = \"node\"");
  KVRT_TRY_ASSIGN(c.model, model::load_model_config(path));
  KVRT_TRY_ASSIGN(c.updates, read_update_schedule(reader));
  return c;
}

Result<NodeMapperConfig> mapper_for_run(const RunConfig& run, const workload::Workload& workload,
                                        const CacheLayoutManifest& layout) {
  if (layout.cache_groups.size() != 1)
    return make_error(ErrorCode::config_field,
                      run.layout_path + ": virtual pages map one cache group's tensors; layout '" + layout.manifest_id +
                          "' has " + std::to_string(layout.cache_groups.size()),
                      "layout");
  const CacheGroupLayout& g = layout.cache_groups[0];
  const uint64_t row_bytes = uint64_t{g.kv_heads_local} * g.head_dim * scalar_bytes(g.k_dtype);  // B_tensor,row
  const uint64_t page_bytes = layout.physical_page_bytes;  // G, as the layout declares it
  if (row_bytes == 0 || page_bytes % row_bytes != 0)
    return make_error(ErrorCode::config_field,
                      run.layout_path + ": a K/V row of " + std::to_string(row_bytes) + " bytes does not divide a " +
                          std::to_string(page_bytes) + "-byte page",
                      "layout");
  const uint64_t page_tokens = page_bytes / row_bytes;
  const uint64_t unit = std::lcm(page_tokens, uint64_t{layout.allocator_block_size});
  const uint64_t longest = std::max<uint64_t>(1, workload.max_context_tokens());
  NodeMapperConfig m;
  m.enabled = true;
  m.request_slots = run.workers * run.in_flight;
  m.max_tokens = static_cast<uint32_t>((longest + unit - 1) / unit * unit);
  m.page_group_bytes = page_bytes;
  // Whole bundles (one page of each of the 2L tensors), at least one slot's worth.
  const uint64_t bundle = 2ull * g.layers(), per_slot = m.max_tokens / page_tokens;
  const uint64_t bundles =
      std::max<uint64_t>(per_slot, (uint64_t{m.request_slots} * per_slot * run.mapper_handle_percent + 99) / 100);
  m.handle_count = static_cast<uint32_t>(bundle * bundles);
  m.map_ahead = run.mapper_map_ahead;
  return m;
}

std::string node_config_for_run(const RunConfig& run, const workload::Workload& workload, PrefixIndexKind prefix_index,
                                bool with_updates, const NodeMapperConfig* mapper, const std::string& tier_directory) {
  std::ostringstream o;
  o << "# Written by kvrt run from " << run.config_path << " and " << workload.origin << ".\n"
    << "[node]\n"
    << "layout = " << quoted(run.layout_path) << "\n"
    << "blocks_per_group = " << run.blocks_per_group << "\n"
    << "host = \"127.0.0.1\"\nport = 0\n"
    << "heartbeat_interval_ms = " << run.heartbeat_interval_ms << "\n"
    << "connection_timeout_ms = " << run.connection_timeout_ms << "\n"
    << "scheduler_threads = " << run.node_threads << "\n"
    << "scheduler = " << quoted(std::string(name_of(run.node_scheduler))) << "\n"
    << "max_requests = " << std::max<uint64_t>(1024, uint64_t{run.workers} * run.in_flight * 64) << "\n"
    << "prefix_index = " << quoted(std::string(name_of(prefix_index))) << "\n"
    << "reuse_policy = " << quoted(std::string(config_name_of(run.reuse_policy))) << "\n"
    << "pool_backend = " << quoted(std::string(name_of(run.pool_backend))) << "\n"
    << "pool_segments = " << quoted(std::string(name_of(run.pool_segments))) << "\n"
    << "domain_pools = " << (run.domain_pools ? "true" : "false") << "\n"
    << "radix_budget_blocks = " << run.radix_budget_blocks << "\n";
  if (mapper != nullptr)
    o << "\n[mapper]\nrequest_slots = " << mapper->request_slots << "\nmax_tokens = " << mapper->max_tokens
      << "\npage_group_bytes = " << mapper->page_group_bytes << "\nhandle_count = " << mapper->handle_count
      << "\nmap_ahead = " << (mapper->map_ahead ? "true" : "false") << "\n";
  if (!tier_directory.empty()) o << "\n[tier]\ndirectory = " << quoted(tier_directory) << "\nbudget_mib = 1024\n";
  std::string names;
  // With domain_pools each tenant is a trust domain of its own, named after
  // its namespace ("deployment.tenant": a domain name has no slash).
  const auto domain_of = [](const std::string& ns) {
    std::string d = ns;
    std::replace(d.begin(), d.end(), '/', '.');
    return d;
  };
  if (run.domain_pools)
    for (const workload::TenantSpec& t : workload.tenants)
      o << "\n[[domain]]\nname = " << quoted(domain_of(t.namespace_name)) << "\n";
  for (const workload::TenantSpec& t : workload.tenants) {
    const size_t slash = t.namespace_name.find('/');
    o << "\n[[namespace]]\n"
      << "deployment = " << quoted(t.namespace_name.substr(0, slash)) << "\n"
      << "tenant = " << quoted(t.namespace_name.substr(slash + 1)) << "\n"
      << "publication_policy = " << quoted(t.publication_policy) << "\n";
    if (t.salt) o << "salt = " << quoted(*t.salt) << "\n";
    if (t.quota_blocks) o << "quota_blocks = " << *t.quota_blocks << "\n";
    if (run.domain_pools) o << "domain = " << quoted(domain_of(t.namespace_name)) << "\n";
    names += (names.empty() ? "" : ", ") + quoted(t.namespace_name);
  }
  for (uint32_t w = 0; w < run.workers; ++w) {
    const std::string allowed = run.domain_pools && !workload.tenants.empty()
                                    ? quoted(workload.tenants[workload::tenant_of_worker(workload, w)].namespace_name)
                                    : names;
    o << "\n[[principal]]\nname = \"worker-" << w << "\"\nnamespaces = [" << allowed << "]\n";
  }
  if (with_updates && run.updates.enabled())
    o << "\n[[principal]]\nname = " << quoted(run.updates.admin_principal) << "\nrole = \"admin\"\n";
  return o.str();
}

}  // namespace kvrt
