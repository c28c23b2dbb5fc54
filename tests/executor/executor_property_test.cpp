// [executor] randomised property test: random prefix trees, head mappings,
// widths, dtypes, block sizes and thresholds. For every tree, Hydragen,
// ChunkAttention and the FP64 monolithic reference agree (1e-12 in FP64 mode,
// 1e-5 row-relative in FP32 mode), the ledgers satisfy their identities, and
// a random corruption of the snapshot is refused with a typed error before
// any output is written. The seed is printed on failure.
#include <catch2/catch.hpp>

#include "services/executor/chunk_attention.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/reference_attention.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

struct RandomTree {
  ExecutionSnapshot snapshot;
  uint32_t block_tokens = 0;
  uint32_t slots = 0;
  // chunk rows to fill: (slot, row)
  std::vector<std::pair<uint32_t, uint32_t>> rows;
};

// Grows chunks over sequences [b, e) from `position`: one chunk covering all
// of them, then the range split into consecutive groups that continue (or,
// for a single sequence, stop). Rows start at a random row of a fresh block,
// so runs begin mid-block and cross block boundaries.
void grow(RandomTree& t, std::mt19937_64& rng, uint32_t b, uint32_t e, uint64_t position,
          std::vector<std::vector<uint32_t>>& paths, int depth) {
  SnapshotChunk c;
  c.name = "c" + std::to_string(t.snapshot.chunks.size());
  c.identity = sha256(c.name);
  c.first_position = position;
  uint32_t rows = 1 + rng() % 19;
  uint32_t row = rng() % t.block_tokens;
  uint32_t slot = t.slots++;
  while (rows > 0) {
    const uint32_t take = std::min(rows, t.block_tokens - row);
    // Committed rows of the block: at least what this chunk reads, sometimes more.
    const uint32_t committed = (rng() & 1) ? t.block_tokens : row + take;
    c.runs.push_back(KvRowRun{slot, row, take, committed});
    for (uint32_t i = 0; i < take; ++i) t.rows.push_back({slot, row + i});
    rows -= take;
    position += take;
    row = 0;
    if (rows > 0) slot = t.slots++;
  }
  const uint32_t id = static_cast<uint32_t>(t.snapshot.chunks.size());
  t.snapshot.chunks.push_back(std::move(c));
  for (uint32_t q = b; q < e; ++q) paths[q].push_back(id);
  if (depth >= 4 || (e - b == 1 && (rng() % 3 == 0))) return;
  uint32_t q = b;
  while (q < e) {
    const uint32_t width = 1 + rng() % (e - q);
    grow(t, rng, q, q + width, position, paths, depth + 1);
    q += width;
  }
}

RandomTree random_tree(std::mt19937_64& rng, const ExecutionContract& contract) {
  RandomTree t;
  t.block_tokens = std::array{1u, 4u, 8u, 16u}[rng() % 4];
  const uint32_t batch = 1 + rng() % 7;
  std::vector<std::vector<uint32_t>> paths(batch);
  grow(t, rng, 0, batch, 0, paths, 0);
  for (uint32_t q = 0; q < batch; ++q) {
    SnapshotSequence s;
    s.request = RequestId{q + 1};
    s.table_version = TableVersion{1};
    s.path = paths[q];
    for (uint32_t c : s.path) s.context_tokens += t.snapshot.chunks[c].tokens();
    t.snapshot.sequences.push_back(s);
  }
  t.snapshot.contract = contract;
  t.snapshot.tree_version = rng();
  t.snapshot.tree_state_digest = sha256(std::to_string(t.snapshot.tree_version));
  REQUIRE(t.snapshot.assign_coverage().ok());
  return t;
}

}  // namespace

TEST_CASE("random prefix trees: both designs equal the monolithic row, ledgers hold, corruption is refused",
          "[executor][property]") {
  const uint64_t seed = 0x7E57'0B0B;
  std::mt19937_64 rng(seed);
  ThreadPool pool(3);
  // One workspace for every call, its storage poisoned with NaN first: a
  // schedule that read a partial-state cell it had not written would show it.
  Workspace workspace;
  for (const auto slot :
       {Workspace::Slot::valid, Workspace::Slot::m, Workspace::Slot::l, Workspace::Slot::u, Workspace::Slot::lse}) {
    const auto cells = workspace.take<double>(slot, 1 << 16);
    std::fill(cells.begin(), cells.end(), std::numeric_limits<double>::quiet_NaN());
  }
  for (int trial = 0; trial < 60; ++trial) {
    INFO("seed " << seed << " trial " << trial);
    ExecutionContract contract;
    contract.heads.kv_heads = 1 + rng() % 3;
    contract.heads.q_heads = contract.heads.kv_heads * uint32_t(1 + rng() % 4);
    contract.qk_dim = std::array{2u, 8u, 16u, 19u, 32u}[rng() % 5];
    contract.v_dim = std::array{3u, 8u, 16u, 24u}[rng() % 4];
    contract.k_dtype = std::array{ScalarType::fp32, ScalarType::fp16, ScalarType::bf16}[rng() % 3];
    contract.v_dtype = std::array{ScalarType::fp32, ScalarType::fp16, ScalarType::bf16}[rng() % 3];
    contract.shared_threshold = rng() % 3;
    const RandomTree tree = random_tree(rng, contract);
    const ExecutionSnapshot& s = tree.snapshot;
    REQUIRE(s.validate().ok());
    PlainPool pp(PlainPoolShape{tree.slots, tree.block_tokens, contract.heads.kv_heads, contract.qk_dim, contract.v_dim,
                                contract.k_dtype, contract.v_dtype});
    for (const auto& [slot, row] : tree.rows) pp.fill_row(slot, row, rng);
    // Rows a run lists as committed but no chunk reads stay NaN: never read.
    const PagedKvView view = pp.view();
    const uint32_t batch = static_cast<uint32_t>(s.sequences.size());
    const uint64_t rows = uint64_t{batch} * contract.heads.q_heads;
    const auto q64 = widened(random_values<float>(rows * contract.qk_dim, rng, 2.0));
    std::vector<double> want(rows * contract.v_dim), want_lse(rows);
    reference_snapshot(view, s, q64, want, want_lse);
    for (const bool hydragen : {true, false}) {
      INFO((hydragen ? "Hydragen" : "ChunkAttention") << " B " << batch << " chunks " << s.chunks.size() << " P_a "
                                                      << tree.block_tokens << " tau " << contract.shared_threshold);
      std::vector<double> out = poisoned<double>(want.size()), lse = poisoned<double>(rows);
      const SharedPrefixArgs64 args{&s, s.fence(), contract.heads, q64, out, lse};
      auto r =
          hydragen ? hydragen_attention(view, args, &pool, &workspace) : chunk_attention(view, args, &pool, &workspace);
      REQUIRE(r.ok());
      CHECK(max_row_relative_error<double>(out, want, contract.v_dim) <= 1e-12);
      CHECK(max_abs_error<double>(lse, want_lse) <= 1e-12);
      std::vector<float> q(q64.begin(), q64.end()), out32 = poisoned<float>(want.size());
      const SharedPrefixArgs args32{&s, s.fence(), contract.heads, q, out32, {}};
      REQUIRE((hydragen ? hydragen_attention(view, args32, &pool, &workspace)
                        : chunk_attention(view, args32, &pool, &workspace))
                  .ok());
      CHECK(max_row_relative_error<float>(out32, want, contract.v_dim) <= 1e-5);
      // Ledger identities against brute force.
      const SharedPrefixLedger& l = r->ledger;
      uint64_t contexts = 0, unique = 0, partial = 0;
      for (uint32_t qi = 0; qi < batch; ++qi) contexts += path_keys(s, qi).size();
      for (const auto& c : s.chunks) {
        unique += c.tokens();
        partial += c.coverage() > contract.shared_threshold ? c.coverage() : 0;
      }
      CHECK(l.logical_pairs == contexts);
      CHECK(l.unique_rows == unique);
      CHECK(l.saved_reads == contexts - unique);
      CHECK(l.partial_rows == partial);
      if (!hydragen) CHECK(r->partial_states == partial * contract.heads.q_heads);
    }
    // One random corruption: the executor refuses it, typed, and writes nothing.
    ExecutionSnapshot bad = s;
    SnapshotFence fence = s.fence();
    switch (rng() % 5) {
      case 0:
        fence.tree_version += 1;
        break;
      case 1:
        bad.sequences[rng() % batch].context_tokens += 1 + rng() % 3;
        break;
      case 2: {
        SnapshotChunk& c = bad.chunks[rng() % bad.chunks.size()];
        c.coverage_end = c.coverage_end == batch ? c.coverage_end - 1 : c.coverage_end + 1;
        if (c.coverage_end == c.coverage_begin) c.coverage_begin = c.coverage_end + 1;
        break;
      }
      case 3: {
        SnapshotChunk& c = bad.chunks[rng() % bad.chunks.size()];
        c.runs.back().rows = c.runs.back().valid_rows - c.runs.back().first_row + 1;
        break;
      }
      default: {
        SnapshotSequence& seq = bad.sequences[rng() % batch];
        seq.path.push_back(seq.path.back());
        break;
      }
    }
    std::vector<double> out = poisoned<double>(want.size());
    auto refused = chunk_attention(view, SharedPrefixArgs64{&bad, fence, contract.heads, q64, out, {}});
    REQUIRE_FALSE(refused.ok());
    CHECK(std::all_of(out.begin(), out.end(), [](double x) { return std::isnan(x); }));
  }
}

}  // namespace kvrt::test
