#pragma once
#include "bench/bench_report.hpp"

namespace kvrt::bench {
// `kvrt bench allocator`. quick: reduced sizes for the test suite.
BenchReport run_allocator_bench(bool quick);
}  // namespace kvrt::bench
