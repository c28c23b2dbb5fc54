#pragma once
#include "bench/bench_report.hpp"

namespace kvrt::bench {
// Prefix-index rows of `kvrt bench index`: sha256_chain_per_token,
// xxh3_chain_per_token and prefix_lookup_full_hit_127, each with a naive
// baseline measured in the same run, plus prefix_lookup_receipt_2048
// (the whole lookup with its receipt) for information.
// quick: reduced repetitions for the test suite.
void append_prefix_index_rows(BenchReport& report, bool quick);
}  // namespace kvrt::bench
