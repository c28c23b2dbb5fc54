#include "tools/ledger/ledger_report.hpp"

#include "tools/ledger/capacity_pressure.hpp"

namespace kvrt {

Result<LedgerReport> build_ledger_report(const LedgerScenario& scenario, const CacheLayoutManifest& manifest) {
  RowLedger row;
  KVRT_TRY_ASSIGN(row, derive_row_ledger(manifest));
  LedgerInput input;
  KVRT_TRY_ASSIGN(input, build_ledger_input(scenario, row.block_rows));
  ByteLedgers ledgers;
  KVRT_TRY_ASSIGN(ledgers, compute_byte_ledgers(manifest, input));
  KVRT_TRY(reconcile_ledgers(ledgers));

  auto arena = ContiguousArena::create(scenario.arena.arena_bytes, scenario.arena.allocated);
  if (!arena.ok()) {
    Error e = arena.error();
    e.field = "arena." + e.field;
    return e;
  }
  ContiguousFit contiguous;
  KVRT_TRY_ASSIGN(contiguous, arena->fit_contiguous(scenario.arena.candidate_bytes));
  BlockPoolFit block_pool;
  KVRT_TRY_ASSIGN(block_pool,
                  fit_block_pool(scenario.arena.candidate_bytes, row.block_bytes, ledgers.pool.idle_blocks));
  const ExternalFragmentation fragmentation = arena->external_fragmentation();

  std::vector<IdentityCheck> identities = additive_identities(ledgers);
  return LedgerReport{
      .scenario = scenario,
      .manifest_id = manifest.manifest_id,
      .input = std::move(input),
      .ledgers = std::move(ledgers),
      .identities = std::move(identities),
      .arena = ArenaReport{std::move(arena).value(), fragmentation, contiguous, block_pool},
      .expected_tail_rows = expected_tail_waste_rows(row.block_rows),
      .expected_tail_bytes = expected_tail_waste_bytes(row.block_rows, row.row_bytes),
  };
}

}  // namespace kvrt
