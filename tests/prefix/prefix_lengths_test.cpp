// The worked numbers of 0x07A-0x07E and the 0x09B staircase, read from real
// lookups over an allocator, each compared with the spec's arithmetic
// written out here: the four lengths, N_new and the capacity ledger, and the
// partial-tail copy-rows intent carried out by the allocator's copy-on-write.
#include <algorithm>
#include <catch2/catch.hpp>

#include "services/common/units.hpp"
#include "tests/prefix/prefix_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// S_runtime_full = P floor(min(S_sem, S_indexed, S_prompt - 1) / P)   (0x07A)
uint32_t spec_full_runtime(uint32_t sem, uint32_t indexed, uint32_t prompt, uint32_t P) {
  return P * (std::min({sem, indexed, prompt - 1}) / P);
}

void check_receipt_lengths(const PrefixMatch& m, const PrefixLengths& want) {
  CHECK(m.lengths == want);
  CHECK(m.receipt.prompt_tokens == want.prompt);
  CHECK(m.receipt.semantic_match_tokens == want.semantic);
  CHECK(m.receipt.indexed_match_tokens == want.indexed);
  CHECK(m.receipt.reuse_cap_tokens == want.cap);
  CHECK(m.receipt.runtime_hit_tokens == want.runtime);
  CHECK(m.receipt.prompt_rows_recomputed == want.recompute);
}

PrefixRigOptions loop6_options(ReusePolicy policy = ReusePolicy::full_block) {
  PrefixRigOptions o;
  o.groups = 2;                       // every hit covers both cache groups (0x07C)
  o.row_bytes_per_group = 32 * 1024;  // B_row = 64 KiB per token over the two groups
  o.policy = policy;
  return o;
}

}  // namespace

TEST_CASE("0x07E: 48 cached tokens, 48-token prompt: 32 reused, 16 recomputed, one new bundle", "[prefix][lengths]") {
  PrefixRig rig(loop6_options());
  const std::vector<TokenId> a = iota_tokens(48);
  rig.produce(a);
  const PrefixMatch m = rig.lookup(a);
  // P = 16, S_prompt = S_sem = S_indexed = 48, S_cap = 47.
  const uint32_t runtime = spec_full_runtime(48, 48, 48, 16);
  REQUIRE(runtime == 32);
  check_receipt_lengths(m, PrefixLengths{48, 48, 48, 47, runtime, 48 - runtime});
  CHECK_FALSE(m.copy_intent.has_value());
  CHECK(m.receipt.new_block_bundles == ceil_div(48 - runtime, 16));  // = 1
  CHECK(m.receipt.new_block_bundles == 1);
  REQUIRE(m.receipt.matched_group_handles.size() == 2);
  for (const auto& b : m.receipt.matched_group_handles) CHECK(b.handles.size() == 2);
  CHECK(m.hit_handles.size() == 4);
  CHECK(m.receipt.copy_valid_partial_rows == 0);
  CHECK(m.receipt.policy_id == "kvrt.full_block.v1");
}

TEST_CASE("0x07E: 50-token prompt over three cached blocks: 48 reused, 2 recomputed, 128 KiB useful, 1 MiB new",
          "[prefix][lengths]") {
  PrefixRig rig(loop6_options());
  rig.produce(iota_tokens(48));
  const PrefixMatch m = rig.lookup(iota_tokens(50));
  const uint32_t runtime = spec_full_runtime(48, 48, 50, 16);
  REQUIRE(runtime == 48);
  check_receipt_lengths(m, PrefixLengths{50, 48, 48, 49, runtime, 2});
  CHECK(m.receipt.new_block_bundles == 1);
  // Separate ledgers (0x07E): two useful rows at 64 KiB against one 1 MiB bundle.
  const uint64_t row = 64 * 1024;
  const ReuseCapacityLedger ledger = capacity_ledger(m.receipt, row);
  CHECK(ledger.useful_recompute_bytes == 2 * row);
  CHECK(ledger.useful_recompute_bytes == 128 * 1024);
  CHECK(ledger.new_capacity_bytes == 16 * row);
  CHECK(ledger.new_capacity_bytes == 1024 * 1024);
  CHECK(ledger.copy_payload_bytes == 0);
}

TEST_CASE("0x07E: a one-block prompt (S_prompt = P = 16) reuses nothing", "[prefix][lengths]") {
  PrefixRig rig(loop6_options());
  rig.produce(iota_tokens(48));
  const PrefixMatch m = rig.lookup(iota_tokens(16));
  check_receipt_lengths(m, PrefixLengths{16, 16, 16, 15, spec_full_runtime(16, 16, 16, 16), 16});
  CHECK(m.lengths.runtime == 0);
  CHECK(m.receipt.new_block_bundles == 1);
  CHECK(m.receipt.matched_group_handles.empty());
  // Without the logits cap (a prefill-only request) the same block is reused.
  const PrefixMatch nl = rig.lookup(iota_tokens(16), {}, LogitsPath::no_logits);
  CHECK(nl.lengths.cap == 16);
  CHECK(nl.lengths.runtime == 16);
  CHECK(nl.receipt.new_block_bundles == 0);
}

TEST_CASE("0x07B: a change at position 37 ends S_sem at 37 and the full-block hit at 32 rows", "[prefix][lengths]") {
  const std::vector<TokenId> a = iota_tokens(48);
  std::vector<TokenId> b = a;
  b[37] = 9999;
  SECTION("full-block policy") {
    PrefixRig rig(loop6_options());
    rig.produce(a);
    const PrefixMatch m = rig.lookup(b);
    check_receipt_lengths(m, PrefixLengths{48, 37, 32, 47, spec_full_runtime(37, 32, 48, 16), 16});
    CHECK(m.lengths.runtime == 32);
  }
  SECTION("partial-tail policy: five more rows through a copy-rows intent") {
    PrefixRig rig(loop6_options(ReusePolicy::immutable_partial_tail));
    rig.produce(a);
    const PrefixMatch m = rig.lookup(b);
    check_receipt_lengths(m, PrefixLengths{48, 37, 37, 47, 37, 11});
    CHECK(m.receipt.copy_valid_partial_rows == 5);
    CHECK(m.receipt.matched_group_handles.size() == 3);  // two full bundles + A's block 2, rows [32, 37)
    CHECK(m.receipt.new_block_bundles == ceil_div(48, 16) - 32 / 16);
  }
}

TEST_CASE("0x09B staircase: capped full-block hits 36, 32, 16, 0, 0, partial tails 39", "[prefix][lengths]") {
  // A's 33-token path is cached; B (25) and C (16) are exact prefixes of A.
  const std::vector<uint32_t> sizes = {4, 8, 16, 32, 64};
  const std::vector<uint32_t> spec_full_hits = {36, 32, 16, 0, 0};
  const std::vector<uint32_t> spec_recomputed = {5, 9, 25, 41, 41};
  const std::vector<TokenId> a = iota_tokens(33);
  const std::vector<TokenId> b(a.begin(), a.begin() + 25), c(a.begin(), a.begin() + 16);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const uint32_t P = sizes[k];
    INFO("P_a = " << P);
    {
      PrefixRigOptions o;
      o.block_tokens = P;
      PrefixRig rig(o);
      rig.produce(a);
      const PrefixMatch mb = rig.lookup(b), mc = rig.lookup(c);
      const uint32_t hits = mb.lengths.runtime + mc.lengths.runtime;
      // H_r^{full,gen} = P floor((T_r - 1) / P), summed over B and C.
      CHECK(hits == P * ((25 - 1) / P) + P * ((16 - 1) / P));
      CHECK(hits == spec_full_hits[k]);
      CHECK(mb.lengths.recompute + mc.lengths.recompute == spec_recomputed[k]);
    }
    {
      PrefixRigOptions o;
      o.block_tokens = P;
      o.policy = ReusePolicy::immutable_partial_tail;
      PrefixRig rig(o);
      rig.produce(a, {}, /*publish_tail=*/true);
      const PrefixMatch mb = rig.lookup(b), mc = rig.lookup(c);
      CHECK(mb.lengths.runtime == 24);  // capped: T_B - 1
      CHECK(mc.lengths.runtime == 15);  // capped: T_C - 1
      CHECK(mb.lengths.runtime + mc.lengths.runtime == 39);
      CHECK(mb.receipt.copy_valid_partial_rows == 24 % P);
      CHECK(mc.receipt.copy_valid_partial_rows == 15 % P);
    }
  }
}

// 0x07D's fixture table was lost from the spec; rebuilt from its text: a
// 50-token producer leaves three full blocks and an immutable 2-row tail; the
// same 50-token prompt then reuses 48 rows under the full-block policy and
// 49 under the partial-tail policy (S_cap = 49), the extra row arriving
// through a copy-rows intent.
TEST_CASE("0x07D: the partial design reuses one more row of a 50-token prompt, through the allocator's COW",
          "[prefix][lengths]") {
  PrefixRig rig(loop6_options(ReusePolicy::immutable_partial_tail));
  const std::vector<TokenId> a = iota_tokens(50);
  const RequestId producer = rig.produce(a, {}, /*publish_tail=*/true);  // 3 full blocks + a 2-row tail
  CHECK(rig.index.cached_blocks() == 4 * 2);
  const PrefixMatch m = rig.lookup(a);
  check_receipt_lengths(m, PrefixLengths{50, 50, 50, 49, 49, 1});
  CHECK(m.lengths.runtime == spec_full_runtime(50, 50, 50, 16) + 1);  // one more row than full blocks
  CHECK(m.receipt.copy_valid_partial_rows == 1);
  CHECK(m.receipt.new_block_bundles == 1);
  REQUIRE(m.receipt.matched_group_handles.size() == 4);
  const auto producer_tail = rig.alloc.table(producer, 0).value()[3];
  CHECK(m.receipt.matched_group_handles[3].handles[0] == producer_tail);
  REQUIRE(m.copy_intent.has_value());
  CHECK(m.copy_intent->logical_block == 3);
  CHECK(m.copy_intent->rows == 1);
  CHECK(m.copy_intent->source == m.receipt.matched_group_handles[3].handles);

  // The intent, carried out by the allocator: map the 49 reused rows (the
  // tail bundle by reference), then the first divergent write copies the one
  // shared row into a private bundle (0x05C) and writes row 49.
  Result<AllocationReceipt> r = rig.alloc.allocate(AllocateArgs{m.lengths.runtime, m.hit_handles, {}});
  REQUIRE(r.ok());
  REQUIRE(r->outcome == AllocationOutcome::committed);
  CHECK(r->new_physical_blocks == 0);
  const RequestId consumer = r->request_id;
  r = rig.alloc.append(AppendArgs{rig.alloc.fence(consumer).value(), {}, {}});
  REQUIRE(r.ok());
  CHECK(r->append_path == AppendPath::copy_on_write);
  CHECK(r->copied_rows == m.receipt.copy_valid_partial_rows);
  CHECK(r->new_physical_blocks / 2 == m.receipt.new_block_bundles);
  CHECK(r->copy_payload_bytes == capacity_ledger(m.receipt, 64 * 1024).copy_payload_bytes);
  rig.absorb();
  REQUIRE(rig.alloc.validate().ok());
  REQUIRE(rig.index.validate(&rig.alloc).ok());
  // The producer's tail kept its identity: it is immutable under its key.
  CHECK(rig.alloc.block(producer_tail).value().valid_rows == 2);
  CHECK(rig.lookup(a).lengths.runtime == 49);
}
