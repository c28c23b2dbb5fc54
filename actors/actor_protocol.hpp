#pragma once
// The messaging interface of every owner actor (issue 5): atoms, the typed
// actor handles, and the one function that registers every message type.
// Include only from actors/*.cpp: it pulls in CAF (STACK.md build cost).
//
// Everything a worker sends or receives is Cap'n Proto bytes (wire_bytes,
// the generated schema/<owner>_codec.hpp) carried as std::vector<char>, a CAF builtin, so no
// per-type serializer can silently drop a field across processes (STACK.md).
// Handles (caf::actor) travel as CAF's own builtin type.
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdint>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/executor/executor_service.hpp"
#include "services/mapper/mapper_service.hpp"
#include "services/prefix/prefix_service.hpp"
#include "services/prefix/publication_target.hpp"
#include "services/reuse/reuse_step_answers.hpp"

namespace kvrt::actors {

using wire_bytes = std::vector<char>;

// Atoms (at most 10 characters, CAF 0.17).
using batch_atom = caf::atom_constant<caf::atom("batch")>;          // an owner batch
using stats_atom = caf::atom_constant<caf::atom("stats")>;          // owner gauges
using end_atom = caf::atom_constant<caf::atom("sessend")>;          // a session ended
using tags_atom = caf::atom_constant<caf::atom("tags")>;            // weak-identity tags (prefix -> allocator)
using events_atom = caf::atom_constant<caf::atom("events")>;        // allocator events (allocator -> prefix)
using grant_atom = caf::atom_constant<caf::atom("grant")>;          // a namespace grant (authorization -> indexes)
using hello_atom = caf::atom_constant<caf::atom("hello")>;          // a worker opens a session
using authorize_atom = caf::atom_constant<caf::atom("authorize")>;  // a namespace grant request
using alloc_atom = caf::atom_constant<caf::atom("alloc")>;          // route to the allocator
using prefix_atom = caf::atom_constant<caf::atom("prefix")>;        // route to the prefix index
using ping_atom = caf::atom_constant<caf::atom("ping")>;
using mapper_atom = caf::atom_constant<caf::atom("mapper")>;  // route to the mapper
using exec_atom = caf::atom_constant<caf::atom("exec")>;  // route to the kernel executor            // transport round
                                                          // trip (bench rpc)
using table_atom = caf::atom_constant<caf::atom("table")>;      // read a request table (node-internal)
using lease_atom = caf::atom_constant<caf::atom("lease")>;      // node leases for cached pages (radix -> allocator)
using unlease_atom = caf::atom_constant<caf::atom("unlease")>;  // release node leases (radix -> allocator)
using pressure_atom =
    caf::atom_constant<caf::atom("pressure")>;                  // requests are stuck for capacity (allocator -> index)
using reuse_atom = caf::atom_constant<caf::atom("reuse")>;      // executable-reuse transaction (0x0CD) steps
using version_atom = caf::atom_constant<caf::atom("version")>;  // an index's current versions (0x0CD step 5)
using attach_atom = caf::atom_constant<caf::atom("attach")>;    // bind a session channel to its session

// Prefix-index owner.
using prefix_actor = caf::typed_actor<
    caf::replies_to<batch_atom, uint64_t, wire_bytes>::with<wire_bytes>,
    caf::reacts_to<events_atom, std::vector<AllocatorEvent>>,
    // Work keeps being refused for capacity with nothing released in between:
    // about this many blocks per group are missing. An index that holds
    // blocks (the radix) gives some back.
    caf::reacts_to<pressure_atom, uint32_t>, caf::reacts_to<grant_atom, uint64_t, SessionNamespaceGrant>,
    caf::replies_to<stats_atom>::with<wire_bytes>, caf::reacts_to<end_atom, uint64_t>,
    // 0x0CD, node-internal: step 3 (session, lookups), step 4's path leases
    // (radix), step 5 (versions), and the release of path leases (one flag
    // per lease: released or not held by the session).
    caf::replies_to<reuse_atom, uint64_t, TraceContext, std::vector<PrefixMatchOp>>::with<std::vector<CandidateReply>>,
    caf::replies_to<reuse_atom, uint64_t, TraceContext,
                    std::vector<ReusePathLeaseRequest>>::with<std::vector<ReusePathLeaseAnswer>>,
    caf::replies_to<version_atom, TraceContext>::with<ReuseIndexVersion>,
    caf::replies_to<unlease_atom, uint64_t, TraceContext, std::vector<LeaseId>>::with<std::vector<uint8_t>>>;

// Allocator owner. batch: (session, AllocatorBatch bytes) -> AllocatorBatchReceipt bytes.
using allocator_actor = caf::typed_actor<
    caf::replies_to<batch_atom, uint64_t, wire_bytes>::with<wire_bytes>,
    caf::replies_to<table_atom, uint64_t, uint64_t>::with<BlockTableView>,
    caf::replies_to<tags_atom, std::vector<CacheKeyTag>>::with<std::vector<uint8_t>>,
    caf::replies_to<stats_atom>::with<wire_bytes>, caf::reacts_to<end_atom, uint64_t>,
    caf::reacts_to<events_atom, prefix_actor>,  // where allocator events go
    caf::replies_to<lease_atom, std::vector<PhysicalBlockHandle>>::with<std::vector<uint64_t>>,
    caf::reacts_to<unlease_atom, std::vector<uint64_t>>,
    // 0x0CD steps 4-5 for a session (node-internal), and the release of a
    // session's leases (step 10, or attempts that ended without a receipt):
    // one flag per lease, released or not held by the session.
    caf::replies_to<reuse_atom, uint64_t, TraceContext,
                    std::vector<ReuseLeaseRequest>>::with<std::vector<ReuseLeaseAnswer>>,
    caf::replies_to<unlease_atom, uint64_t, TraceContext, std::vector<LeaseId>>::with<std::vector<uint8_t>>>;

// Namespace / authorization owner. hello: HelloRequest bytes -> SessionReceipt
// bytes without pools (the gateway adds them) or an ErrorMessage.
using authorization_actor =
    caf::typed_actor<caf::replies_to<hello_atom, wire_bytes>::with<wire_bytes>,
                     caf::replies_to<authorize_atom, uint64_t, wire_bytes>::with<wire_bytes>,
                     caf::replies_to<stats_atom>::with<wire_bytes>, caf::reacts_to<end_atom, uint64_t>,
                     // 0x0CD steps 1-2 for a session (node-internal).
                     caf::replies_to<reuse_atom, uint64_t, TraceContext,
                                     std::vector<ReuseKeyRequest>>::with<std::vector<ReuseKeyAnswer>>>;

// The mapper owner (issue 6): batches of MapperOps per session; a session's
// end frees its slots as retained capacity.
using mapper_actor =
    caf::typed_actor<caf::replies_to<batch_atom, uint64_t, wire_bytes>::with<wire_bytes>,
                     caf::replies_to<stats_atom>::with<wire_bytes>, caf::reacts_to<end_atom, uint64_t>>;

// The kernel executor owner: batches of decode attention over the node's
// pools, each op's table read from the allocator under the session.
using executor_actor = caf::typed_actor<
    caf::replies_to<batch_atom, uint64_t, wire_bytes>::with<wire_bytes>, caf::replies_to<stats_atom>::with<wire_bytes>,
    // 0x0CD step 8 (node-internal).
    caf::replies_to<reuse_atom, TraceContext, std::vector<ReuseSnapshotRequest>>::with<std::vector<SnapshotAnswer>>>;

// The executable-reuse coordinator (0x0CD): one per node. batch: (session,
// ReuseBatch bytes) -> ReuseBatchReceipt bytes, after one message per owner
// per step (services/reuse/reuse_batch_run.hpp).
// end: the session is gone; a batch of it still in flight returns every
// lease it took, receipts' included (the gateway tells this actor first).
using reuse_actor = caf::typed_actor<caf::replies_to<batch_atom, uint64_t, wire_bytes>::with<wire_bytes>,
                                     caf::replies_to<stats_atom>::with<wire_bytes>, caf::reacts_to<end_atom, uint64_t>>;

// A worker's session on the node: the only node actor a worker holds. It
// stamps the session id on every call (a worker cannot name another session)
// and forwards the bytes untouched to the owner, whose receipt goes straight
// back to the worker (CAF delegation: one hop, no copy).
using session_actor = caf::typed_actor<caf::replies_to<alloc_atom, wire_bytes>::with<wire_bytes>,
                                       caf::replies_to<prefix_atom, wire_bytes>::with<wire_bytes>,
                                       caf::replies_to<authorize_atom, wire_bytes>::with<wire_bytes>,
                                       caf::replies_to<mapper_atom, wire_bytes>::with<wire_bytes>,
                                       caf::replies_to<exec_atom, wire_bytes>::with<wire_bytes>,
                                       caf::replies_to<reuse_atom, wire_bytes>::with<wire_bytes>,
                                       caf::replies_to<ping_atom, wire_bytes>::with<wire_bytes>>;

// The node's front door, published on the middleman. hello: (HelloRequest
// bytes, the worker's anchor actor, monitored for the session's life) ->
// (SessionReceipt or ErrorMessage bytes, the session actor or an invalid
// handle). stats: the owners' OwnerStats bytes (allocator, prefix index,
// authorization, mapper, executor, node); a node that serves no mapper sends
// empty bytes in its place. attach: a session channel's ticket -> the
// session actor and its id, or an invalid handle for an unknown or ended
// ticket (services/session/channel_frame.hpp).
using gateway_actor = caf::typed_actor<
    caf::replies_to<hello_atom, wire_bytes, caf::actor>::with<wire_bytes, caf::actor>,
    caf::replies_to<attach_atom, std::string>::with<caf::actor, uint64_t>,
    caf::replies_to<stats_atom>::with<wire_bytes, wire_bytes, wire_bytes, wire_bytes, wire_bytes, wire_bytes>>;

// Registers every type that crosses a process boundary; call in every
// process, node and worker alike, before the actor system starts.
void add_message_types(caf::actor_system_config& cfg);

}  // namespace kvrt::actors

// Node-internal messages between owners of one node process: never serialized
// (the reuse coordinator's carry the batch's TraceContext, so each owner's
// slice for its step joins the worker's trace)
// (they never leave the process), so CAF may carry them as plain values.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrt::BlockTableView)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::CacheKeyTag>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::AllocatorEvent>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrt::SessionNamespaceGrant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrt::PhysicalBlockHandle>)
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
