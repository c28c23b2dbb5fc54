@0xb85a6c4974eed72a;
# Session set-up between a worker and the node (services/session/), and the
# owners' statistics: the worker presents its bearer token once; the node
# answers with the session it opened and the facts the worker needs to
# attach the pools. Authorization of a namespace is an explicit second
# message (authorization.capnp), so a principal holds grants only for the
# namespaces it asked for and was allowed (0x0CE).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
$Kvrt.include(["services/common/digest.hpp", "services/common/ids.hpp"]);

struct HelloRequest $Kvrt.message {
  token @0 :Text;                          # the principal's bearer token (hex); never logged
  workerName @1 :Text;                     # for logs and traces
  processId @2 :UInt32;                    # the worker's OS process id
}

struct PoolAttachment {
  # One pool the worker may attach (read/write payload bytes only).
  group @0 :UInt32 $Kvrt.type("CacheGroupId");
  pool @1 :UInt32 $Kvrt.type("PoolId");
  generation @2 :UInt32 $Kvrt.type("PoolGeneration");
  segmentName @3 :Text;                    # POSIX shared-memory name; empty for a GPU pool
  segmentBytes @4 :UInt64;                 # [bytes] of the segment, or of the GPU allocation (same layout)
  cudaIpcHandle @5 :Text;
  # A GPU pool (`[node] pool_backend = "cuda"`): the CUDA IPC handle of its
  # allocation, 128 hex digits, and the node's device ordinal. Empty for a
  # pool in POSIX shared memory.
  cudaDevice @6 :UInt32;
  byDescriptor @7 :Bool;
  # The segment has no name ([node] pool_segments = "unnamed"): no process
  # can open it; a session of a principal allowed this pool's namespaces
  # receives its descriptor over the session channel (the pool_descriptors
  # route), and segmentName is empty.
}

struct SessionReceipt $Kvrt.message {
  session @0 :UInt64 $Kvrt.type("SessionId");
  principal @1 :Text;
  allowedNamespaces @2 :List(Text);
  layoutSha256 @3 :Data $Kvrt.type("Sha256Digest");   # the layout the node serves
  blockTokens @4 :UInt32;                  # allocator block size P [tokens]
  pools @5 :List(PoolAttachment);          # one per cache group, manifest order
  channelSocket @6 :Text;
  # The session channel (services/session/channel_frame.hpp): the socket a
  # worker may connect to instead of calling through the middleman, and the
  # ticket that binds a connection to this session. Empty: the node offers
  # no channel. The ticket is a secret of this session, like the token.
  channelTicket @7 :Text;
  admin @8 :Bool;
  # The principal's role is admin: the session may call the admin routes
  # (services/session/routes.hpp, RouteAccess) and no worker route.
  reusePolicyId @9 :Text;
  # The node's prefix reuse policy (0x07D): "kvrt.full_block.v1", or
  # "kvrt.immutable_partial_tail.v1", under which a hit may end inside a
  # block (allocate it with AllocateOp.copyTailRows) and a finished request
  # may publish its partial tail (PrefixPublishOp.tailRows).
}

struct StatValue {
  # One gauge or counter. Names are stable snake_case identifiers with no
  # tokens, prompts or unsalted keys in them (0x0CE telemetry hygiene).
  name @0 :Text;                           # e.g. "pool0_free_blocks"; the unit is in the name
  value @1 :Int64;                         # [unit as named]
}

struct OwnerStats $Kvrt.message {
  # One owner's gauges and counters as read live from a running node (`kvrt stats`).
  owner @0 :Text;                          # "allocator", "prefix_index", ...
  validateOk @1 :Bool = true;              # validate() found nothing wrong (or did not run: see validated)
  validateError @2 :Text;                  # empty when validate_ok
  values @3 :List(StatValue);
  # Whether the owner ran its full validate() for this answer: always in a
  # debug build, in a release build only when asked (`kvrt stats
  # --validate`, the tests); the counters above are cheap either way.
  validated @4 :Bool;
}

struct NodeStatsReceipt $Kvrt.message {
  # Every owner's statistics in one answer (the gateway's stats).
  owners @0 :List(OwnerStats);             # in route-table order; an owner the node does not serve is absent
}
