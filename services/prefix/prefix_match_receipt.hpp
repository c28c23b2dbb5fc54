#pragma once
// PrefixMatchReceipt (spec 0x07G) is declared in schema/prefix.capnp; this is
// its canonical digest, which a producer stores in receipt_sha256 and a
// consumer recomputes and compares.
#include "schema/prefix_types.hpp"
#include "services/common/digest.hpp"

namespace kvrt {

// Canonical SHA-256 over every field of `r` except receipt_sha256 (0x07G).
Sha256Digest canonical_digest(const PrefixMatchReceipt& r);

}  // namespace kvrt
