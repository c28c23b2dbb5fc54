// The prefix tree a shared-prefix batch builds from block tables
// (executor/shared_prefix_plan.hpp), against a brute-force reading of the
// same tables: over seeded random forests of requests (shared runs of
// blocks at several levels, private tails, requests that end inside
// another's path, partial last blocks), every sequence's path spells its
// own (slot, rows) blocks in order, every chunk's coverage is exactly the
// requests whose blocks contain it at its position, no chunk could merge
// with its only child, and the levels and shared-chunk count are those the
// brute force counts.
#include "services/executor/shared_prefix_plan.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

namespace kvrt::executor {
namespace {

using Block = std::pair<uint32_t, uint32_t>;  // (slot, rows)

std::vector<Block> blocks_of(const MemberBlocks& m, uint32_t P) {
  std::vector<Block> out;
  for (uint64_t j = 0; j * P < m.context_tokens; ++j)
    out.emplace_back(m.slots[j], static_cast<uint32_t>(std::min<uint64_t>(P, m.context_tokens - j * P)));
  return out;
}

}  // namespace

TEST_CASE("the shared-prefix tree equals a brute-force reading of the tables", "[executor][shared_prefix]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const uint32_t P = 16;
  ExecutionContract contract{HeadMapping{4, 2}, 16, 16, ScalarType::fp16, ScalarType::fp16, 1};
  for (int trial = 0; trial < 300; ++trial) {
    // Requests grow from random earlier ones: take a prefix of a parent's
    // full blocks (sharing those slots), then add fresh slots.
    uint32_t next_slot = 0;
    std::vector<MemberBlocks> members;
    const int B = 1 + static_cast<int>(rng() % 9);
    for (int i = 0; i < B; ++i) {
      MemberBlocks m;
      m.request = RequestId{1000 + static_cast<uint64_t>(i)};
      m.table_version = TableVersion{1};
      if (!members.empty() && rng() % 4 != 0) {
        const MemberBlocks& parent = members[rng() % members.size()];
        const uint64_t full = parent.context_tokens / P;
        const uint64_t take = full == 0 ? 0 : rng() % (full + 1);
        m.slots.assign(parent.slots.begin(), parent.slots.begin() + static_cast<ptrdiff_t>(take));
      }
      const uint32_t own = (m.slots.empty() ? 1 : 0) + static_cast<uint32_t>(rng() % 3);
      for (uint32_t k = 0; k < own; ++k) m.slots.push_back(next_slot++);
      const uint64_t max_rows = m.slots.size() * P;
      m.context_tokens = max_rows - (own > 0 ? rng() % P : 0);  // a partial last block of its own
      m.valid.assign(m.slots.size(), P);
      members.push_back(std::move(m));
    }
    const Result<SharedPrefixPlan> plan = plan_shared_prefix(members, P, contract);
    REQUIRE(plan.ok());
    const ExecutionSnapshot& s = plan->snapshot;
    REQUIRE(s.validate().ok());
    REQUIRE(s.sequences.size() == members.size());
    std::set<uint32_t> seen(plan->member_of_sequence.begin(), plan->member_of_sequence.end());
    REQUIRE(seen.size() == members.size());

    // Each path spells its member's blocks.
    for (size_t q = 0; q < s.sequences.size(); ++q) {
      const MemberBlocks& m = members[plan->member_of_sequence[q]];
      CHECK(s.sequences[q].request == m.request);
      CHECK(s.sequences[q].context_tokens == m.context_tokens);
      std::vector<Block> spelled;
      for (uint32_t c : s.sequences[q].path)
        for (const KvRowRun& r : s.chunks[c].runs) spelled.emplace_back(r.slot, r.rows);
      CHECK(spelled == blocks_of(m, P));
    }
    // Coverage = the members whose blocks hold the chunk at its position.
    uint32_t shared = 0;
    for (size_t c = 0; c < s.chunks.size(); ++c) {
      const SnapshotChunk& chunk = s.chunks[c];
      std::set<uint32_t> readers;
      for (uint32_t i = 0; i < members.size(); ++i) {
        const std::vector<Block> blocks = blocks_of(members[i], P);
        const uint64_t first = chunk.first_position / P;
        bool holds = first + chunk.runs.size() <= blocks.size();
        for (size_t k = 0; holds && k < chunk.runs.size(); ++k)
          holds = blocks[first + k] == Block{chunk.runs[k].slot, chunk.runs[k].rows};
        // ... and the same path up to it: the slots before are a reader's own prefix.
        if (holds) readers.insert(i);
      }
      std::set<uint32_t> covered;
      for (uint32_t q = chunk.coverage_begin; q < chunk.coverage_end; ++q) covered.insert(plan->member_of_sequence[q]);
      CHECK(covered == readers);
      shared += readers.size() > 1 ? 1 : 0;
    }
    CHECK(plan->shared_chunks == shared);
    // Maximal: a chunk whose every reader continues into one same next chunk
    // with the same readers would have been one chunk.
    for (size_t c = 0; c < s.chunks.size(); ++c) {
      std::set<uint32_t> next;
      bool someone_ends = false;
      for (const SnapshotSequence& q : s.sequences)
        for (size_t k = 0; k < q.path.size(); ++k)
          if (q.path[k] == c) {
            if (k + 1 == q.path.size())
              someone_ends = true;
            else
              next.insert(q.path[k + 1]);
          }
      if (!someone_ends && next.size() == 1) CHECK(s.chunks[*next.begin()].coverage() != s.chunks[c].coverage());
    }
    uint32_t levels = 0;
    for (const SnapshotSequence& q : s.sequences) {
      uint32_t l = 0;
      for (uint32_t c : q.path) l += s.chunks[c].coverage() > 1 ? 1 : 0;
      levels = std::max(levels, l);
    }
    CHECK(plan->levels == levels);
  }
}

TEST_CASE("a shared-prefix plan refuses what it cannot build", "[executor][shared_prefix]") {
  const ExecutionContract contract{HeadMapping{4, 2}, 16, 16, ScalarType::fp16, ScalarType::fp16, 1};
  MemberBlocks a{RequestId{1}, TableVersion{1}, {0, 1}, {16, 4}, 20};
  CHECK(plan_shared_prefix({}, 16, contract).error().code == ErrorCode::invalid_argument);
  const std::vector<MemberBlocks> twice{a, a};
  CHECK(plan_shared_prefix(twice, 16, contract).error().field == "members[1]");
  MemberBlocks empty = a;
  empty.context_tokens = 0;
  CHECK(plan_shared_prefix(std::vector<MemberBlocks>{empty}, 16, contract).error().code == ErrorCode::invalid_argument);
  MemberBlocks past = a;
  past.context_tokens = 40;  // three blocks' worth over two
  CHECK(plan_shared_prefix(std::vector<MemberBlocks>{past}, 16, contract).error().code == ErrorCode::invalid_argument);
  MemberBlocks ragged = a;
  ragged.valid.pop_back();
  CHECK(plan_shared_prefix(std::vector<MemberBlocks>{ragged}, 16, contract).error().code ==
        ErrorCode::invalid_argument);
}

}  // namespace kvrt::executor
