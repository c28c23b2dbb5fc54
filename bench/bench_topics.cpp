#include "bench/bench_topics.hpp"

#include "bench/allocator_bench.hpp"
#include "bench/attention_bench.hpp"
#include "bench/mapper_bench.hpp"
#include "bench/prefix_bench.hpp"
#include "bench/radix_bench.hpp"
#include "bench/rpc_bench.hpp"

namespace kvrt::bench {

namespace {
// Both index owners in one report: the radix rows, then the
// prefix (hash-chain) rows.
BenchReport run_index_bench(bool quick) {
  BenchReport report = run_radix_index_bench(quick);
  report.bench = "index";
  append_prefix_index_rows(report, quick);
  return report;
}
}  // namespace

const std::vector<BenchTopic>& bench_topics() {
  static const std::vector<BenchTopic> topics{
      {"allocator", "allocator owner: ns/op of allocate, append, fork, COW, release, evict vs rectangular reservation",
       &run_allocator_bench},
      {"index",
       "prefix and radix indexes: radix match/insert/lock/evict, hash chain per token, full-hit lookup, "
       "vs linear scans",
       &run_index_bench},
      {"attention",
       "kernel executor: paged decode K/V bytes/s vs copy bandwidth (1K-32K), Hydragen and ChunkAttention vs "
       "ordinary paged decode and the roofline ideal",
       &run_attention_bench},
      {"mapper",
       "mapper owner: map+unmap per page group (4 KiB, 64 KiB, 2 MiB), async mapping hidden in steady decode, "
       "paged table preparation vs the mapped path",
       &run_mapper_bench},
      {"rpc",
       "actor transport: allocation-receipt round trips in-process and across processes, batches of 1/16/256, "
       "vs raw TCP and Unix-socket ping-pong",
       &run_rpc_bench},
  };
  return topics;
}

}  // namespace kvrt::bench
