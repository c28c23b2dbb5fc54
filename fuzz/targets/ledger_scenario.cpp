// A ledger scenario (tools/ledger/ledger_scenario.hpp, config/ledgers/),
// read as `kvrt ledger` reads it: parsed, then its ledgers built and
// reconciled against the layout its fixture is written for. A scenario that
// loads either reconciles or is refused with a typed error; a broken
// reconciliation identity (ledger_identity_broken) would be a kvrt bug.
#include "tools/ledger/ledger_scenario.hpp"

#include "fuzz/embedded_layouts.hpp"
#include "fuzz/fuzz_target.hpp"
#include "services/identity/layout_loader.hpp"
#include "tools/ledger/ledger_report.hpp"

int kvrt_fuzz_ledger_scenario(const uint8_t* data, size_t size) {
  static const kvrt::CacheLayoutManifest layout =
      kvrt::parse_layout_manifest(kvrt::fuzz::kSingleGroupTp2Layout, "config/layouts/single-group-tp2.toml").value();
  kvrt::Result<kvrt::LedgerScenario> s =
      kvrt::parse_ledger_scenario(kvrt::fuzz::as_text(data, size), "/fuzz/ledger.toml");
  if (!s.ok()) {
    KVRT_FUZZ_TYPED_ERROR(s.error());
    return 0;
  }
  kvrt::Result<kvrt::LedgerReport> report = kvrt::build_ledger_report(*s, layout);
  if (!report.ok()) {
    KVRT_FUZZ_TYPED_ERROR(report.error());
    KVRT_FUZZ_REQUIRE(report.error().code != kvrt::ErrorCode::ledger_identity_broken, report.error().describe());
  }
  return 0;
}
