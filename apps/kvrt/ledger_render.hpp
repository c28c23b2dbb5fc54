#pragma once
// Rendering of `kvrt ledger` (cmd_ledger.cpp): a human table with exact
// MiB/KiB decimals and the 0x0D identities, or one JSON object with every
// figure in bytes (plus rows and blocks).
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "tools/ledger/capacity_pressure.hpp"
#include "tools/ledger/ledger_report.hpp"

namespace kvrt::app {

void print_ledger_report(std::ostream& out, const LedgerReport& report,
                         const std::optional<CapacityPressure>& pressure);
nlohmann::json ledger_report_json(const LedgerReport& report, const std::optional<CapacityPressure>& pressure);

}  // namespace kvrt::app
