#pragma once
// NodeDescriptor: the file `kvrt node --descriptor PATH` writes for workers
//: where the gateway listens, the pools to attach (names and
// generations), the layout and its digest, and the directory holding each
// principal's token file (mode 0600; the descriptor itself holds no secret).
// Written atomically (temporary file + rename), so a worker never reads half
// a descriptor.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/process_identity.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// The mapper's page pool, when the node serves a mapper: the
// geometry a worker rebuilds its contiguous view with, and the Unix socket
// (SOCK_SEQPACKET, in a directory only the node's user can enter) that hands
// out the pool's memfd (services/mapper/page_pool_channel.hpp).
struct MapperAttachment {
  uint32_t local_layers = 0, request_slots = 0, max_tokens = 0, kv_heads = 0, head_dim = 0, element_bytes = 0;
  uint64_t page_group_bytes = 0;
  uint32_t handle_count = 0;
  uint32_t pool_generation = 0;
  std::string socket_path;
};

struct NodeDescriptor {
  std::string host;
  uint16_t port = 0;
  uint32_t node_pid = 0;
  // /proc/<pid>/stat start time of the node process [clock ticks since boot]:
  // with node_pid, the node's identity even after its pid is reused, so a
  // worker can tell a dead node from a live one that closed its session.
  uint64_t node_start_ticks = 0;
  std::string instance;     // shared-memory instance suffix
  std::string layout_path;  // absolute
  Sha256Digest layout_sha256;
  uint32_t block_tokens = 0;  // allocator block size [tokens]
  std::vector<PoolAttachment> pools;
  std::string token_dir;  // <principal>.token files
  // The session channel's socket (services/session/channel_frame.hpp);
  // empty: the node offers none. A client may open its session there
  // (kHelloRoute) without the middleman.
  std::string channel_socket;
  std::optional<MapperAttachment> mapper;
  // The KV event publisher's bound addresses ([events]); empty: none.
  std::string events_endpoint;
  std::string events_replay_endpoint;
  // The Prometheus scrape URL ([metrics]; "http://host:port/metrics"), empty: none.
  std::string metrics_url;

  std::string token_path(const std::string& principal) const { return token_dir + "/" + principal + ".token"; }
  // "host:port", and "host:port (pid N)": how errors, logs and titles name the node.
  std::string address() const { return host + ":" + std::to_string(port); }
  std::string address_and_pid() const { return address() + " (pid " + std::to_string(node_pid) + ")"; }
  // The node's process, as owner_state() judges it (pid 0: a descriptor without it).
  ProcessIdentity process() const { return ProcessIdentity{static_cast<int32_t>(node_pid), node_start_ticks}; }
};

Status write_node_descriptor(const NodeDescriptor& d, const std::string& path);
Result<NodeDescriptor> read_node_descriptor(const std::string& path);
// The descriptor's JSON text as write_node_descriptor writes it, and its
// parse as read_node_descriptor reads it (`path` names it in errors):
// descriptor_invalid for text that is not a descriptor.
std::string node_descriptor_json(const NodeDescriptor& d);
Result<NodeDescriptor> parse_node_descriptor(std::string_view text, const std::string& path);
// Reads a token file written by the node (32 hex digits and a newline).
Result<std::string> read_token_file(const std::string& path);
// Writes one token file with mode 0600 (created exclusively after removing a stale one).
Status write_token_file(const std::string& path, const std::string& token_hex);

}  // namespace kvrt
