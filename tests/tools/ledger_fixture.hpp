#pragma once
// Shared helpers of the [ledger] suites: the shipped scenario and layouts, and
// exact byte figures written the way the spec writes them (4.625 MiB, 480 KiB).
#include <catch2/catch.hpp>
#include <string>

#include "services/common/units.hpp"
#include "services/identity/layout_loader.hpp"
#include "tools/ledger/ledger_report.hpp"

namespace kvrt::ledger_test {

inline std::string source_path(const std::string& relative) { return std::string(KVRT_SOURCE_DIR) + "/" + relative; }

inline CacheLayoutManifest load_layout(const std::string& name) {
  auto m = load_layout_manifest(source_path("config/layouts/" + name));
  REQUIRE(m.ok());
  return *m;
}

inline LedgerScenario worked_scenario() {
  auto s = load_ledger_scenario(source_path("config/ledgers/tp-local-worked.toml"));
  if (!s.ok()) FAIL(s.error().describe());
  return *s;
}

// The 0x0D worked report, built through the same path as `kvrt ledger`.
inline LedgerReport worked_report() {
  const LedgerScenario s = worked_scenario();
  auto r = build_ledger_report(s, load_layout("single-group-tp2.toml"));
  if (!r.ok()) FAIL(r.error().describe());
  return *r;
}

// A decimal MiB/KiB figure as the spec prints it, in bytes. The spec's figures
// are binary fractions (4.625 = 37/8), exact in a double.
inline uint64_t mib(double v) { return static_cast<uint64_t>(v * static_cast<double>(kMiB)); }
inline uint64_t kib(double v) { return static_cast<uint64_t>(v * static_cast<double>(kKiB)); }

// A manifest with block size P (allocator = kernel = hash = scheduler block).
inline CacheLayoutManifest with_block_rows(CacheLayoutManifest m, uint32_t p) {
  m.allocator_block_size = p;
  m.kernel_block_size = p;
  m.hash_block_size = p;
  m.scheduler_block_size = p;
  return m;
}

}  // namespace kvrt::ledger_test
