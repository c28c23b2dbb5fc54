// Seeded random request families against a brute-force reference (docs/conventions.md
// habit 7): the ledger's per-block tallies versus the naive set union of block
// ids and the set of (block, offset) rows any request can see; every
// reconciliation identity must hold. Also the typed rejections of bad input.
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "tests/tools/ledger_fixture.hpp"

using namespace kvrt;
using namespace kvrt::ledger_test;

namespace {

constexpr uint32_t kBlockSizes[] = {1, 2, 3, 4, 8, 16, 32};

uint64_t uniform(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

// Branching exact-prefix families: each new request either is an exact prefix
// of an earlier one (sharing its blocks, partial tail included) or shares the
// earlier one's full blocks up to a branch point and continues in fresh blocks
// (a partial tail at the branch would be copied, so it is not shared).
std::vector<RequestView> branching_family(std::mt19937_64& rng, uint32_t P) {
  std::vector<RequestView> views;
  uint32_t next_block = 1000;
  const size_t n = uniform(rng, 1, 7);
  for (size_t i = 0; i < n; ++i) {
    RequestView v;
    v.request = RequestId{i};
    v.label = std::string(1, 'R').append(std::to_string(i));  // GCC 12 -Wrestrict misfires on "R" + string
    size_t shared_blocks = 0;
    const RequestView* parent = i == 0 ? nullptr : &views[uniform(rng, 0, i - 1)];
    if (parent == nullptr) {
      v.committed_rows = uniform(rng, 1, 150);
    } else if (uniform(rng, 0, 1) == 0) {  // exact prefix of the parent
      v.committed_rows = uniform(rng, 1, parent->committed_rows);
      shared_blocks = ceil_div(v.committed_rows, P);
    } else {  // branch after s rows
      const uint64_t s = uniform(rng, 0, parent->committed_rows);
      v.committed_rows = s + uniform(rng, 1, 60);
      shared_blocks = s / P;
    }
    for (size_t j = 0; j < shared_blocks; ++j) v.blocks.push_back(parent->blocks[j]);
    while (v.blocks.size() < ceil_div(v.committed_rows, P)) v.blocks.push_back(PhysicalBlockId{next_block++});
    v.reserved_rows = v.committed_rows + uniform(rng, 0, 40);
    views.push_back(std::move(v));
  }
  return views;
}

// The brute-force reference, written from the spec's set definitions (0x02D).
struct Reference {
  std::set<uint32_t> union_ids;                       // U
  std::set<std::pair<uint32_t, uint64_t>> rows_seen;  // (block, offset) any view can read
  uint64_t references = 0;                            // N_ref
  uint64_t logical_rows = 0;                          // sum_r T_r
  uint64_t reserved_rows = 0;
};

Reference brute_force(const std::vector<RequestView>& views, uint32_t P) {
  Reference ref;
  for (const RequestView& v : views) {
    ref.references += v.blocks.size();
    ref.logical_rows += v.committed_rows;
    ref.reserved_rows += v.reserved_rows;
    for (PhysicalBlockId p : v.blocks) ref.union_ids.insert(p.value);
    for (uint64_t t = 0; t < v.committed_rows; ++t) ref.rows_seen.emplace(v.blocks[t / P].value, t % P);
  }
  return ref;
}

void check_against_reference(const CacheLayoutManifest& layout, const LedgerInput& input) {
  const uint32_t P = layout.allocator_block_size;
  const uint64_t B = layout.row_bytes();
  auto ledgers = compute_byte_ledgers(layout, input);
  if (!ledgers.ok()) FAIL(ledgers.error().describe());
  const ByteLedgers& l = *ledgers;
  const Reference ref = brute_force(input.requests, P);

  std::vector<uint32_t> ids;
  for (PhysicalBlockId p : l.unique.block_ids) ids.push_back(p.value);
  CHECK(ids == std::vector<uint32_t>(ref.union_ids.begin(), ref.union_ids.end()));
  CHECK(l.unique.unique_blocks == ref.union_ids.size());
  CHECK(l.unique.materialized_rows == ref.rows_seen.size());
  CHECK(l.unique.tail_rows == ref.union_ids.size() * P - ref.rows_seen.size());
  CHECK(l.unique.capacity_bytes == ref.union_ids.size() * P * B);
  CHECK(l.request_view.reference_blocks == ref.references);
  CHECK(l.request_view.tail_rows == ref.references * P - ref.logical_rows);
  CHECK(l.rectangular.slack_rows == ref.reserved_rows - ref.logical_rows);
  CHECK(l.savings.avoided_blocks == ref.references - ref.union_ids.size());
  CHECK(l.savings.deduplicated_rows ==
        static_cast<int64_t>(ref.logical_rows) - static_cast<int64_t>(ref.rows_seen.size()));
  CHECK(l.pool.idle_blocks == input.pool_blocks - ref.union_ids.size());
  const Status reconciled = reconcile_ledgers(l);
  if (!reconciled.ok()) FAIL(reconciled.error().describe());
  for (const IdentityCheck& c : additive_identities(l)) CHECK(c.holds());
}

}  // namespace

TEST_CASE("random nested families: unique blocks = |union of block ids|, identities hold", "[ledger]") {
  const CacheLayoutManifest base = load_layout("single-group-tp2.toml");
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const uint32_t P = kBlockSizes[uniform(rng, 0, std::size(kBlockSizes) - 1)];
    INFO("P = " << P);
    const CacheLayoutManifest layout = with_block_rows(base, P);
    RequestFamilySpec spec;
    spec.block_rows = P;
    const size_t n = uniform(rng, 1, 8);
    const uint64_t longest = uniform(rng, 1, 200);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t len = i == 0 ? longest : uniform(rng, 1, longest);
      spec.lengths.push_back(len);
      spec.reserved_rows.push_back(len + uniform(rng, 0, 64));
    }
    auto views = build_request_family(spec);
    REQUIRE(views.ok());
    LedgerInput input;
    input.requests = *views;
    input.pool_blocks = ceil_div(longest, P) + uniform(rng, 0, 10);
    input.record_sizes = MetadataRecordSizes{4, 32, 24, 2, 4, 128};
    check_against_reference(layout, input);

    // 0x09B closed forms for a nested family: only the longest path is unique.
    auto l = compute_byte_ledgers(layout, input);
    REQUIRE(l.ok());
    CHECK(l->unique.unique_blocks == ceil_div(longest, P));
    CHECK(l->unique.tail_rows == ceil_div(longest, P) * P - longest);
    CHECK(l->unique.materialized_rows == longest);

    // The same lengths without sharing: unique ledger == request view.
    spec.sharing = PrefixSharing::private_blocks;
    auto private_views = build_request_family(spec);
    REQUIRE(private_views.ok());
    input.requests = *private_views;
    input.pool_blocks = l->request_view.reference_blocks + uniform(rng, 0, 10);
    check_against_reference(layout, input);
    auto p = compute_byte_ledgers(layout, input);
    REQUIRE(p.ok());
    CHECK(p->unique.capacity_bytes == p->request_view.capacity_bytes);
    CHECK(p->savings.deduplicated_rows == 0);
  }
}

TEST_CASE("random branching families reconcile against the brute-force union", "[ledger]") {
  const CacheLayoutManifest base = load_layout("two-group-tp2.toml");
  for (uint64_t seed = 1001; seed <= 1300; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const uint32_t P = kBlockSizes[uniform(rng, 0, std::size(kBlockSizes) - 1)];
    INFO("P = " << P);
    LedgerInput input;
    input.requests = branching_family(rng, P);
    input.pool_blocks = 4096;
    input.record_sizes = MetadataRecordSizes{4, 32, 24, 2, 4, 128};
    check_against_reference(with_block_rows(base, P), input);
  }
}

TEST_CASE("bad ledger input is a typed error naming the field", "[ledger]") {
  const CacheLayoutManifest layout = load_layout("single-group-tp2.toml");
  auto family = [](std::vector<uint64_t> lengths, std::vector<uint64_t> reserved) {
    return build_request_family({.lengths = std::move(lengths), .reserved_rows = std::move(reserved)});
  };
  CHECK(family({33, 0, 16}, {64, 48, 32}).error().field == "lengths[1]");
  CHECK(family({33, 25, 16}, {64, 24, 32}).error().field == "reserved_rows[1]");
  CHECK(family({33, 25}, {64}).error().field == "reserved_rows");
  CHECK(family({}, {}).error().field == "lengths");
  CHECK(family({uint64_t{1} << 40}, {uint64_t{1} << 40}).error().code == ErrorCode::invalid_argument);

  auto views = family({33, 25, 16}, {64, 48, 32});
  REQUIRE(views.ok());
  LedgerInput good{.requests = *views, .valid_rows = {}, .pool_blocks = 8, .record_sizes = {4, 32, 24, 2, 4, 128}};
  REQUIRE(compute_byte_ledgers(layout, good).ok());

  auto field_of = [&](const LedgerInput& in) {
    auto r = compute_byte_ledgers(layout, in);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
    return r.error().field;
  };
  LedgerInput short_table = good;
  short_table.requests[0].blocks.pop_back();  // 33 rows need ceil(33/16) = 3 blocks
  CHECK(field_of(short_table) == "requests[0].blocks");
  LedgerInput shifted = good;  // B names 101 as its first block, A as its second
  shifted.requests[1].blocks = {PhysicalBlockId{101}, PhysicalBlockId{103}};
  CHECK(field_of(shifted) == "requests[1].blocks[0]");
  LedgerInput twice = good;
  twice.requests[0].blocks[2] = PhysicalBlockId{100};
  CHECK(field_of(twice) == "requests[0].blocks[2]");
  LedgerInput small_pool = good;
  small_pool.pool_blocks = 2;
  CHECK(field_of(small_pool) == "pool_blocks");
  LedgerInput huge_record = good;
  huge_record.record_sizes.block_descriptor = uint64_t{1} << 40;
  CHECK(field_of(huge_record) == "metadata.block_descriptor");

  // Explicit v_p: A sees 16 rows of block 101, so 9 valid rows would let A read
  // rows that were never committed (0x03G).
  LedgerInput explicit_rows = good;
  explicit_rows.valid_rows =
      ValidRowsByBlock{{PhysicalBlockId{100}, 16}, {PhysicalBlockId{101}, 9}, {PhysicalBlockId{102}, 1}};
  CHECK(field_of(explicit_rows) == "valid_rows[101]");
  explicit_rows.valid_rows->at(PhysicalBlockId{101}) = 17;
  CHECK(field_of(explicit_rows) == "valid_rows[101]");
  explicit_rows.valid_rows->at(PhysicalBlockId{101}) = 16;
  explicit_rows.valid_rows->emplace(PhysicalBlockId{7}, 4);
  CHECK(field_of(explicit_rows) == "valid_rows[7]");
  explicit_rows.valid_rows->erase(PhysicalBlockId{7});
  // Valid rows no live view sees (A's block 102 kept 5 rows): the payload
  // deduplicated shrinks, and every identity still holds.
  explicit_rows.valid_rows->at(PhysicalBlockId{102}) = 5;
  auto kept = compute_byte_ledgers(layout, explicit_rows);
  REQUIRE(kept.ok());
  CHECK(kept->unique.materialized_rows == 16 + 16 + 5);
  CHECK(kept->savings.deduplicated_rows == 74 - 37);
  CHECK(reconcile_ledgers(*kept).ok());

  CacheLayoutManifest broken_layout = layout;
  broken_layout.kernel_block_size = 12;
  CHECK(compute_byte_ledgers(broken_layout, good).error().code == ErrorCode::kernel_block_not_divisor);
}

TEST_CASE("ledger scenario errors name file, line and field", "[ledger]") {
  const std::string good = R"(layout = "config/layouts/single-group-tp2.toml"
lengths = [33, 25, 16]
reserved_rows = [64, 48, 32]
shared_prefix = true
pool_blocks = 8
[metadata]
request_map_entry = 4
block_descriptor = 32
cached_hash_entry = 24
valid_tail_record = 2
free_queue_entry = 4
fixed = 128
[arena]
bytes = 12582912
candidate_bytes = 2621440
[[arena.allocated]]
offset = 0
bytes = 4194304
)";
  REQUIRE(parse_ledger_scenario(good, "s.toml").ok());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    auto r = parse_ledger_scenario(text, "s.toml");
    REQUIRE_FALSE(r.ok());
    return r.error();
  };
  Error zero = with("lengths = [33, 25, 16]", "lengths = [33, 0, 16]");
  CHECK(zero.code == ErrorCode::config_field);
  CHECK(zero.field == "lengths[1]");
  CHECK(zero.reason.rfind("s.toml:2:", 0) == 0);
  Error below = with("reserved_rows = [64, 48, 32]", "reserved_rows = [64, 24, 32]");
  CHECK(below.field == "reserved_rows[1]");
  CHECK(below.reason.rfind("s.toml:3:", 0) == 0);
  CHECK(with("pool_blocks = 8", "pool_blocks = \"eight\"").field == "pool_blocks");
  CHECK(with("block_descriptor = 32", "block_descriptor = -1").field == "metadata.block_descriptor");
  CHECK(with("offset = 0", "offset = 12582910").field == "arena.allocated[0]");
  CHECK(with("shared_prefix = true", "shared_prefix = 1").field == "shared_prefix");
  CHECK(with("lengths = [33, 25, 16]", "lengths = [33, 25, ").code == ErrorCode::config_parse);

  auto missing = load_ledger_scenario("/nonexistent/ledger.toml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
}
