#pragma once
// What each node owner answers the reuse coordinator for its steps of the
// executable-reuse transaction (spec 0x0CD; services/reuse/reuse_batch_run.hpp).
// Node-internal values: they never leave the node process.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/ids.hpp"
#include "services/reuse/reuse_evidence.hpp"

namespace kvrt {

// Steps 1-2, the authorization owner: is the session's grant for the
// namespace still good, and the request's key (its compatibility manifest)
// built from the granted generation's facts. `key` is set only when
// `authorization` is an AuthorizedLookup.
struct ReuseKeyRequest {
  std::string namespace_name;
  std::vector<TokenId> tokens;
};
struct ReuseKeyAnswer {
  AuthorizationAnswer authorization;
  std::optional<KeyEvidence> key;
};

// Step 3, the index owner: a candidate or a miss, or the typed error that
// refused the lookup itself (authorization at the index, a malformed op).
using CandidateReply = std::variant<Error, CandidateAnswer>;

// Steps 4-5, the allocator owner: the leases on every candidate handle, all
// or none, and under them the pools' current generations and the rows the
// blocks hold. The index and tree versions of step 5 are the index owner's
// (ReuseIndexVersion).
struct ReuseLeaseRequest {
  std::vector<PhysicalBlockHandle> handles;  // bundle-major: bundle i holds one handle per cache group
  uint32_t bundles = 0;                      // handles.size() / cache groups
};
struct ReuseLeaseAnswer {
  LeaseAnswer lease;
  std::vector<PoolGenerationRef> pool_generations;  // current g_pool of every pool the handles name
  uint32_t valid_frontier_tokens = 0;               // rows [0, f) valid in every group, bundle by bundle [tokens]
};

// Step 4, the radix index owner: a lock reference on the candidate's path
// (0x08D), named by a path lease, so the path is never evicted while the
// receipt is in use. The path must still be the one the lookup read.
struct ReusePathLeaseRequest {
  std::vector<RadixNodeId> path;  // root -> terminal, as the candidate named it
};
struct ReusePathLeaseAnswer {
  std::optional<LeaseId> lease;  // set when granted (owner: LeaseOwner::radix_index)
  std::string refusal;           // why not, when not
};

// Step 5, the index owner: its versions as they stand now, read after the
// leases were taken.
struct ReuseIndexVersion {
  uint64_t index_version = 0;
  TreeVersion tree_version;
  uint64_t publication_generation = 0;  // the index's publication clock (step 10's successor check)
};

// Step 7, the mapper owner, for an op whose rows land in a request slot
// (ReuseAcquireOp.await_slot_mapping, virtual reservations 0x06): the
// published frontier of the slot the session bound under `request`, read
// after every step the owner applied before this message (map before use,
// 0x06D). An error when the request is not the session's bound request.
struct SlotFrontierRequest {
  RequestId request;
  uint32_t required_tokens = 0;  // f_required: the reused rows [tokens]
};
using SlotFrontierReply = std::variant<Error, uint32_t>;  // f_ready [tokens], or why none

// Step 8, the executor owner: freeze the snapshot a reuse reads.
struct ReuseSnapshotRequest {
  std::vector<PhysicalBlockHandle> handles;
  TokenInterval interval;
  std::string planned_kernel_abi_id;  // the ABI the consumer's key names
};

}  // namespace kvrt
