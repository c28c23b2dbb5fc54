#pragma once
#include "bench/bench_report.hpp"

namespace kvrt::bench {

// `kvrt bench rpc`: allocation-receipt round trips in-process and
// across processes, per-operation cost in batches of 1, 16 and 256, and the
// physical floor measured in the same run (raw TCP and Unix-socket
// ping-pong between two processes).
BenchReport run_rpc_bench(bool quick);

}  // namespace kvrt::bench
