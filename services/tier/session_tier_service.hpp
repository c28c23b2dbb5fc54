#pragma once
// SessionTierService: the session tier as the node serves it (the
// session_save and session_resume routes, answered by the reuse owner).
// The identity a history is saved and checked under is the node's, never
// the worker's word: from the reuse owner's authorization of the session
// (steps 1-2 of 0x0CD: the grant and the namespace generation's
// compatibility manifest) and the request's identity extras.
//
//   tenant     the session's principal
//   namespace  the grant's name and generation
//   semantic   the manifest's semantic digest bound with the identity
//              extras (an adapter changes it)
//   layout     the manifest's layout digest (a quantizer changes it)
//   contract   the request's position contract ("absolute" when empty)
#include <cstdint>
#include <memory>
#include <string>

#include "schema/reuse_types.hpp"
#include "schema/session_types.hpp"
#include "services/reuse/reuse_step_answers.hpp"
#include "services/tier/session_tier.hpp"

namespace kvrt {

class SessionTierService {
 public:
  // group_row_bytes: B_row,g of the node's layout, per cache group: a save
  // must hold exactly H such rows per group.
  static Result<std::unique_ptr<SessionTierService>> open(const SessionTierConfig& config,
                                                          std::vector<uint64_t> group_row_bytes);

  // What the reuse owner asks the authorization owner before a save or a
  // resume: the namespace and the tokens the manifest covers.
  static ReuseKeyRequest key_request(const SessionSaveRequest& r);
  static ReuseKeyRequest key_request(const SessionResumeRequest& r);

  // Errors: the authorization's (a namespace not granted, a stale grant),
  // invalid_argument ("group_rows": not one group of H rows of B_row,g bytes
  // per cache group of the node's layout), the tier's (one larger than the
  // budget, io).
  Result<SessionSaveReceipt> save(const ReuseKeyAnswer& key, const SessionSaveRequest& r);
  // A refusal is a receipt, not an error (the turn recomputes); errors as save's.
  Result<SessionResumeReceipt> resume(const ReuseKeyAnswer& key, const SessionResumeRequest& r);
  // A purge of (namespace, generation g): saves under g or older go.
  uint64_t retire(const std::string& namespace_id, NamespaceGeneration purged);

  // "tier_*" values of the reuse owner's statistics.
  void put_stats(OwnerStats& out) const;
  Status validate() const { return tier_.validate(); }

 private:
  SessionTierService(SessionTier tier, std::vector<uint64_t> group_row_bytes)
      : tier_(std::move(tier)), group_row_bytes_(std::move(group_row_bytes)) {}
  Result<SessionHistoryIdentity> identity_for(const ReuseKeyAnswer& key, const std::string& label,
                                              const RequestIdentity& extras, const std::string& contract) const;
  SessionTier tier_;
  std::vector<uint64_t> group_row_bytes_;
};

}  // namespace kvrt
