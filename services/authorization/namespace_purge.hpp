#pragma once
// The strict namespace revocation protocol of spec 0x0CE ("Revocation And
// Purge") as explicit steps with a receipt each. A purge is not "delete the
// hash-table entry":
//
//   1. stop admitting requests to namespace generation g
//        -> authorize/check/record_hold answer authorization_namespace_closed
//   2. advance the authorized namespace generation to g+1
//        -> CacheNamespaceRegistry::invalidate; every grant of g ends, g+1 admits
//   3. invalidate index candidates from g
//        -> one drop_index_entries work item per index owner, acknowledged
//   4. wait for or cancel live leases from g
//        -> cancel_lease work items (cancel mode), completed by release_hold
//   5. release or overwrite physical objects according to the threat model
//        -> release_physical_objects work items, acknowledged
//   6. remove external-tier copies through the M5.5 directory
//        -> remove_external_copies work items (none when no tier holds copies)
//   7. emit completion only when no executable receipt from g remains
//
// NamespaceAuthority::advance_purge performs the next step only when the
// previous one has finished (its work items acknowledged, its holds gone);
// otherwise it answers authorization_purge_pending naming what is outstanding
// and changes nothing.
//
// The registry's reclamation records (NamespaceAuthority::drain_reclamations)
// say only that no hold references generation g any more; during a purge they
// may appear as early as step 2. The order of 0x0CE comes from the work items:
// the allocator releases g's objects on the step-5 item, after the index
// owners dropped g's candidates (step 3) and g's leases drained (step 4).
//
// Zeroing versus overwriting is the threat model's choice; the mandatory part
// (0x0CE) is that stale bytes never become visible to a new owner merely
// because an id was recycled.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/authorization/authorization_ids.hpp"
#include "services/identity/invalidation.hpp"

namespace kvrt {

enum class PurgeStep : uint8_t {
  stop_admitting = 1,
  advance_generation = 2,
  invalidate_index = 3,
  drain_leases = 4,
  release_physical = 5,
  remove_external_copies = 6,
  complete = 7,
};
std::string_view to_string(PurgeStep s);

enum class PurgeWorkKind : uint8_t {
  drop_index_entries = 0,        // step 3: an index owner drops every candidate of g
  cancel_lease = 1,              // step 4: the lease's owner cancels it; done when its hold is released
  release_physical_objects = 2,  // step 5: the allocator/mapper releases (or overwrites) g's objects
  remove_external_copies = 3,    // step 6: the M5.5 directory removes g's external-tier copies
};
std::string_view to_string(PurgeWorkKind k);

// What step 5 does with g's physical bytes (0x0CE: "according to the threat model").
enum class PhysicalReleaseMode : uint8_t {
  release = 0,    // return to the free pool; the valid-row frontier hides old rows
  overwrite = 1,  // zero or overwrite the bytes before they can be recycled
};
std::string_view to_string(PhysicalReleaseMode m);

struct PurgeRequest {
  // The successor generation's facts (0x01A "Invalidation Produces A
  // Successor Namespace"): checked by check_invalidation at step 2.
  InvalidationCause cause = InvalidationCause::weights;
  GenerationFacts successor;
  std::vector<std::string> index_owners{"prefix_index", "radix_index"};  // step 3, one item each
  bool cancel_live_leases = false;                                       // step 4: cancel, or wait
  std::vector<std::string> physical_owners{"allocator"};                 // step 5, one item each
  PhysicalReleaseMode physical_mode = PhysicalReleaseMode::release;
  std::vector<std::string> external_tiers;  // step 6, one item each
};

struct PurgeWorkItem {
  PurgeWorkId id;
  PurgeWorkKind kind = PurgeWorkKind::drop_index_entries;
  std::string owner;  // the owner that must act ("prefix_index", "allocator", ...)
  std::string namespace_name;
  NamespaceGeneration generation;                                    // g: the purged generation
  std::optional<HoldId> hold;                                        // cancel_lease: the lease's hold
  uint64_t subject = 0;                                              // cancel_lease: the caller's lease id value
  PhysicalReleaseMode physical_mode = PhysicalReleaseMode::release;  // release_physical_objects only

  friend bool operator==(const PurgeWorkItem&, const PurgeWorkItem&) = default;
};

// Immutable record of one performed step (docs/conventions.md habit 5).
struct PurgeStepReceipt {
  PurgeId purge;
  PurgeStep step = PurgeStep::stop_admitting;
  std::string namespace_name;
  NamespaceGeneration purged_generation;            // g
  NamespaceGeneration successor_generation;         // g+1 from step 2 on; 0 at step 1
  std::vector<PurgeWorkItem> work_items;            // issued by this step
  uint64_t live_leases = 0;                         // lease holds of g when the step ran [holds]
  uint64_t live_receipts = 0;                       // executable-receipt holds of g when the step ran [holds]
  std::optional<InvalidationReceipt> invalidation;  // step 2 only

  friend bool operator==(const PurgeStepReceipt&, const PurgeStepReceipt&) = default;
};

// Progress of one purge, held by the authority.
struct PurgeProgress {
  PurgeId id;
  std::string namespace_name;
  NamespaceGeneration purged_generation;
  NamespaceGeneration successor_generation;  // 0 until step 2
  PurgeRequest request;
  PurgeStep last_step = PurgeStep::stop_admitting;  // the last step performed
  std::vector<PurgeWorkItem> pending;               // acknowledgeable items not yet acknowledged
  std::vector<PurgeStepReceipt> receipts;           // one per performed step, in order

  bool completed() const { return last_step == PurgeStep::complete; }
};

}  // namespace kvrt
