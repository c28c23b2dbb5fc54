#pragma once
// BlockQuotaGate: the question the allocator core asks before a transaction
// makes a request hold more blocks, so that a quota refusal comes after every
// typed error of the transaction (bad input is refused as bad input) and
// before its capacity check, and changes nothing: like running out of
// capacity, it is an outcome (AllocationOutcome::quota_exceeded), not an
// error.
//
// The core knows which blocks a transaction takes and which it lets go; who
// the request belongs to, and what that owner may hold, is the caller's
// (NamespaceQuotas). The core asks only where a transaction may hold more:
// allocate (fresh bundles and prefix-hit bundles), append on the new-bundle
// and copy-on-write paths (0x04E), and touch. Fork, commit, truncate and
// release never add a block the request's namespace does not already hold.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "schema/common_types.hpp"

namespace kvrt {

// What one transaction would change in the blocks its request references.
struct QuotaCharge {
  uint32_t fresh_bundles = 0;  // bundles taken from the pools (one block per cache group)
  // Existing bundles the request starts to reference, bundle-major with
  // `groups` handles per bundle (a prefix hit, a touch): they count for the
  // request's owner only where it does not hold them already.
  std::span<const PhysicalBlockHandle> referenced;
  uint32_t groups = 1;
  // An existing bundle the request stops referencing in the same
  // transaction (the copy-on-write source, 0x05C step 9), by its first
  // group's handle.
  std::optional<PhysicalBlockHandle> dropped;
};

class BlockQuotaGate {
 public:
  virtual ~BlockQuotaGate() = default;
  // nullopt: admitted. Otherwise the refusal, which the receipt carries as
  // its reason (which quota, what its owner holds and would need).
  virtual std::optional<std::string> refuse(const QuotaCharge& charge) const = 0;
};

}  // namespace kvrt
