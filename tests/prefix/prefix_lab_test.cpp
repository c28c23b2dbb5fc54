// Failure lab of 0x07G (its case table was lost from the spec; the cases are
// rebuilt from 0x07A-0x07F and the 0x01A legal order): every malformed or
// unsafe request is rejected with a typed error naming the field, and a
// rejected operation leaves the index's and the allocator's state digests as
// they were; the unsafe hits that are not errors (cross-salt, stale
// generation, partial group, forged digests) simply do not hit.
#include <catch2/catch.hpp>

#include "tests/prefix/prefix_fixture.hpp"
#include "tests/support/identity_fixtures.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct Digests {
  Sha256Digest index;
  StateDigest allocator;
  friend bool operator==(const Digests&, const Digests&) = default;
};
Digests digests(const PrefixRig& rig) { return Digests{rig.index.state_digest(), rig.alloc.state_digest()}; }

template <class R>
void require_rejected(const PrefixRig& rig, const Digests& before, const R& result, ErrorCode code,
                      const std::string& field) {
  REQUIRE_FALSE(result.ok());
  INFO(result.error().describe());
  CHECK(result.error().code == code);
  CHECK(result.error().field == field);
  CHECK(digests(rig) == before);
  CHECK(rig.index.validate(&rig.alloc).ok());
}

uint32_t hit_blocks(const PrefixRig& rig, std::span<const TokenId> tokens, const RequestExtras& extras = {}) {
  return rig.lookup(tokens, extras).full_hit_blocks;
}

}  // namespace

TEST_CASE("lab: cross-salt and cross-adapter requests do not hit", "[prefix][lab]") {
  PrefixRig rig;
  const std::vector<TokenId> t = iota_tokens(48);
  const RequestExtras s1 = salted("s1"), s2 = salted("s2"), lora = with_lora("adapter");
  rig.produce(t, s1);
  CHECK(hit_blocks(rig, t, s1) == 2);
  CHECK(hit_blocks(rig, t, s2) == 0);
  CHECK(hit_blocks(rig, t) == 0);
  RequestExtras s1_lora = s1;
  s1_lora.lora_name = lora.lora_name;
  CHECK(hit_blocks(rig, t, s1_lora) == 0);
  rig.produce(t, lora);
  CHECK(hit_blocks(rig, t, lora) == 2);
  CHECK(hit_blocks(rig, t) == 0);
}

TEST_CASE("lab: a forced digest collision is refused by the witness", "[prefix][lab]") {
  for (bool witness : {true, false}) {
    INFO("witness " << witness);
    PrefixRigOptions o;
    o.witness = witness;
    PrefixRig rig(o);
    const std::vector<TokenId> a = iota_tokens(48);
    const std::vector<TokenId> b = iota_tokens(48, 5000);
    const RequestId producer = rig.produce(a);
    const std::vector<BlockHash> forged = rig.chain(a);  // A's digests presented for B's tokens
    // Lookup: an equal digest over different token ids is not a hit.
    std::vector<PhysicalBlockHandle> handles;
    const uint32_t hits = rig.index.match_full_blocks(forged, 3, b, &rig.alloc, &handles);
    CHECK(hits == (witness ? 0u : 3u));
    // Publication: B's blocks under A's digests.
    const Result<AllocationReceipt> r = rig.alloc.allocate(AllocateArgs{48, {}, {}});
    REQUIRE(r.ok());
    const RequestId consumer = r->request_id;
    REQUIRE(rig.alloc.commit_rows(CommitRowsArgs{rig.alloc.fence(consumer).value(), 48}).ok());
    const BlockExtrasPlan plan = rig.plan();
    const Digests before = digests(rig);
    const auto published =
        rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{consumer, b, forged, &plan, 0, 3});
    if (witness) {
      require_rejected(rig, before, published, ErrorCode::digest_collision, "hashes[0]");
    } else {
      REQUIRE(published.ok());  // vLLM's assumption: equal digests mean equal blocks
      CHECK(published->duplicates == 3);
    }
    (void)producer;
  }
}

TEST_CASE("lab: stale generations never hit, and stale receipts are rejected", "[prefix][lab]") {
  PrefixRigOptions o;
  o.blocks = 6;
  PrefixRig rig(o);
  const std::vector<TokenId> a = iota_tokens(48);
  rig.release(rig.produce(a));  // 3 cached, evictable blocks
  const PrefixMatch m = rig.lookup(iota_tokens(64));
  REQUIRE(m.full_hit_blocks == 3);
  REQUIRE(rig.index.check_receipt(m.receipt, &rig.alloc).ok());

  // Another request takes every block: A's blocks are recycled under new
  // generations before the index has absorbed the evictions.
  const Result<AllocationReceipt> r = rig.alloc.allocate(AllocateArgs{6 * 16, {}, {}});
  REQUIRE(r.ok());
  REQUIRE(r->evicted_handles.size() == 3);
  CHECK(rig.index.match_full_blocks(rig.chain(a), 3, a, &rig.alloc, nullptr) == 0);  // generation fence
  const Result<PrefixMatch> stale_lookup = rig.index.lookup(
      rig.scope, PrefixLookupArgs{RequestId{0}, RequestGeneration{0}, a, nullptr, LogitsPath::logits_required, {}},
      &rig.alloc);
  REQUIRE(stale_lookup.ok());
  CHECK(stale_lookup->lengths.runtime == 0);
  const Status stale = rig.index.check_receipt(m.receipt, &rig.alloc);
  CHECK(stale.error().code == ErrorCode::stale_generation);
  CHECK(stale.error().field == "matched_group_handles[0].handles[0]");
  const AbsorbOutcome absorbed = rig.index.absorb(rig.alloc.drain_events());
  CHECK(absorbed.removed == 3);
  CHECK(rig.index.cached_blocks() == 0);
  CHECK(rig.index.check_receipt(m.receipt, nullptr).error().code == ErrorCode::stale_generation);
  CHECK(rig.index
            .absorb(std::vector<AllocatorEvent>{
                AllocatorEvent{AllocatorEvent::Kind::cache_key_evicted, r->evicted_handles[0], CacheKey{1ull << 32}}})
            .unknown == 1);
  REQUIRE(rig.index.validate(&rig.alloc).ok());
}

TEST_CASE("lab: receipt tampering and forged receipts", "[prefix][lab]") {
  PrefixRig rig;
  rig.produce(iota_tokens(48));
  const PrefixMatchReceipt good = rig.lookup(iota_tokens(48)).receipt;
  auto rejected = [&](PrefixMatchReceipt r, bool redigest, ErrorCode code, const std::string& field) {
    if (redigest) r.receipt_sha256 = canonical_digest(r);
    const Status s = rig.index.check_receipt(r, &rig.alloc);
    INFO((s.ok() ? std::string("accepted") : s.error().describe()));
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == code);
    CHECK(s.error().field == field);
  };
  PrefixMatchReceipt r = good;
  r.runtime_hit_tokens = 48;
  rejected(r, false, ErrorCode::receipt_tampered, "receipt_sha256");
  // Re-digested forgeries are caught by the receipt's own arithmetic.
  r = good;
  r.runtime_hit_tokens = 48;
  r.prompt_rows_recomputed = 0;
  rejected(r, true, ErrorCode::invalid_argument, "runtime_hit_tokens");  // exceeds S_cap = 47
  r = good;
  r.prompt_rows_recomputed = 15;
  rejected(r, true, ErrorCode::invalid_argument, "prompt_rows_recomputed");
  r = good;
  r.reuse_cap_tokens = 48;
  r.logits_path = LogitsPath::logits_required;
  rejected(r, true, ErrorCode::invalid_argument, "reuse_cap_tokens");
  r = good;
  r.matched_group_handles.pop_back();
  rejected(r, true, ErrorCode::path_slot_mismatch, "matched_group_handles");
  r = good;
  std::swap(r.matched_group_handles[0], r.matched_group_handles[1]);
  rejected(r, true, ErrorCode::path_slot_mismatch, "matched_group_handles[0]");
  r = good;
  r.new_block_bundles = 0;
  rejected(r, true, ErrorCode::invalid_argument, "new_block_bundles");
  r = good;
  r.copy_valid_partial_rows = 3;
  rejected(r, true, ErrorCode::invalid_argument, "copy_valid_partial_rows");
  r = good;
  r.index_snapshot_id = IndexSnapshotId{2};
  rejected(r, true, ErrorCode::invalid_argument, "index_snapshot_id");
  r = good;
  r.policy_id = "kvrt.immutable_partial_tail.v1";
  rejected(r, true, ErrorCode::invalid_argument, "policy_id");
  r = good;
  r.policy_id = "whatever";
  rejected(r, true, ErrorCode::invalid_argument, "policy_id");
  r = good;
  r.matched_group_handles[1].handles[0].generation.value += 1;
  rejected(r, true, ErrorCode::stale_generation, "matched_group_handles[1].handles[0]");
  CHECK(rig.index.check_receipt(good, &rig.alloc).ok());
}

TEST_CASE("lab: all-group lookup and contiguity", "[prefix][lab]") {
  PrefixRigOptions o;
  o.groups = 2;
  PrefixRig rig(o);
  const std::vector<TokenId> a = iota_tokens(64);
  const RequestId producer = rig.produce(a);
  CHECK(hit_blocks(rig, a) == 3);
  SECTION("a digest present for one group only ends the hit") {
    REQUIRE(rig.alloc.evict(rig.alloc.table(producer, 1).value()[1]).ok());  // group 1, block 1
    rig.absorb();
    CHECK(rig.index.present_keys().size() == 4 * 2 - 1);
    CHECK(hit_blocks(rig, a) == 1);
  }
  SECTION("blocks after the first miss are not candidates") {
    for (uint32_t g = 0; g < 2; ++g) REQUIRE(rig.alloc.evict(rig.alloc.table(producer, g).value()[0]).ok());
    rig.absorb();
    const auto digests = rig.chain(a);
    CHECK(rig.index.contains(digests[1]));
    CHECK(rig.index.contains(digests[2]));
    CHECK(hit_blocks(rig, a) == 0);
  }
  REQUIRE(rig.index.validate(&rig.alloc).ok());
}

TEST_CASE("lab: malformed publications change nothing", "[prefix][lab]") {
  PrefixRigOptions o;
  o.groups = 2;
  PrefixRig rig(o);
  const std::vector<TokenId> a = iota_tokens(40);
  const BlockExtrasPlan plan = rig.plan();
  const std::vector<BlockHash> chain = rig.chain(a);
  const Result<AllocationReceipt> allocated = rig.alloc.allocate(AllocateArgs{40, {}, {}});
  REQUIRE(allocated.ok());
  const RequestId id = allocated->request_id;
  Digests before = digests(rig);
  // Rows not committed yet: publication waits for the valid frontier.
  require_rejected(rig, before,
                   rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{id, a, chain, &plan, 0, 2}),
                   ErrorCode::row_not_valid, "end_block");
  REQUIRE(rig.alloc.commit_rows(CommitRowsArgs{rig.alloc.fence(id).value(), 40}).ok());
  before = digests(rig);
  require_rejected(rig, before,
                   rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{id, a, chain, &plan, 0, 3}),
                   ErrorCode::invalid_argument, "end_block");  // block 2 is partial
  require_rejected(rig, before,
                   rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{id, a, chain, &plan, 2, 1}),
                   ErrorCode::invalid_argument, "first_block");
  require_rejected(
      rig, before,
      rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{RequestId{99}, a, chain, &plan, 0, 2}),
      ErrorCode::unknown_request, "request");
  require_rejected(rig, before,
                   rig.index.publish_tail(rig.scope, rig.target(), PrefixTailArgs{id, a, chain, &plan, 2, 8}),
                   ErrorCode::invalid_argument, "policy");
  REQUIRE(rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{id, a, chain, &plan, 0, 2}).ok());
  // Republishing is idempotent; another identity for a tagged block is refused.
  const auto again = rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{id, a, chain, &plan, 0, 2});
  REQUIRE(again.ok());
  CHECK(again->already == 4);
  CHECK(again->published == 0);
  before = digests(rig);
  const std::vector<BlockHash> other = rig.chain(iota_tokens(40, 7000));
  require_rejected(rig, before,
                   rig.index.publish_blocks(rig.scope, rig.target(),
                                            PrefixPublishArgs{id, iota_tokens(40, 7000), other, &plan, 0, 1}),
                   ErrorCode::invalid_argument, "end_block");
  // An index over another shape of allocator.
  PrefixRig single;
  require_rejected(
      single, digests(single),
      single.index.publish_blocks(single.scope, rig.target(), PrefixPublishArgs{id, a, chain, &plan, 0, 2}),
      ErrorCode::invalid_argument, "allocator");
}

TEST_CASE("lab: partial tails only under their policy and within 0 < v < P", "[prefix][lab]") {
  PrefixRigOptions o;
  o.policy = ReusePolicy::immutable_partial_tail;
  PrefixRig rig(o);
  const std::vector<TokenId> a = iota_tokens(40);
  const RequestId id = rig.produce(a);
  const BlockExtrasPlan plan = rig.plan();
  const auto chain = rig.chain(a);
  const Digests before = digests(rig);
  require_rejected(rig, before,
                   rig.index.publish_tail(rig.scope, rig.target(), PrefixTailArgs{id, a, chain, &plan, 2, 0}),
                   ErrorCode::invalid_argument, "valid_rows");
  require_rejected(rig, before,
                   rig.index.publish_tail(rig.scope, rig.target(), PrefixTailArgs{id, a, chain, &plan, 2, 16}),
                   ErrorCode::invalid_argument, "valid_rows");
  require_rejected(rig, before,
                   rig.index.publish_tail(rig.scope, rig.target(), PrefixTailArgs{id, a, chain, &plan, 2, 9}),
                   ErrorCode::invalid_argument, "valid_rows");  // beyond the 40 tokens
  REQUIRE(rig.index.publish_tail(rig.scope, rig.target(), PrefixTailArgs{id, a, chain, &plan, 2, 8}).ok());
  // A tail is immutable under its key: the owner's next write copies it.
  const Result<AllocationReceipt> r = rig.alloc.append(AppendArgs{rig.alloc.fence(id).value(), {}, {}});
  REQUIRE(r.ok());
  CHECK(r->append_path == AppendPath::copy_on_write);
  CHECK(r->copied_rows == 8);
  rig.absorb();
  REQUIRE(rig.index.validate(&rig.alloc).ok());
}

TEST_CASE("lab: an empty logits-producing prompt is an error, not a wrapped length", "[prefix][lab]") {
  PrefixRig rig;
  const std::vector<TokenId> none;
  const auto m = rig.index.lookup(
      rig.scope, PrefixLookupArgs{RequestId{1}, RequestGeneration{1}, none, nullptr, LogitsPath::logits_required, {}},
      &rig.alloc);
  CHECK(m.error().code == ErrorCode::invalid_argument);
  CHECK(m.error().field == "prompt_tokens");
  CHECK(reuse_cap(0, LogitsPath::no_logits).value() == 0);
}

TEST_CASE("lab: configuration errors", "[prefix][lab]") {
  CacheLayoutManifest layout = loop4_layout();
  layout.hash_block_size = 8;
  CHECK(PrefixIndexConfig::from_layout(layout).error().field == "hash_block_size");
  PrefixIndexConfig c;
  c.cache_groups = 0;
  CHECK(PrefixIndex::create(c).error().field == "cache_groups");
  c.cache_groups = 1;
  c.block_tokens = 0;
  CHECK(PrefixIndex::create(c).error().field == "hash_block_size");
}
