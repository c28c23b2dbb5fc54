#pragma once
// Session set-up between a worker and the node (issue 5): the worker presents
// its bearer token once; the node answers with the session it opened and the
// facts the worker needs to attach the pools. Authorization of a namespace is
// an explicit second message, so a principal holds grants only for the
// namespaces it asked for and was allowed (0x0CE).
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/trace_context.hpp"

namespace kvrt {

using SessionId = StrongId<struct SessionIdTag, uint64_t>;

struct HelloRequest {
  std::string token;        // the principal's bearer token (hex); never logged
  std::string worker_name;  // for logs and traces
  uint32_t process_id = 0;
  friend bool operator==(const HelloRequest&, const HelloRequest&) = default;
};

// One shared-memory pool the worker may attach (read/write payload bytes only).
struct PoolAttachment {
  CacheGroupId group;
  PoolId pool;
  PoolGeneration generation;
  std::string segment_name;    // POSIX shared-memory name; empty for a GPU pool
  uint64_t segment_bytes = 0;  // [bytes] of the segment, or of the GPU allocation (same layout)
  // A GPU pool (`[node] pool_backend = "cuda"`): the CUDA IPC handle of its
  // allocation, 128 hex digits, and the node's device ordinal. Empty for a
  // pool in POSIX shared memory.
  std::string cuda_ipc_handle{};
  uint32_t cuda_device = 0;
  friend bool operator==(const PoolAttachment&, const PoolAttachment&) = default;
};

struct SessionReceipt {
  SessionId session;
  std::string principal;
  std::vector<std::string> allowed_namespaces;
  Sha256Digest layout_sha256;         // the layout the node serves
  uint32_t block_tokens = 0;          // allocator block size P [tokens]
  std::vector<PoolAttachment> pools;  // one per cache group, manifest order
  // The session channel (services/session/channel_frame.hpp): the socket a
  // worker may connect to instead of calling through the middleman, and the
  // ticket that binds a connection to this session. Empty: the node offers
  // no channel. The ticket is a secret of this session, like the token.
  std::string channel_socket;
  std::string channel_ticket;
  friend bool operator==(const SessionReceipt&, const SessionReceipt&) = default;
};

struct AuthorizeRequest {
  TraceContext trace;
  std::string namespace_name;
  friend bool operator==(const AuthorizeRequest&, const AuthorizeRequest&) = default;
};

// A namespace grant: the principal may look up and publish in this namespace
// at this generation; a later generation (revocation, invalidation) voids it.
struct NamespaceGrantReceipt {
  uint64_t grant_id = 0;
  std::string namespace_name;
  NamespaceGeneration generation;
  // Canonical SHA-256 of (grant id, principal, namespace, generation): what
  // an audit log records to name this grant without the salt or the token.
  Sha256Digest grant_sha256;
  friend bool operator==(const NamespaceGrantReceipt&, const NamespaceGrantReceipt&) = default;
};

}  // namespace kvrt
