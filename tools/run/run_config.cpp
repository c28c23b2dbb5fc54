#include "tools/run/run_config.hpp"

#include <filesystem>
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
                                           "radix_budget_blocks"};
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
  KVRT_TRY_ASSIGN(v,
                  reader.integer(*run, "run", "radix_budget_blocks", 0, 0, static_cast<int64_t>(c.blocks_per_group)));
  c.radix_budget_blocks = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(c.model, model::load_model_config(path));
  return c;
}

std::string node_config_for_run(const RunConfig& run, const workload::Workload& workload,
                                PrefixIndexKind prefix_index) {
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
    << "radix_budget_blocks = " << run.radix_budget_blocks << "\n";
  std::string names;
  for (const workload::TenantSpec& t : workload.tenants) {
    const size_t slash = t.namespace_name.find('/');
    o << "\n[[namespace]]\n"
      << "deployment = " << quoted(t.namespace_name.substr(0, slash)) << "\n"
      << "tenant = " << quoted(t.namespace_name.substr(slash + 1)) << "\n"
      << "publication_policy = " << quoted(t.publication_policy) << "\n";
    if (t.salt) o << "salt = " << quoted(*t.salt) << "\n";
    names += (names.empty() ? "" : ", ") + quoted(t.namespace_name);
  }
  for (uint32_t w = 0; w < run.workers; ++w)
    o << "\n[[principal]]\nname = \"worker-" << w << "\"\nnamespaces = [" << names << "]\n";
  return o.str();
}

}  // namespace kvrt
