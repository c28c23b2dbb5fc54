#pragma once
#include "bench/bench_report.hpp"

namespace kvrt::bench {
// `kvrt bench mapper`: map + unmap latency per page group over the
// memfd pool (map_unmap_4k, map_unmap_64k, map_unmap_2m), then the decode rows
// of append_mapper_decode_rows. quick: reduced sizes for the test suite.
BenchReport run_mapper_bench(bool quick);
// Steady decode with synchronous vs asynchronous mapping (async_hidden_fraction,
// decode_mapping_visible_per_step) and the paged path's per-step table
// preparation against the mapped path's per-step cost
// (paged_table_prep_over_mapped), all from one decode trace.
void append_mapper_decode_rows(BenchReport& report, bool quick);
}  // namespace kvrt::bench
