// Failure lab of spec 0x08I: malformed operations and receipts are rejected
// with a typed error naming the field, and the index's state digest, version,
// ledgers and pool partition are exactly as before (0x04F).
#include <catch2/catch.hpp>

#include "tests/radix/radix_fixture.hpp"

using namespace kvrt;
using namespace kvrt::radix_test;

namespace {

struct Snapshot {
  StateDigest digest;
  TreeVersion version;
  RadixLedger ledger;
  uint32_t free = 0, priv = 0, tree = 0;
  size_t leases = 0;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

Snapshot snapshot(const RadixIndex& ix) {
  return Snapshot{ix.state_digest(),         ix.version(),           ix.tree().ledger(), ix.pool().free_count(),
                  ix.pool().private_count(), ix.pool().tree_count(), ix.lease_count()};
}

template <class T>
void require_rejected(const RadixIndex& ix, const Snapshot& before, const Result<T>& r, ErrorCode code,
                      const std::string& field) {
  REQUIRE_FALSE(r.ok());
  INFO(r.error().describe());
  CHECK(r.error().code == code);
  CHECK(r.error().field == field);
  CHECK(snapshot(ix) == before);
  require_valid(ix);
}

void require_rejected(const RadixIndex& ix, const Snapshot& before, const Status& s, ErrorCode code,
                      const std::string& field) {
  REQUIRE_FALSE(s.ok());
  INFO(s.error().describe());
  CHECK(s.error().code == code);
  CHECK(s.error().field == field);
  CHECK(snapshot(ix) == before);
}

// req-chat-a holds a lease on [10 11 12 13 20 21] (node 1, slots 1..6); a
// probe split it at 3 (node 2 = [10 11 12], internal).
struct Lab {
  RadixIndex ix = teaching_index(1024);
  LeaseId chat_lease;
  RadixHandoff handoff;
  Lab() {
    chat_lease = *publish_fresh(ix, request(1), {10, 11, 12, 13, 20, 21}, RadixPublication::unfinished).lease;
    REQUIRE(ix.probe({request(2), {10, 11, 12, 99}, 0}).ok());
    RadixHandoffArgs h;
    h.request = request(9, 3);
    h.prompt = {10, 11, 12, 13, 77};
    handoff = ix.handoff(h).value();
    require_valid(ix);
  }
};

}  // namespace

TEST_CASE("0x08I locked-leaf eviction is rejected, evict() never takes a locked leaf", "[radix][lab]") {
  Lab lab;
  const Snapshot before = snapshot(lab.ix);
  require_rejected(lab.ix, before, lab.ix.evict_leaf(RadixNodeId{1}), ErrorCode::locked_node_eviction, "node");
  // Every node is on a leased path: a large evict releases nothing.
  const RadixMutationReceipt r = lab.ix.evict(1000).value();
  CHECK(r.evicted_nodes.empty());
  CHECK(lab.ix.tree().ledger().total_tokens == 6);
}

TEST_CASE("0x08I internal-node eviction, the root and unknown nodes are rejected", "[radix][lab]") {
  Lab lab;
  REQUIRE(lab.ix.release(lab.chat_lease).ok());
  REQUIRE(lab.ix.release(lab.handoff.receipt.lock_lease_id).ok());
  const Snapshot before = snapshot(lab.ix);
  require_rejected(lab.ix, before, lab.ix.evict_leaf(RadixNodeId{2}), ErrorCode::internal_node_eviction, "node");
  require_rejected(lab.ix, before, lab.ix.evict_leaf(RadixNodeId{0}), ErrorCode::internal_node_eviction, "node");
  require_rejected(lab.ix, before, lab.ix.evict_leaf(RadixNodeId{42}), ErrorCode::unknown_node, "node");
  // Leaves go one at a time, each purge exposing its parent: 1, 3, then 2.
  REQUIRE(lab.ix.evict_leaf(RadixNodeId{1}).ok());
  require_rejected(lab.ix, snapshot(lab.ix), lab.ix.evict_leaf(RadixNodeId{2}), ErrorCode::internal_node_eviction,
                   "node");
  REQUIRE(lab.ix.evict_leaf(RadixNodeId{3}).ok());
  REQUIRE(lab.ix.evict_leaf(RadixNodeId{2}).ok());
  require_valid(lab.ix);
  CHECK(lab.ix.pool().free_count() == 24);
}

TEST_CASE("0x08I lock underflow: a lease released twice, a node unlocked below zero", "[radix][lab]") {
  Lab lab;
  REQUIRE(lab.ix.release(lab.chat_lease).ok());
  const Snapshot before = snapshot(lab.ix);
  require_rejected(lab.ix, before, lab.ix.release(lab.chat_lease), ErrorCode::unknown_lease, "lease");

  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  const std::vector<TokenId> t{1, 2, 3};
  const RadixInsertResult ins = tree.insert({t, 0}, slots({1, 2, 3})).value();
  const StateDigest d = tree.state_digest();
  const RadixLedger l = tree.ledger();
  const Result<int64_t> under = tree.dec_lock(ins.terminal);
  REQUIRE_FALSE(under.ok());
  CHECK(under.error().code == ErrorCode::lock_underflow);
  CHECK(tree.state_digest() == d);
  CHECK(tree.ledger() == l);
  require_valid(tree);
}

TEST_CASE("0x08I owned-slot reuse: a published slot must be free or private to the publisher", "[radix][lab]") {
  Lab lab;
  REQUIRE(lab.ix.reserve(request(5), 2).ok());  // slots 7, 8 private to request 5
  const Snapshot before = snapshot(lab.ix);
  RadixPublishArgs a;
  a.request = request(6);
  a.tokens = {40, 41, 42};
  auto attempt = [&](std::vector<TokenSlotId> s) {
    a.append_slots = std::move(s);
    return lab.ix.publish(a);
  };
  // Slot 3 is tree-owned (it holds token 12 of the chat prefix).
  require_rejected(lab.ix, before, attempt(slots({9, 3, 10})), ErrorCode::owned_slot_reuse, "append_slots");
  // Slot 7 is private to request 5, not 6.
  require_rejected(lab.ix, before, attempt(slots({7, 9, 10})), ErrorCode::owned_slot_reuse, "append_slots");
  // Listed twice; outside the pool.
  require_rejected(lab.ix, before, attempt(slots({9, 9, 10})), ErrorCode::owned_slot_reuse, "append_slots");
  require_rejected(lab.ix, before, attempt(slots({9, 10, 25})), ErrorCode::owned_slot_reuse, "append_slots");
  require_rejected(lab.ix, before, attempt(slots({9, 10})), ErrorCode::invalid_argument, "append_slots");
  // Releasing someone else's private slots is the same violation.
  require_rejected(lab.ix, before, lab.ix.release_private(request(6), slots({7})), ErrorCode::owned_slot_reuse,
                   "slots");
  // Request 5 may publish through its own private slots.
  a.request = request(5);
  REQUIRE(attempt(slots({7, 8, 9})).ok());
  require_valid(lab.ix);
}

TEST_CASE("0x08I stale version: a handoff receipt read before a mutation is rejected", "[radix][lab]") {
  Lab lab;
  const RadixHandoffLabReceipt h = lab.handoff.receipt;
  REQUIRE(lab.ix.verify_handoff(h).ok());
  REQUIRE(lab.ix.probe({request(3), {10, 11}, 0}).ok());  // any committed op moves the version
  const Snapshot before = snapshot(lab.ix);
  require_rejected(lab.ix, before, lab.ix.verify_handoff(h), ErrorCode::stale_tree_version, "tree_version");
  require_rejected(lab.ix, before, lab.ix.admit_handoff(h), ErrorCode::stale_tree_version, "tree_version");
  // The lease can still be released by id: a stale receipt never strands a lock.
  REQUIRE(lab.ix.release(h.lock_lease_id).ok());
  require_valid(lab.ix);
}

TEST_CASE("0x08I path/slot and suffix mismatch in a re-signed receipt", "[radix][lab]") {
  Lab lab;
  const Snapshot before = snapshot(lab.ix);
  auto resigned = [&](auto&& edit) {
    RadixHandoffLabReceipt h = lab.handoff.receipt;
    edit(h);
    h.receipt_sha256 = h.canonical_digest();  // a forger who recomputes the digest
    return h;
  };
  require_rejected(lab.ix, before,
                   lab.ix.verify_handoff(resigned([](auto& h) { h.prefix_slot_ids[1] = TokenSlotId{9}; })),
                   ErrorCode::path_slot_mismatch, "prefix_slot_ids");
  require_rejected(lab.ix, before, lab.ix.verify_handoff(resigned([](auto& h) { h.matched_tokens = 3; })),
                   ErrorCode::path_slot_mismatch, "prefix_slot_ids");
  require_rejected(lab.ix, before, lab.ix.verify_handoff(resigned([](auto& h) { h.path_node_ids = node_ids({2}); })),
                   ErrorCode::path_slot_mismatch, "path_node_ids");
  require_rejected(lab.ix, before, lab.ix.verify_handoff(resigned([](auto& h) {
    h.suffix_interval = TokenInterval{3, 5};
  })),
                   ErrorCode::path_slot_mismatch, "suffix_interval");
  require_rejected(lab.ix, before, lab.ix.verify_handoff(resigned([](auto& h) { h.lock_lease_id = LeaseId{999}; })),
                   ErrorCode::unknown_lease, "lease");
  require_rejected(lab.ix, before,
                   lab.ix.verify_handoff(resigned([](auto& h) { h.request_generation = RequestGeneration{4}; })),
                   ErrorCode::stale_generation, "lease");
  // A publication whose tokens do not extend the leased path.
  RadixPublishArgs a;
  a.request = request(1);
  a.publication = RadixPublication::unfinished;
  a.lease = lab.chat_lease;
  a.tokens = {10, 11, 12, 13, 20, 99, 5};
  a.append_slots = slots({7});
  require_rejected(lab.ix, before, lab.ix.publish(a), ErrorCode::path_slot_mismatch, "tokens");
  // The handoff lease is not a request lease until admitted.
  a.request = request(9, 3);
  a.lease = lab.handoff.receipt.lock_lease_id;
  require_rejected(lab.ix, before, lab.ix.publish(a), ErrorCode::unknown_lease, "lease");
}

TEST_CASE("0x08I receipt tampering: a field changed without its digest", "[radix][lab]") {
  Lab lab;
  const Snapshot before = snapshot(lab.ix);
  RadixHandoffLabReceipt h = lab.handoff.receipt;
  h.matched_tokens = 5;
  require_rejected(lab.ix, before, lab.ix.verify_handoff(h), ErrorCode::receipt_tampered, "receipt_sha256");
  require_rejected(lab.ix, before, lab.ix.admit_handoff(h), ErrorCode::receipt_tampered, "receipt_sha256");
  h = lab.handoff.receipt;
  h.new_physical_blocks = 0;  // the estimates are covered too
  require_rejected(lab.ix, before, lab.ix.verify_handoff(h), ErrorCode::receipt_tampered, "receipt_sha256");
  // A forged state digest, re-signed, names a state the index never committed.
  h = lab.handoff.receipt;
  h.tree_state_sha256 = sha256("another tree");
  h.receipt_sha256 = h.canonical_digest();
  require_rejected(lab.ix, before, lab.ix.verify_handoff(h), ErrorCode::receipt_tampered, "tree_state_sha256");
}

TEST_CASE("0x08 page alignment: publications end on page boundaries", "[radix][lab]") {
  RadixIndexConfig c;
  c.pool_slots = 32;
  c.tree.page_size = 4;
  RadixIndex ix = RadixIndex::create(c).value();
  const Snapshot before = snapshot(ix);
  RadixPublishArgs a;
  a.request = request(1);
  a.tokens = {1, 2, 3, 4, 5, 6};
  a.append_slots = ix.pool().peek_free(6);
  require_rejected(ix, before, ix.publish(a), ErrorCode::page_misaligned, "tokens");
  a.tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  a.append_slots = ix.pool().peek_free(8);
  REQUIRE(ix.publish(a).ok());
  // A lookup diverging inside the second page matches one page and splits
  // only at the page boundary.
  const RadixMutationReceipt m = ix.probe({request(2), {1, 2, 3, 4, 5, 6, 0, 0}, 0}).value();
  CHECK(m.matched_tokens == 4);
  REQUIRE(m.splits.size() == 1);
  CHECK(m.splits[0].at == 4);
  require_valid(ix);
}

TEST_CASE("RadixIndex configuration errors name the field", "[radix][lab]") {
  RadixIndexConfig c;
  CHECK(RadixIndex::create(c).error().field == "pool_slots");
  c.pool_slots = 8;
  c.tree.page_size = 0;
  CHECK(RadixIndex::create(c).error().field == "page_size");
  CHECK(parse_eviction_policy("LRU").error().field == "eviction_policy");
  CHECK(parse_eviction_policy("slru").value() == EvictionPolicy::slru);
}
