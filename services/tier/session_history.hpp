#pragma once
// What the session tier (spec 0x0CC) saves and what it checks on resume.
//
// CachedAttention's observation: a multi-turn session that goes inactive
// loses its historical K/V [0, H), and the next turn recomputes it. The
// tier keeps that history out of the primary pools, keyed by the session's
// full identity, so that the next turn prefills only [H, H + U). A matching
// session id is one field of that identity, never enough on its own: an
// adapter, weights, position-contract, quantizer or namespace change, or an
// incomplete save, is a compatibility failure and the turn recomputes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schema/reuse_types.hpp"
#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/receipt_ids.hpp"
#include "services/telemetry/reuse_rejection.hpp"

namespace kvrt {

// The identity a saved history is valid under (0x0CC SessionReuseReceipt).
struct SessionHistoryIdentity {
  std::string session_id;  // the engine's conversation id, authorized with the tenant
  std::string tenant_id;   // the principal's tenant
  std::string namespace_id;
  NamespaceGeneration namespace_generation;  // a rotation (weights update, purge) moves it
  Sha256Digest semantic_digest;              // model, weights, adapter: what the rows mean
  Sha256Digest layout_digest;                // dtype, quantizer, layout: how they are stored
  std::string position_truncation_contract;  // how positions were assigned (no truncation, window, ...)
  friend bool operator==(const SessionHistoryIdentity&, const SessionHistoryIdentity&) = default;
};

// A history to demote: rows [0, H) of every cache group in canonical row
// order (K then V, B_row,g bytes each), with the tokens they were computed from.
struct SessionHistory {
  SessionHistoryIdentity identity;
  std::vector<TokenId> tokens;                   // [0, H)
  std::vector<std::vector<uint8_t>> group_rows;  // per cache group: H * B_row,g bytes
};

// Why a resume found nothing it may use: SessionTierRefusal of
// schema/reuse.capnp (no_saved_history covers another tenant's save of the
// same label too: telling them apart would disclose it, 0x0CE). Each is a
// funnel reason of 0x0CF (reason_of), so a resume that falls back to
// recomputation is counted.
inline constexpr size_t kSessionTierRefusalCount = 7;
std::string_view to_string(SessionTierRefusal r);
RejectionReason reason_of(SessionTierRefusal r);

}  // namespace kvrt
