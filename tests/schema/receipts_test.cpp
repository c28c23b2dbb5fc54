// Receipt value types: the canonical receipt digests of
// 0x07G and 0x08G and the frontier coverage predicate of 0x06D.
#include <catch2/catch.hpp>

#include "tests/schema/codec_fixtures.hpp"

using namespace kvrt;
using kvrt::test::filled;

TEST_CASE("a prefix-match receipt digest covers every field but itself", "[receipts]") {
  const auto base = filled<PrefixMatchReceipt>();
  const Sha256Digest d = canonical_digest(base);
  CHECK(d == canonical_digest(filled<PrefixMatchReceipt>()));  // deterministic

  auto stamped = base;
  stamped.receipt_sha256 = d;  // storing the digest does not change it
  CHECK(canonical_digest(stamped) == d);

  // Each mutation below touches one field; every one must move the digest.
  std::vector<PrefixMatchReceipt> variants(14, base);
  variants[0].request_id.value += 1;
  variants[1].request_generation.value += 1;
  variants[2].index_snapshot_id.value += 1;
  variants[3].compatibility_manifest_sha256.bytes[31] ^= 1;
  variants[4].namespace_id += "x";
  variants[5].namespace_generation.value += 1;
  variants[6].policy_id += "x";
  variants[7].logits_path = LogitsPath::logits_required;
  variants[8].runtime_hit_tokens += 1;
  variants[9].prompt_rows_recomputed += 1;
  variants[10].matched_group_handles[1].handles[0].generation.value += 1;
  variants[11].matched_group_handles.pop_back();
  variants[12].copy_valid_partial_rows += 1;
  variants[13].lease_id.value += 1;
  for (size_t i = 0; i < variants.size(); ++i) {
    INFO("variant " << i);
    CHECK(canonical_digest(variants[i]) != d);
  }
}

TEST_CASE("a radix handoff digest binds the scheduler owner and every field", "[receipts]") {
  // The 0x08G req-handoff example.
  RadixHandoffLabReceipt r;
  r.request_id = RequestId{7};
  r.request_generation = RequestGeneration{4};
  r.tree_version = TreeVersion{18};
  r.prompt_tokens = 7;
  r.matched_tokens = 6;
  for (uint64_t s : {1, 2, 3, 4, 11, 12}) r.prefix_slot_ids.push_back(TokenSlotId{s});
  for (uint64_t n : {2, 3, 4}) r.path_node_ids.push_back(RadixNodeId{n});
  r.terminal_node_id = RadixNodeId{4};
  r.suffix_interval = TokenInterval{6, 7};
  r.lock_lease_id = LeaseId{18};
  CHECK(r.suffix_interval.end - r.suffix_interval.begin == r.prompt_tokens - r.matched_tokens);
  CHECK(r.prefix_slot_ids.size() == r.matched_tokens);  // page size 1: one slot per token
  CHECK(RadixHandoffLabReceipt::kSchedulerOwner == "M5.2");

  const Sha256Digest d = r.canonical_digest();
  auto reordered = r;
  std::swap(reordered.path_node_ids[0], reordered.path_node_ids[1]);
  CHECK(reordered.canonical_digest() != d);  // path order is identity
  auto released = r;
  released.lock_required_until_scheduler_disposition = false;
  CHECK(released.canonical_digest() != d);
  auto other_suffix = r;
  other_suffix.suffix_interval.end = 8;
  CHECK(other_suffix.canonical_digest() != d);
  auto stamped = r;
  stamped.receipt_sha256 = d;
  CHECK(stamped.canonical_digest() == d);
}

TEST_CASE("a mapped frontier covers only its ready generation and mapped rows", "[receipts]") {
  // 0x06F fixture: P_tokens = 4 tokens/page; D grows to 9 tokens with pages q=0..2.
  MappedFrontierReceipt r;
  r.request_generation = RequestGeneration{3};
  r.tokens_per_page = 4;
  r.mapped_pages = 3;
  r.target_tokens = 9;
  r.ready_before_use = true;
  CHECK(covers(r, RequestGeneration{3}, 9));
  CHECK(covers(r, RequestGeneration{3}, 12));        // 3 pages x 4 tokens
  CHECK_FALSE(covers(r, RequestGeneration{3}, 13));  // page q=3 is not mapped
  CHECK_FALSE(covers(r, RequestGeneration{2}, 1));   // a previous owner of the slot
  r.ready_before_use = false;                        // asynchronous map still in flight
  CHECK_FALSE(covers(r, RequestGeneration{3}, 1));
}

TEST_CASE("refcount deltas report the signed change", "[receipts]") {
  // 0x05B: the old tail bundle goes from 2 references to 1.
  RefcountDelta old_tail{PhysicalBlockHandle{PoolId{0}, CacheGroupId{0}, PhysicalBlockId{1002}, BlockGeneration{9}}, 2,
                         1};
  CHECK((int64_t(old_tail.refs_after) - int64_t(old_tail.refs_before)) == -1);
  RefcountDelta new_tail{PhysicalBlockHandle{PoolId{0}, CacheGroupId{0}, PhysicalBlockId{1003}, BlockGeneration{12}}, 0,
                         1};
  CHECK((int64_t(new_tail.refs_after) - int64_t(new_tail.refs_before)) == 1);
}
