#include "services/session/node_descriptor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvrt {

namespace {

Error invalid(const std::string& path, const std::string& why, const std::string& field = {}) {
  return make_error(ErrorCode::descriptor_invalid, path + ": " + why, field);
}

// A field holding a JSON integer that fits T. nlohmann's get<T>() converts
// whatever number it finds: a float out of T's range is undefined behaviour,
// a negative or wider integer wraps (port -1 would read as 65535). The
// refusal is a json exception like every other mistyped field's.
template <class T>
T unsigned_at(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<T>::max())
    throw nlohmann::json::type_error::create(
        302, std::string(key) + " must be an integer in [0, " + std::to_string(std::numeric_limits<T>::max()) + "]",
        &v);
  return static_cast<T>(v.get<uint64_t>());
}

Result<Sha256Digest> digest_from_hex(const std::string& hex) {
  Sha256Digest d;
  if (hex.size() != 64) return make_error(ErrorCode::descriptor_invalid, "digest is not 64 hex digits");
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1)
      return make_error(ErrorCode::descriptor_invalid, "digest is not hex");
    d.bytes[i] = static_cast<uint8_t>(v);
  }
  return d;
}

}  // namespace

std::string node_descriptor_json(const NodeDescriptor& d) {
  nlohmann::ordered_json j;
  j["host"] = d.host;
  j["port"] = d.port;
  j["node_pid"] = d.node_pid;
  j["node_start_ticks"] = d.node_start_ticks;
  j["instance"] = d.instance;
  j["layout_path"] = d.layout_path;
  j["layout_sha256"] = d.layout_sha256.hex();
  j["block_tokens"] = d.block_tokens;
  j["token_dir"] = d.token_dir;
  if (!d.channel_socket.empty()) j["channel_socket"] = d.channel_socket;
  if (!d.events_endpoint.empty()) j["events_endpoint"] = d.events_endpoint;
  if (!d.events_replay_endpoint.empty()) j["events_replay_endpoint"] = d.events_replay_endpoint;
  if (!d.metrics_url.empty()) j["metrics_url"] = d.metrics_url;
  j["pools"] = nlohmann::json::array();
  for (const PoolAttachment& p : d.pools) {
    nlohmann::ordered_json pool{{"group", p.group.value},
                                {"pool", p.pool.value},
                                {"generation", p.generation.value},
                                {"segment", p.segment_name},
                                {"segment_bytes", p.segment_bytes}};
    if (p.by_descriptor) pool["by_descriptor"] = true;
    // A GPU pool's CUDA IPC handle is a capability to its memory: it travels
    // only in the session receipts of sessions allowed a namespace, never in
    // this file, which any process that can read the path could use.
    if (!p.cuda_ipc_handle.empty()) {
      pool["on_gpu"] = true;
      pool["cuda_device"] = p.cuda_device;
    }
    j["pools"].push_back(std::move(pool));
  }
  if (d.mapper)
    j["mapper"] = {{"local_layers", d.mapper->local_layers},
                   {"request_slots", d.mapper->request_slots},
                   {"max_tokens", d.mapper->max_tokens},
                   {"kv_heads", d.mapper->kv_heads},
                   {"head_dim", d.mapper->head_dim},
                   {"element_bytes", d.mapper->element_bytes},
                   {"page_group_bytes", d.mapper->page_group_bytes},
                   {"handle_count", d.mapper->handle_count},
                   {"pool_generation", d.mapper->pool_generation},
                   {"socket_path", d.mapper->socket_path}};
  return j.dump(2) + "\n";
}

Status write_node_descriptor(const NodeDescriptor& d, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return make_error(ErrorCode::io, "cannot write descriptor " + tmp, "descriptor");
    out << node_descriptor_json(d);
    if (!out) return make_error(ErrorCode::io, "short write to " + tmp, "descriptor");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error(ErrorCode::io, "cannot rename " + tmp + " to " + path, "descriptor");
  return Status::success();
}

Result<NodeDescriptor> read_node_descriptor(const std::string& path) {
  std::ifstream in(path);
  // A node writes its descriptor once it serves and a restarting node
  // replaces a dead one's: no file is no node serving this path (yet).
  std::error_code missing;
  if (!in && !std::filesystem::exists(path, missing) && !missing)
    return make_error(ErrorCode::node_unreachable,
                      path + ": no node serves this descriptor path (is the node running?)", "descriptor");
  if (!in) return invalid(path, "cannot be read (is the node running?)", "descriptor");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_node_descriptor(text.str(), path);
}

Result<NodeDescriptor> parse_node_descriptor(std::string_view text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid(path, "is not a JSON object", "descriptor");
  NodeDescriptor d;
  try {
    d.host = j.at("host").get<std::string>();
    d.port = unsigned_at<uint16_t>(j, "port");
    d.node_pid = unsigned_at<uint32_t>(j, "node_pid");
    d.node_start_ticks = unsigned_at<uint64_t>(j, "node_start_ticks");
    d.instance = j.at("instance").get<std::string>();
    d.layout_path = j.at("layout_path").get<std::string>();
    Result<Sha256Digest> digest = digest_from_hex(j.at("layout_sha256").get<std::string>());
    if (!digest.ok()) return invalid(path, digest.error().reason, "layout_sha256");
    d.layout_sha256 = *digest;
    d.block_tokens = unsigned_at<uint32_t>(j, "block_tokens");
    d.token_dir = j.at("token_dir").get<std::string>();
    d.channel_socket = j.value("channel_socket", std::string());
    d.events_endpoint = j.value("events_endpoint", std::string());
    d.events_replay_endpoint = j.value("events_replay_endpoint", std::string());
    d.metrics_url = j.value("metrics_url", std::string());
    for (const auto& p : j.at("pools")) {
      PoolAttachment a;
      a.group = CacheGroupId{unsigned_at<uint32_t>(p, "group")};
      a.pool = PoolId{unsigned_at<uint32_t>(p, "pool")};
      a.generation = PoolGeneration{unsigned_at<uint32_t>(p, "generation")};
      a.segment_name = p.at("segment").get<std::string>();
      a.segment_bytes = unsigned_at<uint64_t>(p, "segment_bytes");
      a.by_descriptor = p.value("by_descriptor", false);
      if (p.contains("cuda_device")) a.cuda_device = unsigned_at<uint32_t>(p, "cuda_device");
      d.pools.push_back(std::move(a));
    }
    if (j.contains("mapper")) {
      const auto& m = j.at("mapper");
      MapperAttachment a;
      a.local_layers = unsigned_at<uint32_t>(m, "local_layers");
      a.request_slots = unsigned_at<uint32_t>(m, "request_slots");
      a.max_tokens = unsigned_at<uint32_t>(m, "max_tokens");
      a.kv_heads = unsigned_at<uint32_t>(m, "kv_heads");
      a.head_dim = unsigned_at<uint32_t>(m, "head_dim");
      a.element_bytes = unsigned_at<uint32_t>(m, "element_bytes");
      a.page_group_bytes = unsigned_at<uint64_t>(m, "page_group_bytes");
      a.handle_count = unsigned_at<uint32_t>(m, "handle_count");
      a.pool_generation = unsigned_at<uint32_t>(m, "pool_generation");
      a.socket_path = m.at("socket_path").get<std::string>();
      d.mapper = a;
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid(path, std::string("missing or mistyped field: ") + e.what(), "descriptor");
  }
  if (d.port == 0) return invalid(path, "port 0 (the node writes the port it listens on)", "port");
  return d;
}

Result<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::io, "cannot read token file " + path, "token");
  std::string token;
  std::getline(in, token);
  if (token.size() != 32) return make_error(ErrorCode::descriptor_invalid, path + " holds no 32-digit token", "token");
  return token;
}

Status write_token_file(const std::string& path, const std::string& token_hex) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(ErrorCode::io, "cannot create token file " + path, "token");
  const std::string line = token_hex + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) return make_error(ErrorCode::io, "short write to token file " + path, "token");
  return Status::success();
}

}  // namespace kvrt
