#include "bench/bench_topics.hpp"

#include "bench/allocator_bench.hpp"

namespace kvrt::bench {

const std::vector<BenchTopic>& bench_topics() {
  static const std::vector<BenchTopic> topics{
      {"allocator", "allocator owner: ns/op of allocate, append, fork, COW, release, evict vs rectangular reservation",
       &run_allocator_bench},
  };
  return topics;
}

}  // namespace kvrt::bench
