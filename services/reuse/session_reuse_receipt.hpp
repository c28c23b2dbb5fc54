#pragma once
// SessionReuseReceipt (spec 0x0CC): M5.3's identity receipt for the historical
// K/V [0, H) of an inactive multi-turn session. M5.5 owns where the rows live
// and how they are loaded; this receipt only proves what they are. Resuming
// reduces logical prefill from H + U to U tokens only while every field here
// still matches (an adapter, model, position-contract, quantizer or namespace
// change is a compatibility failure even if the session id is unchanged).
#include <cstdint>
#include <string>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/token_interval.hpp"

namespace kvrt {

struct SessionReuseReceipt {
  // Authorized session and tenant identity.
  std::string session_id;
  std::string tenant_id;
  std::string namespace_id;  // authorized cache namespace (0x0CE)
  NamespaceGeneration namespace_generation;
  Sha256Digest semantic_digest;              // model/cache semantic (compatibility manifest) digest
  Sha256Digest layout_digest;                // physical representation/layout digest
  TokenInterval covered_interval;            // exact covered history [0, H) [tokens]
  Sha256Digest covered_tokens_digest;        // SHA-256 of the exact token ids in covered_interval
  std::string position_truncation_contract;  // position/truncation contract id
  uint64_t publication_generation = 0;
  std::string source_tier_object_id;   // M5.5 object holding the saved rows
  uint32_t resume_prefill_tokens = 0;  // U: new user tokens still to prefill [tokens]

  friend bool operator==(const SessionReuseReceipt&, const SessionReuseReceipt&) = default;
};

}  // namespace kvrt
