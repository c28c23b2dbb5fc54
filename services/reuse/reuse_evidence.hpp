#pragma once
// The evidence of one executable-reuse attempt (spec 0x0CD): for each step of
// the checked transaction order, a value type holding what the owner of that
// step answered, and the accumulated evidence tuple
//
//   E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec)
//
// whose coordinates live in different owners and must stay mutually
// consistent. The node's reuse coordinator turns each owner's answer into one
// of these values; ReuseAttempt (reuse_attempt.hpp) checks it.
//
// Digest conventions shared with the index owners (so a candidate's digests
// can be compared with the consumer's):
//   d_sem    = reuse_semantic_digest(manifest): the generation-level
//              equality-bearing facts of 0x01A (ABI, model generation,
//              adapter, transform, position contract, namespace, namespace
//              generation, salt). The covered tokens are not in it: a prefix
//              candidate covers fewer tokens than the consumer, and the
//              tokens are proven by the concrete key and the collision
//              witness instead. 0x0CB calls this A, 0x0CC the "model/cache
//              semantic digest".
//   d_layout = manifest.cache_layout_sha256 (CacheLayoutManifest::digest()).
//   witness  = covered_tokens_digest(tokens of the covered interval), the
//              exact-token witness of 0x07F and SessionReuseReceipt.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "schema/reuse_types.hpp"
#include "services/authorization/namespace_grant.hpp"
#include "services/common/digest.hpp"
#include "services/common/error.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"
#include "services/identity/compatibility_manifest_builder.hpp"
#include "services/reuse/reuse_step.hpp"

namespace kvrt {

Sha256Digest reuse_semantic_digest(const CacheCompatibilityManifest& m);
// The same digest from the facts a manifest copies them from (the layout, the
// artifact, the namespace generation): what every manifest built under that
// generation carries, whatever its tokens. An index owner records it per
// publication so a candidate names its producer's d_sem.
Sha256Digest reuse_semantic_digest(const CacheLayoutManifest& layout, const ArtifactIdentity& artifact,
                                   const CacheIsolationNamespace& ns);
Sha256Digest covered_tokens_digest(std::span<const uint32_t> token_ids);

// --- step 1: the namespace owner's answer ---------------------------------
struct AuthorizationDenied {
  Error error;  // an authorization_* error from NamespaceAuthority
};
using AuthorizationAnswer = std::variant<AuthorizedLookup, AuthorizationDenied>;

// --- step 2: the key the request built --------------------------------------
struct KeyEvidence {
  CacheCompatibilityManifest manifest;  // the consumer's manifest for the whole request
};

// --- step 3: the index owner's answer -----------------------------------------
struct IndexMiss {};
struct ReuseCandidate {
  ReuseSource source = ReuseSource::prefix_index;
  std::string namespace_name;
  NamespaceGeneration namespace_generation;  // the generation the entry was published under
  Sha256Digest semantic_digest;              // d_sem of the producer
  Sha256Digest layout_digest;                // d_layout of the stored bytes
  uint64_t index_version = 0;                // v_index the lookup read
  TreeVersion tree_version;                  // v_tree the lookup read (0 if not radix)
  TokenInterval covered_interval;            // request positions the candidate covers [tokens]
  std::vector<PhysicalBlockHandle> physical_handles;
  std::vector<RadixNodeId> path_node_ids;           // radix candidates only
  std::vector<PoolGenerationRef> pool_generations;  // one per pool of physical_handles
  std::optional<Sha256Digest> token_witness;        // covered_tokens_digest of the stored tokens
};
using CandidateAnswer = std::variant<IndexMiss, ReuseCandidate>;

// --- step 4: the allocator's / index's lease answer --------------------------
struct LeaseRefused {
  std::string reason;
};
struct LeaseGrant {
  std::vector<LeaseId> leases;
  std::vector<PhysicalBlockHandle> covered_handles;
  std::vector<RadixNodeId> covered_path_nodes;
};
using LeaseAnswer = std::variant<LeaseRefused, LeaseGrant>;

// --- step 5: versions read under the leases -----------------------------------
struct VersionAnswer {
  uint64_t index_version = 0;                       // current v_index
  TreeVersion tree_version;                         // current v_tree
  std::vector<PoolGenerationRef> pool_generations;  // current g_pool of every candidate pool
  uint32_t valid_frontier_tokens = 0;               // rows [0, f) of the candidate's blocks are valid [tokens]
  // The index's publication clock now: a successor published at step 10
  // must carry a later one (it became visible after what this attempt read).
  uint64_t publication_generation = 0;
};

// --- step 6: declared-module positions or session interval -------------------
struct PositionsNotApplicable {};  // prefix- and radix-index candidates
struct ModulePositionAnswer {
  PromptModuleReceipt module;  // the module cache's receipt
  std::string schema_id;       // the consumer's schema, as parsed
  uint64_t schema_generation = 0;
  std::vector<uint32_t> declared_position_ids;  // schema.positions_for(parameters) [positions]
};
struct SessionIntervalAnswer {
  SessionReuseReceipt session;               // M5.3's identity receipt of the history
  std::string position_truncation_contract;  // the consumer's contract
};
using PositionAnswer = std::variant<PositionsNotApplicable, ModulePositionAnswer, SessionIntervalAnswer>;

// --- step 7: the mapper's answer ------------------------------------------------
struct MappingAnswer {
  uint32_t required_frontier_tokens = 0;  // f_required: rows the kernel dereferences [tokens]
  uint32_t ready_frontier_tokens = 0;     // f_ready: rows mapped and ready [tokens]
};

// --- step 8: the executor's frozen snapshot --------------------------------------
struct SnapshotAnswer {
  ExecutionSnapshotVersion frozen_version;   // the snapshot the executor froze
  ExecutionSnapshotVersion planned_version;  // the snapshot the batch plan was built against
  std::string kernel_abi_id;                 // kernel ABI frozen with the snapshot
  std::string planned_kernel_abi_id;
  std::vector<PhysicalBlockHandle> bound_handles;  // the handles the snapshot reads
  TokenInterval bound_interval;                    // the reused rows it reads [tokens]
};

// --- step 9: the executor's result --------------------------------------------------
struct ExecutionAnswer {
  ExecutionSnapshotVersion executed_version;
  bool succeeded = false;
};

// --- step 10: release, or publish one complete COW successor -------------------------
struct LeasesReleased {
  std::vector<LeaseId> released;
};
struct SuccessorPublished {
  std::vector<LeaseId> released;
  uint64_t published_index_version = 0;  // the index's publication generation that made the successor visible
  TokenInterval published_interval;      // rows the successor covers [tokens]
  bool all_groups_published = false;     // every cache group's part, in one publication
};
using CompletionAnswer = std::variant<LeasesReleased, SuccessorPublished>;

// One message's evidence; alternative i is step i+1.
using StepEvidence = std::variant<AuthorizationAnswer, KeyEvidence, CandidateAnswer, LeaseAnswer, VersionAnswer,
                                  PositionAnswer, MappingAnswer, SnapshotAnswer, ExecutionAnswer, CompletionAnswer>;
inline ReuseStep step_of(const StepEvidence& e) { return static_cast<ReuseStep>(e.index() + 1); }

// E of 0x0CD, filled as the steps that own each coordinate pass.
struct EvidenceTuple {
  std::optional<NamespaceGeneration> namespace_generation;             // g_ns   (step 1)
  std::optional<Sha256Digest> semantic_digest;                         // d_sem  (step 2)
  std::optional<Sha256Digest> layout_digest;                           // d_layout (step 2)
  std::optional<uint64_t> index_version;                               // v_index (step 3, confirmed at 5)
  std::optional<TreeVersion> tree_version;                             // v_tree  (step 3, confirmed at 5)
  std::vector<PoolGenerationRef> pool_generations;                     // g_pool  (step 3, confirmed at 5)
  std::optional<uint32_t> ready_frontier_tokens;                       // f_map   (step 7) [tokens]
  std::optional<ExecutionSnapshotVersion> execution_snapshot_version;  // v_exec (step 8)

  friend bool operator==(const EvidenceTuple&, const EvidenceTuple&) = default;
};

}  // namespace kvrt
