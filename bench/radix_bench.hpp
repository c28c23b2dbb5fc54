#pragma once
#include "bench/bench_report.hpp"

namespace kvrt::bench {
// Radix rows of `kvrt bench index`: radix_match_per_token,
// radix_insert_per_token, radix_lock_unlock_depth10, radix_evict_per_node.
// quick: reduced sizes for the test suite.
BenchReport run_radix_index_bench(bool quick);
}  // namespace kvrt::bench
