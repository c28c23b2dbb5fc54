#pragma once
// Everything `kvrt ledger` shows, assembled from a scenario and its layout:
// the byte ledgers (0x02A-0x02E) reconciled as in 0x0D, the contiguous-arena
// comparison of 0x02F and the expected tail waste of 0x02G. Plain data, so the
// front end only renders and tests can compare the same figures.
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "tools/ledger/byte_ledger.hpp"
#include "tools/ledger/contiguous_arena.hpp"
#include "tools/ledger/exact_fraction.hpp"
#include "tools/ledger/ledger_reconciliation.hpp"
#include "tools/ledger/ledger_scenario.hpp"

namespace kvrt {

struct ArenaReport {
  ContiguousArena arena;
  ExternalFragmentation fragmentation;
  ContiguousFit contiguous;  // the candidate against the arena's free extents
  BlockPoolFit block_pool;   // the same candidate against the ledger's idle pool blocks
};

struct LedgerReport {
  LedgerScenario scenario;  // as applied (after any command-line overrides)
  std::string manifest_id;
  LedgerInput input;  // the request views the ledgers were computed from
  ByteLedgers ledgers;
  std::vector<IdentityCheck> identities;  // all hold: the report is built only if they reconcile
  ArenaReport arena;
  ExactFraction expected_tail_rows;   // (P - 1) / 2 [rows / terminal block]
  ExactFraction expected_tail_bytes;  // (P - 1) / 2 * B_row [bytes / terminal block]
};

// Builds the family, computes and reconciles the ledgers, and evaluates the
// arena. Any caller error is typed and names its field; a broken identity
// (which would be a kvrt bug) is ErrorCode::ledger_identity_broken.
Result<LedgerReport> build_ledger_report(const LedgerScenario& scenario, const CacheLayoutManifest& manifest);

}  // namespace kvrt
