#pragma once
// The 0x0BE four-sequence tree, shared by the [executor] suites and the CUDA
// device checks.
#include <random>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/executor/execution_snapshot.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {

using namespace kvrt::executor;

// The 0x0BE four-sequence tree. Its numeric Q/K/V tables were lost from the
// spec text; the structure (chunk sizes, coverage, paths, widths d_qk = 2,
// d_v = 3, one head, sqrt(2) scale denominator) is rebuilt from the tree
// diagram and the ledger, and the values are seeded uniform draws.
//   C0_global       2 rows  covers [0,4)
//   C1_left_shared  1 row   covers [0,2)   C3_private_S0 2 rows [0,1)   C4_private_S1 1 row [1,2)
//   C2_right_shared 2 rows  covers [2,4)   C5_private_S2 1 row  [2,3)   C6_private_S3 1 row [3,4)
// Storage: blocks of P_a = 2 rows, one chunk per block; a one-row chunk
// leaves its block's second row uncommitted and NaN, so reading it would
// poison the result.
struct FourSequenceTree {
  PlainPool pool;
  ExecutionSnapshot snapshot;

  // The spec's widths by default; the device checks (tests/gpu_*) rebuild
  // the same tree at the widths the CUDA kernels take (d = 64, GQA heads).
  explicit FourSequenceTree(uint32_t qk_dim = 2, uint32_t v_dim = 3, ScalarType dtype = ScalarType::fp32,
                            HeadMapping heads = HeadMapping{1, 1})
      : pool(PlainPoolShape{7, 2, heads.kv_heads, qk_dim, v_dim, dtype, dtype}) {
    std::mt19937_64 rng(0x0BE);
    struct Spec {
      const char* name;
      uint32_t position, rows;
    };
    const Spec specs[] = {{"C0_global", 0, 2},     {"C1_left_shared", 2, 1}, {"C2_right_shared", 2, 2},
                          {"C3_private_S0", 3, 2}, {"C4_private_S1", 3, 1},  {"C5_private_S2", 4, 1},
                          {"C6_private_S3", 4, 1}};
    for (uint32_t c = 0; c < 7; ++c) {
      pool.fill_block(c, specs[c].rows, rng);
      SnapshotChunk chunk;
      chunk.name = specs[c].name;
      chunk.identity = sha256(std::string(specs[c].name));
      chunk.first_position = specs[c].position;
      chunk.runs.push_back(KvRowRun{c, 0, specs[c].rows, specs[c].rows});
      snapshot.chunks.push_back(chunk);
    }
    const std::vector<std::vector<uint32_t>> paths{{0, 1, 3}, {0, 1, 4}, {0, 2, 5}, {0, 2, 6}};
    for (uint32_t q = 0; q < 4; ++q) {
      SnapshotSequence seq;
      seq.request = RequestId{100 + q};
      seq.table_version = TableVersion{1};
      seq.path = paths[q];
      for (uint32_t c : seq.path) seq.context_tokens += snapshot.chunks[c].tokens();
      snapshot.sequences.push_back(seq);
    }
    snapshot.tree_version = 9;
    snapshot.tree_state_digest = sha256(std::string("loop9-fixture-tree"));
    snapshot.contract = ExecutionContract{heads, qk_dim, v_dim, dtype, dtype, 1};
    REQUIRE(snapshot.assign_coverage().ok());
  }
};

}  // namespace kvrt::test
