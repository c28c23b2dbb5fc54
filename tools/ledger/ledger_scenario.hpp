#pragma once
// A ledger scenario (config/ledgers/*.toml): everything `kvrt ledger` needs
// besides the layout itself — the request family, the pool, the declared
// metadata record sizes and the contiguous-arena snapshot of 0x02F. Errors name
// file:line:column and the field.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "tools/ledger/byte_ledger.hpp"
#include "tools/ledger/contiguous_arena.hpp"
#include "tools/ledger/metadata_ledger.hpp"

namespace kvrt {

struct ArenaScenario {
  uint64_t arena_bytes = 0;       // [bytes]
  std::vector<Extent> allocated;  // allocated extents [bytes]
  uint64_t candidate_bytes = 0;   // next contiguous request [bytes]
};

struct LedgerScenario {
  std::string origin;                   // the file it was read from
  std::string layout;                   // layout manifest path, relative to the repository root
  std::vector<uint64_t> lengths;        // T_r [rows]
  std::vector<uint64_t> reserved_rows;  // T_max,r [rows]
  bool shared_prefix = true;            // nested exact-prefix family, else private blocks
  uint32_t first_block_id = 100;
  uint64_t pool_blocks = 0;          // N_pool [blocks]
  MetadataRecordSizes record_sizes;  // [bytes / record]
  ArenaScenario arena;
};

Result<LedgerScenario> load_ledger_scenario(const std::string& path);
// The most rows a scenario may reserve over all its requests.
inline constexpr uint64_t kMaxScenarioRows = uint64_t{1} << 20;

Result<LedgerScenario> parse_ledger_scenario(std::string_view toml_text, const std::string& origin);

// Builds the request family the scenario describes for block size P (taken from
// the layout) and the LedgerInput around it; v_p is derived from the views.
Result<LedgerInput> build_ledger_input(const LedgerScenario& scenario, uint32_t block_rows);

}  // namespace kvrt
