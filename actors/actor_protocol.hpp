#pragma once
// The messaging interface of the node's actors: atoms, the typed actor
// handles, and the one function that registers every message type. Include
// only from actors/*.cpp: it pulls in CAF (each CAF translation unit costs
// 9-18 s to compile).
//
// What a worker sends or receives is Cap'n Proto bytes (the generated
// schema/<owner>_codec.hpp) carried as std::vector<char>, a CAF builtin, so
// no per-type serializer can silently drop a field across processes. Handles
// (caf::actor) travel as CAF's own builtin type.
//
// A worker's call names a route of services/session/routes.hpp; the session
// actor forwards it to the route's owner, which every owner actor answers
// through the one owner_interface below. The other messages are between the
// owners of one node process and never leave it.
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdint>
#include <optional>
#include <vector>

#include "services/allocator/allocator_service.hpp"
#include "services/executor/executor_service.hpp"
#include "services/mapper/mapper_service.hpp"
#include "services/prefix/prefix_service.hpp"
#include "services/reuse/reuse_step_answers.hpp"
#include "services/session/routes.hpp"

namespace kvrt::actors {

using wire_bytes = std::vector<char>;

// Atoms (at most 10 characters, CAF 0.17).
using route_atom = caf::atom_constant<caf::atom("route")>;              // a routed call (routes.hpp)
using stats_atom = caf::atom_constant<caf::atom("stats")>;              // owner gauges
using ping_atom = caf::atom_constant<caf::atom("ping")>;                // the gateway's echo (a client's close)
using end_atom = caf::atom_constant<caf::atom("sessend")>;              // a session ended
using hello_atom = caf::atom_constant<caf::atom("hello")>;              // a worker opens a session
using attach_atom = caf::atom_constant<caf::atom("attach")>;            // bind a session channel to its session
using channel_hello_atom = caf::atom_constant<caf::atom("chhello")>;    // a session opened on the channel
using channel_closed_atom = caf::atom_constant<caf::atom("chclosed")>;  // its lifeline closed
using tags_atom = caf::atom_constant<caf::atom("tags")>;                // weak-identity tags (prefix -> allocator)
using events_atom = caf::atom_constant<caf::atom("events")>;            // allocator events (allocator -> prefix)
using grant_atom = caf::atom_constant<caf::atom("grant")>;  // a namespace grant (authorization -> indexes, allocator)
using advance_atom =
    caf::atom_constant<caf::atom("advance")>;  // a namespace's generation moved on (authorization -> indexes)
using table_atom = caf::atom_constant<caf::atom("table")>;      // read a request table (index -> allocator)
using lease_atom = caf::atom_constant<caf::atom("lease")>;      // node leases for cached pages (radix -> allocator)
using unlease_atom = caf::atom_constant<caf::atom("unlease")>;  // release leases
using pressure_atom =
    caf::atom_constant<caf::atom("pressure")>;                  // requests are stuck for capacity (allocator -> index)
using reuse_atom = caf::atom_constant<caf::atom("reuse")>;      // executable-reuse transaction (0x0CD) steps
using version_atom = caf::atom_constant<caf::atom("version")>;  // an index's current versions (0x0CD step 5)
using purge_atom = caf::atom_constant<caf::atom("purge")>;      // a step of a namespace purge (0x0CE)

// What every owner actor answers: a routed call (route id, session, request
// bytes -> receipt or ErrorMessage bytes), its statistics (OwnerStats bytes;
// `validate`: run the owner's full validate() first, which a release build
// otherwise leaves to tests and `kvrt stats --validate`), and a session's end.
using owner_interface =
    caf::typed_actor<caf::replies_to<route_atom, uint16_t, uint64_t, wire_bytes>::with<wire_bytes>,
                     caf::replies_to<stats_atom, bool>::with<wire_bytes>, caf::reacts_to<end_atom, uint64_t>>;

// The index owner (hash chain or radix), behind one interface.
using prefix_actor = owner_interface::extend<
    caf::reacts_to<events_atom, std::vector<AllocatorEvent>>,
    // Work keeps being refused for capacity with nothing released in between:
    // about this many blocks per group are missing. An index that holds
    // blocks (the radix) gives some back.
    caf::reacts_to<pressure_atom, uint32_t>, caf::reacts_to<grant_atom, uint64_t, SessionNamespaceGrant>,
    // An invalidation made (namespace, generation) current: every grant of
    // an older generation ends here too.
    caf::reacts_to<advance_atom, std::string, uint64_t>,
    // A purge's steps 2-3: the same advance, answered with the pages of
    // older generations the index gave back (0 for the hash chain, which
    // holds no blocks).
    caf::replies_to<purge_atom, std::string, uint64_t>::with<uint64_t>,
    // 0x0CD, node-internal: step 3 (session, lookups), step 4's path leases
    // (radix), step 5 (versions), and the release of path leases (one flag
    // per lease: released or not held by the session).
    caf::replies_to<reuse_atom, uint64_t, TraceContext, std::vector<PrefixMatchOp>>::with<std::vector<CandidateReply>>,
    caf::replies_to<reuse_atom, uint64_t, TraceContext,
                    std::vector<ReusePathLeaseRequest>>::with<std::vector<ReusePathLeaseAnswer>>,
    caf::replies_to<version_atom, TraceContext>::with<ReuseIndexVersion>,
    caf::replies_to<unlease_atom, uint64_t, TraceContext, std::vector<LeaseId>>::with<std::vector<uint8_t>>>;

using allocator_actor = owner_interface::extend<
    caf::replies_to<table_atom, uint64_t, uint64_t>::with<BlockTableView>,
    caf::replies_to<tags_atom, std::vector<CacheKeyTag>>::with<std::vector<uint8_t>>,
    caf::reacts_to<events_atom, prefix_actor>,  // where allocator events and pressure go
    // The radix index's cached pages: one node lease per handle, or none
    // where the allocator refused it.
    caf::replies_to<lease_atom, std::vector<PhysicalBlockHandle>>::with<std::vector<std::optional<LeaseId>>>,
    caf::reacts_to<unlease_atom, std::vector<LeaseId>>,
    // 0x0CD steps 4-5 for a session (node-internal), and the release of a
    // session's leases (step 10, or attempts that ended without a receipt):
    // one flag per lease, released or not held by the session.
    caf::replies_to<reuse_atom, uint64_t, TraceContext,
                    std::vector<ReuseLeaseRequest>>::with<std::vector<ReuseLeaseAnswer>>,
    caf::replies_to<unlease_atom, uint64_t, TraceContext, std::vector<LeaseId>>::with<std::vector<uint8_t>>,
    // A purge's step 5 with overwrite: mark every block that may hold the
    // namespace's rows to be zeroed before its next owner; answers the
    // blocks marked.
    caf::replies_to<purge_atom, std::string>::with<uint64_t>,
    // A session was granted a namespace: its allocations may now be charged
    // to it (block quotas).
    caf::reacts_to<grant_atom, uint64_t, SessionNamespaceGrant>>;

// The executable-reuse coordinator (0x0CD): one per node. A session's end
// while one of its batches is in flight returns every lease the batch took,
// receipts' included (the gateway tells this actor first). A purge's step 4
// asks it for the open receipts of (namespace, generation): counted
// (revoke = false) or revoked, their leases returned (revoke = true).
// A purge's step 4 and 7 (count or revoke g's receipts), and step 6 (the
// session tier's saves of g, deleted; answered with how many).
using reuse_actor = owner_interface::extend<caf::replies_to<purge_atom, std::string, uint64_t, bool>::with<uint64_t>,
                                            caf::replies_to<purge_atom, std::string, uint64_t>::with<uint64_t>>;

// hello: HelloRequest bytes -> SessionReceipt bytes without pools (the
// gateway adds them) or an ErrorMessage.
using authorization_actor =
    owner_interface::extend<caf::replies_to<hello_atom, wire_bytes>::with<wire_bytes>,
                            // 0x0CD steps 1-2 for a session (node-internal).
                            caf::replies_to<reuse_atom, uint64_t, TraceContext,
                                            std::vector<ReuseKeyRequest>>::with<std::vector<ReuseKeyAnswer>>,
                            // Where a purge's other steps go for trust domain d
                            // (sent once per domain, after its reuse coordinator
                            // is spawned).
                            caf::reacts_to<purge_atom, uint32_t, allocator_actor, reuse_actor>,
                            // A purge's own tick: step 4 counts again (purge id).
                            caf::reacts_to<purge_atom, uint64_t>>;

using mapper_actor = owner_interface::extend<
    // 0x0CD step 7 for a session's ops whose reused rows land in its request
    // slots (node-internal): each slot's published frontier, or why none.
    caf::replies_to<reuse_atom, uint64_t, TraceContext,
                    std::vector<SlotFrontierRequest>>::with<std::vector<SlotFrontierReply>>>;

using executor_actor = owner_interface::extend<
    // 0x0CD step 8 (node-internal).
    caf::replies_to<reuse_atom, TraceContext, std::vector<ReuseSnapshotRequest>>::with<std::vector<SnapshotAnswer>>>;

// A worker's session on the node: the only node actor a worker holds. It
// stamps the session id on every call (a worker cannot name another
// session) and forwards the bytes untouched to the route's owner, whose
// receipt goes straight back to the worker (CAF delegation: one hop, no
// copy). The ping route is its own echo.
using session_actor = caf::typed_actor<caf::replies_to<route_atom, uint16_t, wire_bytes>::with<wire_bytes>>;

// The node's front door, published on the middleman. hello: (HelloRequest
// bytes, the worker's anchor actor, monitored for the session's life) ->
// (SessionReceipt or ErrorMessage bytes, the session actor or an invalid
// handle). stats: a NodeStatsReceipt (every owner's OwnerStats and the
// node's own). attach: a session channel's ticket -> the session actor and
// its id, or an invalid handle for an unknown or ended ticket
// (services/session/channel_frame.hpp).
using gateway_actor =
    caf::typed_actor<caf::replies_to<hello_atom, wire_bytes, caf::actor>::with<wire_bytes, caf::actor>,
                     caf::replies_to<attach_atom, std::string>::with<caf::actor, uint64_t>,
                     // The session channel's own hello (kHelloRoute): the
                     // receipt (or refusal), the session actor (null when
                     // refused) and its id; no anchor, the connection is it.
                     caf::replies_to<channel_hello_atom, wire_bytes>::with<wire_bytes, caf::actor, uint64_t>,
                     caf::reacts_to<channel_closed_atom, uint64_t, bool>,  // session, lost (silent)
                     caf::replies_to<stats_atom, bool>::with<wire_bytes>,
                     // An echo: a closing client's last message on its
                     // connection, answered after the anchor's down message
                     // (the gateway monitors the anchor; one mailbox, in order).
                     caf::replies_to<ping_atom>::with<bool>>;

// Every type that crosses a process boundary is a CAF builtin (above), so
// nothing needs registering; the typed interfaces are checked at connect
// time by remote_actor<gateway_actor>, and a round trip of every route
// between two processes (tests/node) fails loudly if one breaks.

}  // namespace kvrt::actors

// Node-internal messages between owners of one node process: never serialized
// (they never leave the process), so CAF may carry them as plain values. The
// reuse coordinator's carry the batch's TraceContext, so each owner's slice
// for its step joins the worker's trace.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrt::BlockTableView)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::CacheKeyTag>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::AllocatorEvent>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrt::SessionNamespaceGrant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::PhysicalBlockHandle>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<std::optional<kvrt::LeaseId>>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::PrefixMatchOp>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::CandidateReply>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrt::ReuseIndexVersion)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrt::TraceContext)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::LeaseId>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReusePathLeaseRequest>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReusePathLeaseAnswer>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReuseLeaseRequest>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReuseLeaseAnswer>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReuseKeyRequest>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReuseKeyAnswer>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::ReuseSnapshotRequest>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::SnapshotAnswer>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::SlotFrontierRequest>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::SlotFrontierReply>)
