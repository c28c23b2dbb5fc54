#pragma once
// The registry of `kvrt bench` topics: name, one-line description, runner.
#include <string>
#include <vector>

#include "bench/bench_report.hpp"

namespace kvrt::bench {

struct BenchTopic {
  std::string name;
  std::string description;
  BenchReport (*run)(bool quick);
};

const std::vector<BenchTopic>& bench_topics();

}  // namespace kvrt::bench
