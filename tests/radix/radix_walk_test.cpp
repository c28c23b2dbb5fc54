// The checked mutation and ownership trace of spec 0x08B-0x08G, on the
// 24-slot teaching index.
//
// The spec's table of the 18 committed operations was lost; the trace below
// is rebuilt from the surrounding text and reproduces every figure the text
// states (r02, r05, r07, r14, r17, the final reconciliation, the trace totals
// and the req-handoff receipt). Where the text is silent the rebuilt ops are
// the ones its narrative names: few-shot queries against the chat prefix, a
// second system prompt [50, 51, ...] whose split exposes [50, 51] -> [15, 16],
// cache hits that keep accessed paths recent (0x08, SGLang Figure 3).
//
//   r01 publish unfinished  req-chat-a   [10 11 12 13 20 21]   slots 1..6, lease A on node 1
//   r02 probe               req-fewshot  [10 11 12 99]         split node 1 at 3 -> node 2 [10 11 12]
//   r03 acquire             req-fewshot  [10 11 12 99]         lease F on node 2
//   r04 release             lease F                            (scheduler rejected the query)
//   r05 publish unfinished  req-chat-b   [10 11 12 13 30 31]   slots 7..12, split -> node 3 [13], node 4 [30 31]
//   r06 probe               req-probe    [10 11 12 13]         ends on a node boundary: no split
//   r07 publish unfinished  req-chat-a   + [22 23]             slots 13,14 -> node 5, lease A moves 1 -> 5
//   r08 publish finished    req-sys-b    [50 51 52]            slots 15..17 -> node 6
//   r09 publish finished    req-sys-c    [50 51 60]            slots 18..20, split -> node 7 [50 51], node 8 [60]
//   r10 probe               req-chat-b   [10 11 12 13 30 31]   chat-b decode step: a cache hit
//   r11 probe               req-sys-c    [50 51 60]            a cache hit
//   r12 evict 1                                                node 6 [52] -> slot 17
//   r13 probe               req-fewshot  [10 11 12 99]         a cache hit
//   r14 evict 3                                                [60] -> 20, then exposed [50 51] -> 15, 16
//   r15 release             lease A                            req-chat-a done
//   r16 release             lease B                            req-chat-b done
//   r17 evict 4                                                [22 23] -> 13, 14, then exposed [20 21] -> 5, 6
//   r18 handoff             req-handoff gen 4 [10 11 12 13 30 31 40]
#include <catch2/catch.hpp>

#include "tests/radix/radix_fixture.hpp"

using namespace kvrt;
using namespace kvrt::radix_test;

namespace {

constexpr uint64_t kRowBytes = 2048;  // an arbitrary B_row for the 0x08G estimates [bytes]

struct Walk {
  RadixIndex index = teaching_index(kRowBytes);
  std::vector<RadixMutationReceipt> r;  // r[k] is operation r(k+1)
  RadixHandoff handoff;
  LeaseId lease_a, lease_b;
};

void keep(Walk& w, Result<RadixMutationReceipt> receipt) {
  INFO((receipt.ok() ? std::string("ok") : receipt.error().describe()));
  REQUIRE(receipt.ok());
  require_valid(w.index);
  // Every op hashes predecessor and successor (0x08F) and moves the version by one.
  CHECK(receipt->version_after.value == receipt->version_before.value + 1);
  CHECK(receipt->state_after == w.index.state_digest());
  if (!w.r.empty()) CHECK(receipt->state_before == w.r.back().state_after);
  w.r.push_back(std::move(receipt).value());
}

RadixPublishArgs extend(const Walk& w, RadixRequestRef req, LeaseId lease, std::vector<TokenId> tokens,
                        uint32_t appended) {
  RadixPublishArgs a;
  a.request = req;
  a.publication = RadixPublication::unfinished;
  a.tokens = std::move(tokens);
  a.append_slots = w.index.pool().peek_free(appended);
  a.lease = lease;
  return a;
}

Walk run_walk() {
  Walk w;
  const auto chat_a = request(1), fewshot = request(2), chat_b = request(3), probe = request(4), sys_b = request(5),
             sys_c = request(6), handoff_req = request(7, 4);
  keep(w, publish_fresh(w.index, chat_a, {10, 11, 12, 13, 20, 21}, RadixPublication::unfinished));  // r01
  w.lease_a = *w.r.back().lease;
  keep(w, w.index.probe({fewshot, {10, 11, 12, 99}, 0}));                                           // r02
  keep(w, w.index.acquire({fewshot, {10, 11, 12, 99}, 0}));                                         // r03
  keep(w, w.index.release(*w.r.back().lease));                                                      // r04
  keep(w, publish_fresh(w.index, chat_b, {10, 11, 12, 13, 30, 31}, RadixPublication::unfinished));  // r05
  w.lease_b = *w.r.back().lease;
  keep(w, w.index.probe({probe, {10, 11, 12, 13}, 0}));                                         // r06
  keep(w, w.index.publish(extend(w, chat_a, w.lease_a, {10, 11, 12, 13, 20, 21, 22, 23}, 2)));  // r07
  keep(w, publish_fresh(w.index, sys_b, {50, 51, 52}, RadixPublication::finished));             // r08
  keep(w, publish_fresh(w.index, sys_c, {50, 51, 60}, RadixPublication::finished));             // r09
  keep(w, w.index.probe({chat_b, {10, 11, 12, 13, 30, 31}, 0}));                                // r10
  keep(w, w.index.probe({sys_c, {50, 51, 60}, 0}));                                             // r11
  keep(w, w.index.evict(1));                                                                    // r12
  keep(w, w.index.probe({fewshot, {10, 11, 12, 99}, 0}));                                       // r13
  keep(w, w.index.evict(3));                                                                    // r14
  keep(w, w.index.release(w.lease_a));                                                          // r15
  keep(w, w.index.release(w.lease_b));                                                          // r16
  keep(w, w.index.evict(4));                                                                    // r17
  RadixHandoffArgs h;                                                                           // r18
  h.request = handoff_req;
  h.prompt = {10, 11, 12, 13, 30, 31, 40};
  Result<RadixHandoff> handed = w.index.handoff(h);
  REQUIRE(handed.ok());
  w.handoff = std::move(handed).value();
  keep(w, w.handoff.mutation);
  return w;
}

}  // namespace

TEST_CASE("0x08B r02: a match ending inside an edge splits it without touching a slot", "[radix][walk]") {
  const Walk w = run_walk();
  const RadixMutationReceipt& r02 = w.r[1];
  CHECK(r02.kind == RadixMutationKind::probe);
  CHECK(r02.matched_tokens == 3);
  REQUIRE(r02.splits.size() == 1);
  CHECK(r02.splits[0] == RadixSplit{RadixNodeId{2}, RadixNodeId{1}, 3, 3});
  CHECK(r02.prefix_slots == slots({1, 2, 3}));  // X_shared -> S_shared
  // No slot allocated, copied, freed or duplicated: the pool is untouched.
  CHECK(r02.reserved_slots.empty());
  CHECK(r02.duplicate_slots_released.empty());
  CHECK(r02.published_slots.empty());
  CHECK(r02.evicted_slots.empty());
  // The lock of req-chat-a (on node 1) is now on both halves: splitting copies
  // the lock count, so the whole 6-token path stays protected.
  CHECK(r02.evictable_delta == 0);
}

TEST_CASE("0x08C r05: insert releases the duplicate input slots [7, 8, 9, 10]", "[radix][walk]") {
  const Walk w = run_walk();
  const RadixMutationReceipt& r05 = w.r[4];
  CHECK(r05.kind == RadixMutationKind::publish_unfinished);
  CHECK(r05.reserved_slots == slots({7, 8, 9, 10, 11, 12}));  // S_in
  CHECK(r05.protected_len == 0);
  CHECK(r05.prefix_len == 4);
  CHECK(r05.duplicate_slots_released == slots({7, 8, 9, 10}));  // S_in[0:p]
  CHECK(r05.published_slots == slots({11, 12}));                // S_in[p:] -> [30, 31]
  // [13, 20, 21] -> [4, 5, 6] split again at one token.
  REQUIRE(r05.splits.size() == 1);
  CHECK(r05.splits[0] == RadixSplit{RadixNodeId{3}, RadixNodeId{1}, 1, 4});
  CHECK(r05.created_nodes == node_ids({4}));
  CHECK(r05.prefix_slots == slots({1, 2, 3, 4, 11, 12}));  // chat-b references tree slots only
}

TEST_CASE("0x08C r07: the unfinished publication moves req-chat-a's lock from node 1 to node 5", "[radix][walk]") {
  const Walk w = run_walk();
  const RadixMutationReceipt& r07 = w.r[6];
  CHECK(r07.kind == RadixMutationKind::publish_unfinished);
  CHECK(r07.protected_len == 6);  // req-chat-a already references six tree slots
  CHECK(r07.prefix_len == 6);
  CHECK(r07.reserved_slots == slots({13, 14}));
  CHECK(r07.duplicate_slots_released.empty());
  CHECK(r07.published_slots == slots({13, 14}));
  CHECK(r07.created_nodes == node_ids({5}));  // one new edge [22, 23]
  CHECK(r07.lease == w.lease_a);
  CHECK(r07.lease_terminal_before == RadixNodeId{1});
  CHECK(r07.lease_terminal_after == RadixNodeId{5});
  CHECK(r07.matched_tokens == 8);
  CHECK(r07.prefix_slots == slots({1, 2, 3, 4, 5, 6, 13, 14}));
  CHECK(r07.evictable_delta == -2);  // only the new edge becomes protected
}

TEST_CASE("0x08E r14 and r17: whole-edge eviction exposes parents within the same call", "[radix][walk]") {
  const Walk w = run_walk();
  const RadixMutationReceipt& r12 = w.r[11];
  CHECK(r12.evicted_nodes == node_ids({6}));  // [52]
  CHECK(r12.evicted_slots == slots({17}));

  const RadixMutationReceipt& r14 = w.r[13];
  CHECK(r14.evicted_nodes == node_ids({8, 7}));     // leaf [60], then its parent [50, 51]
  CHECK(r14.evicted_slots == slots({20, 15, 16}));  // three rows in two steps
  // Locked chat paths survive both calls: neither chat leaf (5, 4) nor any
  // node on their paths (1, 2, 3) is a victim while the leases are held.
  for (const RadixMutationReceipt* r : {&r12, &r14})
    for (RadixNodeId n : r->evicted_nodes) CHECK((n.value >= 6 && n.value <= 8));

  const RadixMutationReceipt& r17 = w.r[16];
  CHECK(r17.evicted_nodes == node_ids({5, 1}));  // [22, 23], then exposed [20, 21]
  CHECK(r17.evicted_slots == slots({13, 14, 5, 6}));
}

TEST_CASE("0x08F final reconciliation and trace totals", "[radix][walk]") {
  const Walk w = run_walk();
  const RadixIndex& ix = w.index;
  CHECK(w.r.size() == 18);
  CHECK(ix.version() == TreeVersion{18});
  CHECK(ix.pool().size() == 24);
  CHECK(ix.pool().tree_count() == 6);
  CHECK(ix.pool().free_count() == 18);
  CHECK(ix.pool().private_count() == 0);
  CHECK(ix.pool().tree_count() + ix.pool().free_count() == ix.pool().size());
  CHECK(ix.tree().ledger().protected_tokens == 6);
  CHECK(ix.tree().ledger().evictable_tokens == 0);

  // Trace totals, counted once from the receipts and once by the index.
  uint64_t splits = 0, duplicates = 0, eviction_calls = 0, evicted_edges = 0, evicted_slots = 0;
  for (const auto& r : w.r) {
    splits += r.splits.size();
    duplicates += r.duplicate_slots_released.size();
    if (r.kind == RadixMutationKind::evict) ++eviction_calls;
    evicted_edges += r.evicted_nodes.size();
    evicted_slots += r.evicted_slots.size();
  }
  CHECK(splits == 3);
  CHECK(duplicates == 6);
  CHECK(eviction_calls == 3);
  CHECK(evicted_edges == 5);
  CHECK(evicted_slots == 8);
  const RadixCounters& c = ix.counters();
  CHECK(c.committed == 18);
  CHECK(c.splits == splits);
  CHECK(c.duplicate_slots_released == duplicates);
  CHECK(c.eviction_calls == eviction_calls);
  CHECK(c.evicted_edges == evicted_edges);
  CHECK(c.evicted_slots == evicted_slots);
  // Conservation over the trace: every slot ever handed out is tree-owned,
  // released as a duplicate or evicted; nothing stays request-private.
  uint64_t handed_out = 0;
  for (const auto& r : w.r) handed_out += r.reserved_slots.size();
  CHECK(handed_out == ix.pool().tree_count() + duplicates + evicted_slots);
}

TEST_CASE("0x08G the handoff receipt of req-handoff", "[radix][walk]") {
  const Walk w = run_walk();
  const RadixHandoffLabReceipt& h = w.handoff.receipt;
  CHECK(h.request_id == RequestId{7});
  CHECK(h.request_generation == RequestGeneration{4});
  CHECK(h.tree_version == TreeVersion{18});
  CHECK(h.tree_state_sha256 == w.index.state_sha256());
  CHECK(h.prompt_tokens == 7);
  CHECK(h.matched_tokens == 6);
  CHECK(h.path_node_ids == node_ids({2, 3, 4}));
  CHECK(h.prefix_slot_ids == slots({1, 2, 3, 4, 11, 12}));
  CHECK(h.suffix_interval == TokenInterval{6, 7});
  CHECK(h.terminal_node_id == RadixNodeId{4});
  CHECK(h.lock_required_until_scheduler_disposition);
  CHECK(RadixHandoffLabReceipt::kSchedulerOwner == "M5.2");
  CHECK(h.receipt_sha256 == h.canonical_digest());
  // The lease protects exactly the handed-off path (0x08D ledgers).
  const RadixLease* lease = w.index.lease(h.lock_lease_id);
  REQUIRE(lease != nullptr);
  CHECK(lease->kind == RadixLeaseKind::handoff);
  CHECK(lease->matched == 6);
  CHECK(w.index.lease_count() == 1);
  // Estimates (0x08G): one token to compute, no private tail, P = 1.
  CHECK(h.new_useful_kv_bytes == 1 * kRowBytes);
  CHECK(h.new_physical_blocks == 1);
  CHECK(h.new_physical_capacity_bytes == 1 * 1 * kRowBytes);
  CHECK(w.index.verify_handoff(h).ok());
}

TEST_CASE("0x08G the scheduler disposes of the handoff lease: admit or release", "[radix][walk]") {
  SECTION("admit exchanges the handoff lease for a request lease, path still protected") {
    Walk w = run_walk();
    const RadixHandoffLabReceipt h = w.handoff.receipt;
    Result<RadixMutationReceipt> admitted = w.index.admit_handoff(h);
    REQUIRE(admitted.ok());
    require_valid(w.index);
    CHECK(admitted->exchanged_from == h.lock_lease_id);
    REQUIRE(admitted->lease.has_value());
    CHECK(*admitted->lease != h.lock_lease_id);
    CHECK(w.index.lease(h.lock_lease_id) == nullptr);
    CHECK(w.index.lease(*admitted->lease)->kind == RadixLeaseKind::request);
    CHECK(w.index.tree().ledger().protected_tokens == 6);
    // The receipt is now stale: the exchange moved the version.
    CHECK(w.index.admit_handoff(h).error().code == ErrorCode::stale_tree_version);
  }
  SECTION("release (reject or defer) unprotects the path") {
    Walk w = run_walk();
    Result<RadixMutationReceipt> released = w.index.release(w.handoff.receipt.lock_lease_id);
    REQUIRE(released.ok());
    require_valid(w.index);
    CHECK(released->evictable_delta == 6);
    CHECK(w.index.tree().ledger().protected_tokens == 0);
    CHECK(w.index.lease_count() == 0);
  }
}
