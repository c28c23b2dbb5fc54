#pragma once
#include "bench/bench_report.hpp"

namespace kvrt::bench {
// `kvrt bench attention`: the executor's paged decode against the
// machine's copy bandwidth, and shared-prefix execution (Hydragen,
// ChunkAttention) against ordinary paged decode and its roofline ideal, all
// measured in one run. quick: reduced sizes for the test suite.
BenchReport run_attention_bench(bool quick);
}  // namespace kvrt::bench
