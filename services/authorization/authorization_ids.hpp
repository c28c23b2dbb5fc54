#pragma once
// Strong identifiers of the namespace / authorization owner (spec 0x0CE,
// docs/conventions.md habit 3). Every id is issued by the NamespaceAuthority, increases
// monotonically and is never reused, so a capability or hold from before a
// revocation can never name a later one.
#include "services/common/ids.hpp"

namespace kvrt {

// One configured principal (a worker's identity, authenticated by its token).
using PrincipalId = StrongId<struct PrincipalIdTag, uint64_t>;
// One configured cache namespace; dense, in configuration order.
using NamespaceId = StrongId<struct NamespaceIdTag>;
// One grant: principal x namespace x generation, until it ends.
using GrantId = StrongId<struct GrantIdTag, uint64_t>;
// One reported hold on a namespace generation (a live lease or an
// outstanding executable receipt, 0x0CE purge steps 4 and 7).
using HoldId = StrongId<struct HoldIdTag, uint64_t>;
// One namespace purge (0x0CE "Revocation And Purge").
using PurgeId = StrongId<struct PurgeIdTag, uint64_t>;
// One work item a purge asks another owner to perform.
using PurgeWorkId = StrongId<struct PurgeWorkIdTag, uint64_t>;

}  // namespace kvrt
