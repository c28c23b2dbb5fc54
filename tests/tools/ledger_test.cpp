// Byte ledgers of spec 0x02A-0x02G and the 0x0D worked ledger: every figure is
// computed by the ledger code and compared with the spec's own arithmetic,
// written out here (74 * 64 KiB, 24 + 256 + 48 + 6 + 20 + 128, ...).
// The spec's 0x0D request table was lost; the fixture (A 33 / B 25 / C 16 rows,
// reserved 64 / 48 / 32, blocks {100,101,102} / {100,101} / {100}) is rebuilt
// from its text in config/ledgers/tp-local-worked.toml.
#include <catch2/catch.hpp>

#include "tools/ledger/capacity_pressure.hpp"
#include "tests/tools/ledger_fixture.hpp"

using namespace kvrt;
using namespace kvrt::ledger_test;

namespace {
constexpr uint64_t kRow = 32ull * 4 * 128 * (2 + 2);  // 0x02A Loop 2: B_row,rank [bytes / token]
constexpr uint64_t kP = 16;                           // [rows / block]

std::vector<uint64_t> ids(const std::vector<PhysicalBlockId>& v) {
  std::vector<uint64_t> out;
  for (auto p : v) out.push_back(p.value);
  return out;
}
}  // namespace

TEST_CASE("row ledger keeps K and V widths per group (0x02A)", "[ledger]") {
  auto one = derive_row_ledger(load_layout("single-group-tp2.toml"));
  REQUIRE(one.ok());
  CHECK(one->row_bytes == kRow);
  CHECK(one->row_bytes == kib(64));
  CHECK(one->block_rows == kP);
  CHECK(one->block_bytes == mib(1));
  REQUIRE(one->groups.size() == 1);
  CHECK(one->groups[0].k_row_bytes == 32ull * 4 * 128 * 2);
  CHECK(one->groups[0].v_row_bytes == 32ull * 4 * 128 * 2);

  // Loop 4 refinement (0x03B): 48 KiB + 16 KiB, bundles of 768 KiB + 256 KiB.
  auto two = derive_row_ledger(load_layout("two-group-tp2.toml"));
  REQUIRE(two.ok());
  REQUIRE(two->groups.size() == 2);
  CHECK(two->groups[0].row_bytes == 24ull * 4 * 128 * 4);
  CHECK(two->groups[1].row_bytes == 8ull * 4 * 128 * 4);
  CHECK(two->groups[0].block_bytes == kib(768));
  CHECK(two->groups[1].block_bytes == kib(256));
  CHECK(two->row_bytes == kib(64));

  // Different K and V widths: the factor 2 disappears (FP16 K, FP8 V).
  auto mixed_layout = load_layout("single-group-tp2.toml");
  mixed_layout.cache_groups[0].v_dtype = ScalarType::fp8_e4m3;
  auto mixed = derive_row_ledger(mixed_layout);
  REQUIRE(mixed.ok());
  CHECK(mixed->groups[0].k_row_bytes == 32ull * 4 * 128 * 2);
  CHECK(mixed->groups[0].v_row_bytes == 32ull * 4 * 128 * 1);
  CHECK(mixed->row_bytes == 32ull * 4 * 128 * (2 + 1));

  auto wide = derive_row_ledger(load_layout("model-wide.toml"));
  REQUIRE(wide.ok());
  CHECK(wide->row_bytes == 32ull * 2 * 8 * 128 * 2);  // 131,072 bytes = 128 KiB
}

TEST_CASE("0x0D TP-local worked ledger, every figure", "[ledger]") {
  const LedgerReport r = worked_report();
  const ByteLedgers& l = r.ledgers;
  CHECK(l.row.row_bytes == kRow);
  CHECK(l.row.block_bytes == kP * kRow);

  // Request family (rebuilt fixture): A {100,101,102}, B {100,101}, C {100}.
  REQUIRE(r.input.requests.size() == 3);
  CHECK(ids(r.input.requests[0].blocks) == std::vector<uint64_t>{100, 101, 102});
  CHECK(ids(r.input.requests[1].blocks) == std::vector<uint64_t>{100, 101});
  CHECK(ids(r.input.requests[2].blocks) == std::vector<uint64_t>{100});

  // Rectangular reference ledger.
  CHECK(l.rectangular.logical_rows == 33 + 25 + 16);
  CHECK(l.rectangular.logical_bytes == 74 * kib(64));
  CHECK(l.rectangular.logical_bytes == mib(4.625));
  CHECK(l.rectangular.reserved_rows == 64 + 48 + 32);
  CHECK(l.rectangular.reserved_bytes == 144 * kib(64));
  CHECK(l.rectangular.reserved_bytes == mib(9));
  CHECK(l.rectangular.slack_rows == 70);
  CHECK(l.rectangular.slack_bytes == 70 * kib(64));
  CHECK(l.rectangular.slack_bytes == mib(4.375));

  // Paged request view: six block-table entries.
  CHECK(l.request_view.reference_blocks == 3 + 2 + 1);
  CHECK(l.request_view.slot_rows == 6 * 16);
  CHECK(l.request_view.capacity_bytes == mib(6));
  CHECK(l.request_view.tail_rows == 96 - 74);
  CHECK(l.request_view.tail_bytes == (96 - 74) * kib(64));
  CHECK(l.request_view.tail_bytes == mib(1.375));

  // Unique physical: union {100, 101, 102}; 16 + 16 + 1 materialized rows.
  CHECK(ids(l.unique.block_ids) == std::vector<uint64_t>{100, 101, 102});
  CHECK(l.unique.unique_blocks == 3);
  CHECK(l.unique.full_blocks == 2);
  CHECK(l.unique.materialized_rows == 16 + 16 + 1);
  CHECK(l.unique.materialized_bytes == 33 * kib(64));
  CHECK(l.unique.materialized_bytes == mib(2.0625));
  CHECK(l.unique.slot_rows == 3 * 16);
  CHECK(l.unique.capacity_bytes == mib(3));
  CHECK(l.unique.tail_rows == 15);
  CHECK(l.unique.tail_bytes == 15 * kib(64));
  CHECK(l.unique.tail_bytes == mib(0.9375));

  // Savings: 3 MiB reference capacity avoided, 2.5625 MiB payload deduplicated.
  CHECK(l.savings.avoided_blocks == 6 - 3);
  CHECK(l.savings.avoided_bytes == mib(3));
  CHECK(l.savings.deduplicated_rows == 74 - 33);
  CHECK(l.savings.deduplicated_bytes == static_cast<int64_t>(mib(2.5625)));

  // Pool: 8 provisioned = 3 live + 5 idle, 1 MiB blocks.
  CHECK(l.pool.provisioned_bytes == 8 * mib(1));
  CHECK(l.pool.live_bytes == 3 * mib(1));
  CHECK(l.pool.idle_bytes == 5 * mib(1));

  // Metadata: 6*4 + 8*32 + 2*24 + 3*2 + 5*4 + 128.
  const MetadataLedger& m = l.metadata;
  CHECK(m.request_map_bytes == 6 * 4);
  CHECK(m.descriptor_bytes == 8 * 32);
  CHECK(m.cached_hash_bytes == 2 * 24);
  CHECK(m.valid_tail_bytes == 3 * 2);
  CHECK(m.free_queue_bytes == 5 * 4);
  CHECK(m.fixed_bytes == 128);
  CHECK(m.total_bytes == 24 + 256 + 48 + 6 + 20 + 128);
  CHECK(m.total_bytes == 482);

  // The figures print exactly as the spec writes them.
  CHECK(format_mib(l.rectangular.logical_bytes) == "4.625");
  CHECK(format_mib(l.unique.materialized_bytes) == "2.0625");
  CHECK(format_mib(l.unique.tail_bytes) == "0.9375");
  CHECK(format_mib(l.request_view.tail_bytes) == "1.375");
  CHECK(format_mib(static_cast<uint64_t>(l.savings.deduplicated_bytes)) == "2.5625");
}

TEST_CASE("0x0D identities: 9 / 6 / 3 MiB and the deduplicated payload", "[ledger]") {
  const LedgerReport r = worked_report();
  REQUIRE(reconcile_ledgers(r.ledgers).ok());
  struct Expected {
    LedgerIdentity id;
    uint64_t total, first, second;
  };
  const Expected expected[] = {
      {LedgerIdentity::reserved_is_logical_plus_slack, mib(9), mib(4.625), mib(4.375)},
      {LedgerIdentity::request_view_is_logical_plus_tail, mib(6), mib(4.625), mib(1.375)},
      {LedgerIdentity::unique_capacity_is_materialized_plus_tail, mib(3), mib(2.0625), mib(0.9375)},
      {LedgerIdentity::request_view_is_unique_capacity_plus_avoided, mib(6), mib(3), mib(3)},
      {LedgerIdentity::logical_is_materialized_plus_deduplicated, mib(4.625), mib(2.0625), mib(2.5625)},
      {LedgerIdentity::pool_is_live_plus_idle, mib(8), mib(3), mib(5)},
  };
  REQUIRE(r.identities.size() == std::size(expected));
  for (size_t i = 0; i < r.identities.size(); ++i) {
    INFO(to_string(expected[i].id));
    CHECK(r.identities[i].identity == expected[i].id);
    CHECK(r.identities[i].holds());
    CHECK(r.identities[i].total_bytes == static_cast<int64_t>(expected[i].total));
    CHECK(r.identities[i].first_bytes == static_cast<int64_t>(expected[i].first));
    CHECK(r.identities[i].second_bytes == static_cast<int64_t>(expected[i].second));
  }
}

TEST_CASE("a one-field ledger mistake names the identity it breaks", "[ledger]") {
  const ByteLedgers good = worked_report().ledgers;
  const uint64_t B = good.row.row_bytes;
  auto broken = [](const ByteLedgers& l) {
    const Status s = reconcile_ledgers(l);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::ledger_identity_broken);
    return s.error().field;
  };

  // The 0x0D negative fixture: all six references counted as six unique blocks,
  // propagated consistently to slots and capacity bytes.
  ByteLedgers six = good;
  six.unique.unique_blocks = 6;
  six.unique.slot_rows = 6 * kP;
  six.unique.capacity_bytes = 6 * kP * B;
  CHECK(broken(six) == to_string(LedgerIdentity::unique_capacity_is_materialized_plus_tail));

  ByteLedgers slack = good;
  slack.rectangular.slack_rows += 1;
  CHECK(broken(slack) == to_string(LedgerIdentity::reserved_is_logical_plus_slack));

  ByteLedgers view_tail = good;
  view_tail.request_view.tail_rows -= 1;
  CHECK(broken(view_tail) == to_string(LedgerIdentity::request_view_is_logical_plus_tail));

  ByteLedgers avoided = good;
  avoided.savings.avoided_rows += kP;
  CHECK(broken(avoided) == to_string(LedgerIdentity::request_view_is_unique_capacity_plus_avoided));

  ByteLedgers dedup = good;
  dedup.savings.deduplicated_rows -= 7;  // "B's seven hidden rows are waste": they are not
  CHECK(broken(dedup) == to_string(LedgerIdentity::logical_is_materialized_plus_deduplicated));

  ByteLedgers idle = good;
  idle.pool.idle_blocks += 1;
  CHECK(broken(idle) == to_string(LedgerIdentity::pool_is_live_plus_idle));

  ByteLedgers live = good;  // pool sums still add up, but live != unique
  live.pool.live_blocks += 1;
  live.pool.idle_blocks -= 1;
  live.pool.live_bytes += good.row.block_bytes;
  live.pool.idle_bytes -= good.row.block_bytes;
  CHECK(broken(live) == to_string(LedgerIdentity::live_is_unique));

  ByteLedgers bytes = good;  // every additive identity still holds in bytes
  bytes.unique.tail_bytes += B;
  bytes.unique.capacity_bytes += B;
  bytes.savings.avoided_bytes -= B;
  CHECK(broken(bytes) == to_string(LedgerIdentity::bytes_are_rows_times_row_bytes));

  ByteLedgers row = good;
  row.row.groups[0].v_row_bytes -= 1;
  CHECK(broken(row) == to_string(LedgerIdentity::row_is_sum_of_groups));

  ByteLedgers meta = good;
  meta.metadata.total_bytes = 481;
  CHECK(broken(meta) == to_string(LedgerIdentity::metadata_is_sum_of_records));

  ByteLedgers hashes = good;  // hashing all three blocks, including the partial one
  hashes.metadata.counts.cached_hashes = 3;
  hashes.metadata.cached_hash_bytes = 3 * 24;
  hashes.metadata.total_bytes += 24;
  CHECK(broken(hashes) == to_string(LedgerIdentity::metadata_is_sum_of_records));
}

TEST_CASE("without sharing the unique ledger equals the request view", "[ledger]") {
  LedgerScenario s = worked_scenario();
  s.shared_prefix = false;
  auto r = build_ledger_report(s, load_layout("single-group-tp2.toml"));
  REQUIRE(r.ok());
  const ByteLedgers& l = r->ledgers;
  CHECK(ids(r->input.requests[0].blocks) == std::vector<uint64_t>{100, 101, 102});
  CHECK(ids(r->input.requests[1].blocks) == std::vector<uint64_t>{103, 104});
  CHECK(ids(r->input.requests[2].blocks) == std::vector<uint64_t>{105});
  CHECK(l.unique.unique_blocks == l.request_view.reference_blocks);
  CHECK(l.unique.capacity_bytes == l.request_view.capacity_bytes);
  CHECK(l.unique.materialized_bytes == l.rectangular.logical_bytes);
  CHECK(l.unique.tail_bytes == l.request_view.tail_bytes);
  CHECK(l.savings.avoided_bytes == 0);
  CHECK(l.savings.deduplicated_bytes == 0);
  CHECK(l.pool.idle_blocks == 8 - 6);
  // Full private blocks: A 2, B 1, C 1 -> 4 hashes; two idle blocks.
  CHECK(l.metadata.total_bytes == 6 * 4 + 8 * 32 + 4 * 24 + 3 * 2 + 2 * 4 + 128);
  CHECK(reconcile_ledgers(l).ok());
}

TEST_CASE("0x02F arena: F_ext = 1/3, 2.5 MiB rejected contiguously, three blocks accepted", "[ledger]") {
  const LedgerReport r = worked_report();
  const ArenaReport& a = r.arena;
  CHECK(a.arena.arena_bytes() == mib(12));
  CHECK(a.arena.allocated_bytes() == mib(9));
  REQUIRE(a.arena.free_extents().size() == 2);
  CHECK(a.arena.free_extents()[0] == Extent{mib(4), mib(1)});
  CHECK(a.arena.free_extents()[1] == Extent{mib(10), mib(2)});
  CHECK(a.fragmentation.state == FragmentationState::applicable);
  CHECK(a.fragmentation.total_free_bytes == mib(3));
  CHECK(a.fragmentation.largest_free_bytes == mib(2));
  REQUIRE(a.fragmentation.ratio.has_value());
  CHECK(*a.fragmentation.ratio == ExactFraction{1, 3});  // 1 - 2/3
  CHECK(a.fragmentation.ratio->to_string() == "1/3");
  CHECK_FALSE(a.contiguous.accepted());
  CHECK(a.contiguous.candidate_bytes == mib(2.5));
  CHECK(a.block_pool.blocks_needed == 3);  // ceil(2.5 MiB / 1 MiB)
  CHECK(a.block_pool.free_blocks == 5);
  CHECK(a.block_pool.accepted());

  auto fits = a.arena.fit_contiguous(mib(2));  // the 2 MiB extent holds a 2 MiB candidate
  REQUIRE(fits.ok());
  REQUIRE(fits->accepted());
  CHECK(fits->placement->offset == mib(10));

  // A full arena has no free-extent distribution: not_applicable, no ratio.
  auto full = ContiguousArena::create(mib(12), {{0, mib(12)}});
  REQUIRE(full.ok());
  CHECK(full->external_fragmentation().state == FragmentationState::not_applicable);
  CHECK_FALSE(full->external_fragmentation().ratio.has_value());
  CHECK_FALSE(full->fit_contiguous(1)->accepted());

  // Adjacent free space is one extent: F_ext = 0, not a fragmented arena.
  auto one_hole = ContiguousArena::create(mib(12), {{mib(3), mib(9)}});
  REQUIRE(one_hole.ok());
  CHECK(one_hole->free_extents().size() == 1);
  CHECK(*one_hole->external_fragmentation().ratio == ExactFraction{0, 1});

  auto overlap = ContiguousArena::create(mib(12), {{0, mib(4)}, {mib(3), mib(2)}});
  REQUIRE_FALSE(overlap.ok());
  CHECK(overlap.error().field == "allocated[1]");
  auto outside = ContiguousArena::create(mib(12), {{mib(11), mib(2)}});
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().field == "allocated[0]");
  CHECK_FALSE(fit_block_pool(0, mib(1), 5).ok());
  CHECK_FALSE(fit_block_pool(mib(1), 0, 5).ok());
  CHECK_FALSE(fit_block_pool(mib(6), mib(1), 5)->accepted());
}

TEST_CASE("0x02G expected tail waste: 7.5 slots = 480 KiB at P = 16", "[ledger]") {
  CHECK(expected_tail_waste_rows(16) == ExactFraction{15, 2});
  CHECK(expected_tail_waste_rows(16).to_string() == "7.5");
  CHECK(expected_tail_waste_bytes(16, kib(64)) == ExactFraction{kib(480), 1});
  CHECK(worked_report().expected_tail_bytes == ExactFraction{kib(480), 1});
  // Independent derivation: E[P - J] with J uniform on {1..P}, summed directly.
  for (uint32_t p : {1u, 2u, 3u, 4u, 7u, 16u, 32u, 64u}) {
    uint64_t unused_sum = 0;
    for (uint32_t j = 1; j <= p; ++j) unused_sum += p - j;
    INFO("P = " << p);
    CHECK(expected_tail_waste_rows(p) == ExactFraction::of(unused_sum, p));
    CHECK(expected_tail_waste_bytes(p, 3) == ExactFraction::of(unused_sum * 3, p));
  }
  CHECK(expected_tail_waste_rows(1) == ExactFraction{0, 1});
}

TEST_CASE("0x0D model-wide capacity pressure", "[ledger]") {
  auto row = derive_row_ledger(load_layout("model-wide.toml"));
  REQUIRE(row.ok());
  CHECK(row->row_bytes == kib(128));
  CHECK(row->block_bytes == 16 * kib(128));
  CHECK(row->block_bytes == mib(2));
  CHECK(blocks_for_tokens(4096, 16) == 4096 / 16);
  auto c = capacity_pressure(*row, {.prompt_tokens = 4096, .prefix_hit_tokens = 3072, .generated_tokens = 1024});
  REQUIRE(c.ok());
  CHECK(c->prompt_blocks == 256);
  CHECK(c->prompt_bytes == 4096 * kib(128));
  CHECK(c->prompt_bytes == mib(512));
  CHECK(c->hit_blocks == 3072 / 16);
  CHECK(c->hit_blocks == 192);
  CHECK(c->prefill_tokens_skipped == 3072);
  CHECK(c->new_prompt_tokens == 4096 - 3072);
  CHECK(c->decode_rows_ordinary == 1023);  // the final emitted token is never fed back
  CHECK(c->decode_rows_repair == 1024);
  CHECK(c->decode_bytes_repair == 1024 * kib(128));
  CHECK(c->decode_bytes_repair == mib(128));
  CHECK(c->decode_bytes_ordinary == 1023 * kib(128));
  CHECK(c->decode_bytes_ordinary == mib(127.875));
  CHECK(decode_growth_rows(0, DecodeStop::ordinary_stop) == 0);

  CHECK(capacity_pressure(*row, {.prompt_tokens = 0}).error().field == "prompt_tokens");
  CHECK(capacity_pressure(*row, {.prompt_tokens = 10, .prefix_hit_tokens = 11}).error().field == "prefix_hit_tokens");
}

TEST_CASE("0x09B block-size sensitivity and full-block hits", "[ledger]") {
  const LedgerScenario base = worked_scenario();
  const CacheLayoutManifest layout = load_layout("single-group-tp2.toml");
  struct Case {
    uint32_t p;
    uint64_t unique_tail_rows, map_entries, descriptors;
  };
  // unique tail = ceil(33/P)*P - 33; maps = sum ceil(T_r/P); 128 slots / P descriptors.
  for (Case c : {Case{4, 3, 9 + 7 + 4, 32}, Case{8, 7, 5 + 4 + 2, 16}, Case{16, 15, 3 + 2 + 1, 8},
                 Case{32, 31, 2 + 1 + 1, 4}, Case{64, 31, 1 + 1 + 1, 2}}) {
    INFO("P = " << c.p);
    LedgerScenario s = base;
    s.pool_blocks = 128 / c.p;
    auto r = build_ledger_report(s, with_block_rows(layout, c.p));
    REQUIRE(r.ok());
    CHECK(r->ledgers.unique.tail_rows == c.unique_tail_rows);
    CHECK(r->ledgers.unique.tail_bytes == c.unique_tail_rows * kib(64));
    CHECK(r->ledgers.metadata.counts.request_block_refs == c.map_entries);
    CHECK(r->ledgers.metadata.counts.pool_blocks == c.descriptors);
  }
  // The spec's words: 192 KiB at P=4, 1.9375 MiB at P=32.
  CHECK(3 * kib(64) == kib(192));
  CHECK(31 * kib(64) == mib(1.9375));

  // Logits-capped full-block hits across B (25) and C (16): 36, 32, 16, 0, 0
  // tokens; recomputed prompt tail 5, 9, 25, 41, 41.
  const uint32_t ps[] = {4, 8, 16, 32, 64};
  const uint64_t capped[] = {36, 32, 16, 0, 0};
  for (size_t i = 0; i < 5; ++i) {
    const uint64_t hit = full_block_hit_rows(25, ps[i], PrefixHitCap::logits_capped) +
                         full_block_hit_rows(16, ps[i], PrefixHitCap::logits_capped);
    CHECK(hit == capped[i]);
    CHECK(25 + 16 - hit == std::vector<uint64_t>{5, 9, 25, 41, 41}[i]);
  }
  CHECK(full_block_hit_rows(25, 16, PrefixHitCap::uncapped) + full_block_hit_rows(16, 16, PrefixHitCap::uncapped) ==
        16 + 16);
}
