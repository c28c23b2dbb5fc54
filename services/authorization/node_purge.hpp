#pragma once
// NodePurge: the purge route's run across a live node's owners (spec 0x0CE
// "Revocation And Purge"), as a sans-IO state machine. The authorization
// actor holds one per purge in progress, performs each action it asks for
// and hands back the answer; the sequence lives here, where a test can
// drive it without actors.
//
//   step 1-2  authorization  begin: g stops admitting, g+1 becomes current,
//                            g's grants end (AuthorizationService::begin_purge)
//   step 3    index owner    PurgeIndexAdvance: refuse g's grants, drop g's
//                            candidates; the radix index gives back g's pages
//   step 4    reuse          PurgeReceiptCount: g's open executable-reuse
//                            receipts, counted until none is left or the
//                            deadline passed (PurgeWait between counts), then
//                            revoked (their leases go back)
//   step 5    allocator      PurgeBlockOverwrite (overwrite mode only): every
//                            block that may hold the namespace's rows (its
//                            requests took a reference to it since it was
//                            last marked) is zeroed before its next owner
//   step 6    reuse          PurgeTierRetire: the session tier's saves of g
//                            (0x0CC, a node with [tier]) are deleted; 0 without one
//   step 7    reuse          revoke any receipt of g that appeared meanwhile
//                            (an attempt already past its version check when
//                            g+1 became current);
//             index owner    PurgeIndexAdvance again: the radix index evicts
//                            the pages of g the revoked receipts had locked;
//                            then complete
//
// Each step's record carries its time since the start and its counts; the
// authority's own step receipts (work items issued, acknowledged) are what
// keeps the order. Times come from the caller, so the run is deterministic.
//
// A run that stopped (an owner unreachable, or a fault point "after_<step>"
// of AuthorizationService::purge_faults fired) leaves the purge open at its
// last step, every work item of it acknowledged: the authority's state is
// that of a purge between two steps, which validate() accepts. The next
// purge call for the namespace resumes it from there, with the purge's own
// cause, successor and overwrite mode (the call's deadline applies).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "schema/authorization_types.hpp"
#include "services/authorization/authorization_service.hpp"

namespace kvrt {

struct PurgeIndexAdvance {
  std::string namespace_name;
  NamespaceGeneration successor;
};
struct PurgeReceiptCount {
  std::string namespace_name;
  NamespaceGeneration generation;
  bool revoke = false;
};
struct PurgeBlockOverwrite {
  std::string namespace_name;  // the allocator marks the blocks that may hold its rows
};
struct PurgeWait {
  uint32_t ms = 0;
};
struct PurgeTierRetire {
  std::string namespace_name;
  NamespaceGeneration generation;  // saves of this generation and older go
};
using NodePurgeAction =
    std::variant<PurgeIndexAdvance, PurgeReceiptCount, PurgeBlockOverwrite, PurgeWait, PurgeTierRetire>;

class NodePurge {
 public:
  // How often step 4 counts g's receipts while it waits.
  static constexpr uint32_t kPollMs = 2;

  // Steps 1-2 on the service; errors (not an admin, unknown namespace, a
  // purge already open, a successor the cause does not allow) change nothing.
  // An open purge of the namespace is resumed when `in_progress` says no
  // run is carrying it out (without it, an open purge refuses the call:
  // authorization_purge_pending).
  static Result<NodePurge> begin(AuthorizationService& service, SessionId session, const NamespacePurgeRequest& request,
                                 uint64_t now_us, const std::function<bool(PurgeId)>& in_progress = {});

  // The action to perform next; nullopt once finished (then result()).
  const std::optional<NodePurgeAction>& next() const { return next_; }
  // The answer to next(): a count (pages, receipts, blocks; 0 for a wait).
  void answer(uint64_t count, uint64_t now_us);
  // The owner asked could not be reached: the purge stops here, open.
  void failed(Error error, uint64_t now_us);

  bool finished() const { return !next_.has_value(); }
  PurgeId id() const { return purge_; }
  Result<NamespacePurgeReceipt> result() const;

 private:
  enum class Phase : uint8_t { index, drain, revoke, overwrite, external, confirm, final_drop, done };
  NodePurge(AuthorizationService& service, const NamespacePurgeRequest& request, uint64_t now_us)
      : service_(&service), request_(request), start_us_(now_us) {}
  void record(PurgeStep step, uint64_t now_us, uint32_t work_items, uint64_t live_receipts, uint64_t count,
              std::string detail);
  // Advances the authority to `step` and acknowledges what it issued; false
  // (and the run failed) if the authority refused.
  bool authority_step(PurgeStep step, uint64_t now_us, uint64_t live_receipts, uint64_t count, std::string detail);
  void fail(Error e, uint64_t now_us);
  void finish_drain(uint64_t now_us);
  void start_release(uint64_t now_us);
  void after_release(uint64_t now_us);
  // The fault point after `step`, when armed and reached: the run stops.
  bool fault_fired(PurgeStep step, uint64_t now_us);
  // A run of the open purge `id`, its facts read from the authority.
  static NodePurge at_progress(AuthorizationService& service, const NamespacePurgeRequest& request, PurgeId id,
                               uint64_t now_us);
  static Result<NodePurge> resume(AuthorizationService& service, const NamespacePurgeRequest& request, PurgeId id,
                                  uint64_t now_us);

  AuthorizationService* service_;
  NamespacePurgeRequest request_;
  uint64_t start_us_ = 0;
  PurgeId purge_;
  NamespaceGeneration g_, successor_;
  Phase phase_ = Phase::index;
  std::optional<NodePurgeAction> next_;
  std::optional<uint64_t> first_count_;  // g's receipts when step 4 first counted
  uint64_t receipts_now_ = 0;
  uint64_t revoked_at_completion_ = 0;
  NamespacePurgeReceipt receipt_;
  std::optional<Error> error_;
};

}  // namespace kvrt
