// RadixTree and its building blocks: edge segments, the child selector
// table, the incremental eviction order, splits with lock copying, extra-key
// isolation, page alignment and the victim order of every policy.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "tests/radix/radix_fixture.hpp"

using namespace kvrt;
using namespace kvrt::radix_test;

namespace {

std::vector<TokenSlotId> fresh_slots(uint64_t& next, size_t n) {
  std::vector<TokenSlotId> s(n);
  for (auto& x : s) x = TokenSlotId{next++};
  return s;
}

struct Recorder final : RadixEvictionSink {
  std::vector<RadixNodeId> nodes;
  std::vector<TokenSlotId> slots;
  void evicted(const RadixEvictedEdge& e) override {
    nodes.push_back(e.node);
    slots.insert(slots.end(), e.slots.begin(), e.slots.end());
  }
};

}  // namespace

TEST_CASE("EdgeSegment split keeps token and slot order on both sides", "[radix]") {
  const std::vector<TokenId> t{10, 11, 12, 13, 20, 21};
  const std::vector<TokenSlotId> s = slots({1, 2, 3, 4, 5, 6});
  EdgeStore store;
  for (uint32_t m = 1; m < 6; ++m) {
    EdgeSegment e(store, t, s);
    EdgeSegment front = e.split_front(store, m);
    CHECK(std::vector<TokenId>(front.tokens().begin(), front.tokens().end()) ==
          std::vector<TokenId>(t.begin(), t.begin() + m));
    CHECK(std::vector<TokenSlotId>(front.slots().begin(), front.slots().end()) ==
          std::vector<TokenSlotId>(s.begin(), s.begin() + m));
    CHECK(std::vector<TokenId>(e.tokens().begin(), e.tokens().end()) == std::vector<TokenId>(t.begin() + m, t.end()));
    CHECK(std::vector<TokenSlotId>(e.slots().begin(), e.slots().end()) ==
          std::vector<TokenSlotId>(s.begin() + m, s.end()));
    front.release(store);
    e.release(store);
    CHECK(e.empty());
  }
  // Released blocks are recycled: six more edges of the same sizes take no new memory.
  const size_t reserved = store.reserved_words();
  for (uint32_t m = 1; m < 6; ++m) {
    EdgeSegment e(store, t, s);
    EdgeSegment front = e.split_front(store, m);
    front.release(store);
    e.release(store);
  }
  CHECK(store.reserved_words() == reserved);
}

TEST_CASE("ChildIndex agrees with a multimap under inserts, replaces, erases and collisions", "[radix]") {
  std::mt19937_64 rng(7);
  ChildIndex index;
  std::multimap<uint64_t, uint32_t> model;
  uint32_t next_child = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t hash = rng() % 64;  // few distinct hashes: long collision runs
    const unsigned dice = rng() % 10;
    if (dice < 5 || model.empty()) {
      index.insert(hash, next_child);
      model.emplace(hash, next_child++);
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      if (dice < 7) {
        index.replace(it->first, it->second, next_child);
        it->second = next_child++;
      } else {
        index.erase(it->first, it->second);
        model.erase(it);
      }
    }
    REQUIRE(index.size() == model.size());
    if (step % 97 == 0)
      for (const auto& [h, c] : model) REQUIRE(index.find(h, [&](uint32_t x) { return x == c; }) == c);
  }
  CHECK(index.find(1000, [](uint32_t) { return true; }) == ChildIndex::kNone);
}

TEST_CASE("EvictionOrder pops in the order of a sorted set under arbitrary updates", "[radix]") {
  // Key streams: random keys (mostly the heap), a rising clock as under LRU
  // and FIFO (mostly the run's tail, with old keys mixed in as exposed
  // parents and unlocked leaves would be), and a falling one as under MRU
  // and FILO (mostly the run's head).
  enum class Keys { random, rising, falling };
  for (const Keys mode : {Keys::random, Keys::rising, Keys::falling}) {
    for (uint64_t seed = 11; seed < 17; ++seed) {
      INFO("seed " << seed << ", key stream " << static_cast<int>(mode));
      std::mt19937_64 rng(seed);
      EvictionOrder order;
      order.reserve_nodes(512);
      std::set<std::pair<EvictionKey, uint32_t>> model;
      std::map<uint32_t, EvictionKey> key_of;
      // Keys are unique among candidates (the tree's ticks are): the low
      // 20 bits carry the step number.
      uint64_t clock = 1'000'000;
      uint64_t step = 0;
      auto next_key = [&]() -> EvictionKey {
        const bool old = rng() % 5 == 0;  // an out-of-order key
        const uint64_t tick = old ? clock - rng() % 5000 : ++clock;
        switch (mode) {
          case Keys::random:
            return {rng() % 4, (rng() % 100000) << 20 | step};
          case Keys::rising:
            return {0, tick << 20 | step};
          case Keys::falling:
            return {0, ~(tick << 20 | step)};
        }
        return {};
      };
      size_t run_seen = 0, heap_seen = 0;
      for (step = 0; step < 20000; ++step) {
        const uint32_t node = static_cast<uint32_t>(rng() % 512);
        const EvictionKey key = next_key();
        const unsigned dice = rng() % 10;
        if (!order.contains(node) && dice < 5) {
          order.push(node, key);
          model.emplace(key, node);
          key_of[node] = key;
        } else if (order.contains(node) && dice < 7) {
          order.update(node, key);
          model.erase({key_of[node], node});
          model.emplace(key, node);
          key_of[node] = key;
        } else if (order.contains(node) && dice < 8) {
          order.erase(node);
          model.erase({key_of[node], node});
        } else if (!order.empty()) {
          REQUIRE(order.top() == model.begin()->second);
          const uint32_t top = order.pop();
          REQUIRE(top == model.begin()->second);
          model.erase(model.begin());
        }
        REQUIRE(order.size() == model.size());
        run_seen = std::max(run_seen, order.run_size());
        heap_seen = std::max(heap_seen, order.heap_size());
        if (step % 97 == 0) {
          REQUIRE(order.consistent());
          for (const auto& [k, n] : model) REQUIRE(order.key_of(n) == k);
        }
      }
      CHECK(order.consistent());
      // Both structures carried candidates in every stream.
      CHECK(run_seen > 0);
      CHECK(heap_seen > 0);
    }
  }
}

TEST_CASE("radix tree: slots of evicted nodes are reused lowest index first", "[radix]") {
  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  // One-edge sequences under the root, one arena slot each.
  auto insert = [&](TokenId first, uint64_t slot) {
    const std::vector<TokenId> tokens{first, first + 1};
    return tree.insert({tokens, 0}, slots({slot, slot + 1})).value().terminal;
  };
  for (uint32_t k = 0; k < 4; ++k) CHECK(insert(static_cast<TokenId>(10 * k), 10 * k).index == k + 1);
  REQUIRE(tree.evict(1000).evicted_nodes == 4);  // freed slots 1, 2, 3, 4 in victim (LRU) order
  // A stack would hand back 4, 3, 2, 1; lowest-first keeps the arena packed.
  std::vector<RadixNodeRef> second;
  for (uint32_t k = 0; k < 4; ++k) {
    second.push_back(insert(static_cast<TokenId>(100 + 10 * k), 100 + 10 * k));
    CHECK(second.back().index == k + 1);
  }
  // Free slots 3 and 1, in that order: the next nodes take 1, then 3, then a new slot.
  REQUIRE(tree.evict_leaf(second[2].id).ok());
  REQUIRE(tree.evict_leaf(second[0].id).ok());
  CHECK(insert(200, 200).index == 1);
  CHECK(insert(210, 210).index == 3);
  CHECK(insert(220, 220).index == 5);
  CHECK(tree.validate().ok());
}

TEST_CASE("0x08B/0x08D a split under a lock copies the count, the handle unlocks through the new parent", "[radix]") {
  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  const std::vector<TokenId> chat{10, 11, 12, 13, 20, 21};
  const RadixInsertResult ins = tree.insert({chat, 0}, slots({1, 2, 3, 4, 5, 6})).value();
  const RadixNodeRef handle = tree.match({chat, 0}).terminal;  // lock the whole 6-token edge
  REQUIRE(handle == ins.terminal);
  CHECK(tree.inc_lock(handle).value() == -6);

  const RadixLedger before = tree.ledger();
  std::vector<TokenSlotId> got;
  const std::vector<TokenId> query{10, 11, 12, 99};
  const RadixMatchResult m = tree.match({query, 0}, &got);
  CHECK(m.matched == 3);
  REQUIRE(m.split.has_value());
  CHECK(m.split->at == 3);
  CHECK(m.split->remainder == handle.id);  // the old node is now the lower half
  CHECK(got == slots({1, 2, 3}));
  // Concatenation before = concatenation after: S(handle) is unchanged.
  CHECK(tree.path_slots(handle) == slots({1, 2, 3, 4, 5, 6}));
  CHECK(tree.path_tokens(handle) == chat);
  const RadixNode& shared = tree.node(m.terminal);
  CHECK(shared.lock_count == 1);  // copied from the child
  CHECK(tree.ledger().protected_tokens == before.protected_tokens);
  CHECK(tree.ledger().nodes == before.nodes + 1);
  require_valid(tree);

  CHECK(tree.dec_lock(handle).value() == 6);  // walks [13 20 21] and the new [10 11 12]
  CHECK(tree.ledger().protected_tokens == 0);
  require_valid(tree);
}

TEST_CASE("extra keys never share a node below the root", "[radix]") {
  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  uint64_t next = 1;
  const std::vector<TokenId> t{1, 2, 3};
  CHECK(tree.insert({t, 0}, fresh_slots(next, 3)).value().prefix_len == 0);
  CHECK(tree.insert({t, 5}, fresh_slots(next, 3)).value().prefix_len == 0);
  CHECK(tree.insert({t, 5}, fresh_slots(next, 3)).value().prefix_len == 3);
  CHECK(tree.ledger().nodes == 2);
  CHECK(tree.ledger().total_tokens == 6);
  std::vector<TokenSlotId> got;
  CHECK(tree.match({t, 5}, &got).matched == 3);
  CHECK(got == slots({4, 5, 6}));
  CHECK(tree.match({t, 9}).matched == 0);
  require_valid(tree);
}

TEST_CASE("page size 2: stored lengths, matches and splits are page aligned", "[radix]") {
  RadixOptions o;
  o.page_size = 2;
  RadixTree tree = RadixTree::create(o).value();
  uint64_t next = 1;
  const RadixInsertResult a = tree.insert({std::vector<TokenId>{1, 2, 3, 4, 5}, 0}, fresh_slots(next, 5)).value();
  CHECK(a.stored_len == 4);  // the unaligned tail [5] is the caller's to release
  CHECK(a.inserted == 4);
  CHECK(tree.match({std::vector<TokenId>{1, 2, 3}, 0}).matched == 2);  // aligned query length 2: splits at 2
  CHECK(tree.ledger().nodes == 2);
  CHECK(tree.match({std::vector<TokenId>{1, 2, 3, 9}, 0}).matched == 2);  // page [3, 9] differs
  const RadixInsertResult b = tree.insert({std::vector<TokenId>{1, 2, 3, 9}, 0}, fresh_slots(next, 4)).value();
  CHECK(b.prefix_len == 2);
  CHECK(b.inserted == 2);
  tree.for_each_node([](RadixNodeRef, const RadixNode& n) { CHECK(n.length() % 2 == 0); });
  require_valid(tree);
}

TEST_CASE("0x08E victim order of every policy, with and without hit counting", "[radix]") {
  // A = [1] priority 2, B = [2] priority 0, C = [3] priority 1, created in
  // that order; then A is matched twice and B once. Ticks: insert A (root 1,
  // leaf 2), B (3, 4), C (5, 6), matches at 7, 8 (A) and 9 (B).
  struct Case {
    EvictionPolicy policy;
    bool hits;
    std::vector<TokenId> victims_first_tokens;
  };
  const Case cases[] = {
      {EvictionPolicy::lru, true, {3, 1, 2}},       // last access C 6 < A 8 < B 9
      {EvictionPolicy::lfu, true, {3, 2, 1}},       // hits C 0 < B 1 < A 2
      {EvictionPolicy::lfu, false, {3, 1, 2}},      // SGLang RadixCache: no hits, LRU order
      {EvictionPolicy::fifo, true, {1, 2, 3}},      // created A 2 < B 4 < C 6
      {EvictionPolicy::mru, true, {2, 1, 3}},       // most recent first
      {EvictionPolicy::filo, true, {3, 2, 1}},      // newest first
      {EvictionPolicy::priority, true, {2, 3, 1}},  // priority B 0 < C 1 < A 2
      {EvictionPolicy::slru, true, {3, 2, 1}},      // A has 2 hits: protected segment
      {EvictionPolicy::slru, false, {3, 1, 2}},
  };
  for (const Case& c : cases) {
    INFO(to_string(c.policy) << " hits " << c.hits);
    RadixOptions o;
    o.eviction = c.policy;
    o.count_hits = c.hits;
    RadixTree tree = RadixTree::create(o).value();
    uint64_t next = 1;
    std::map<uint64_t, TokenId> first_token;
    for (auto [token, priority] : {std::pair<TokenId, int64_t>{1, 2}, {2, 0}, {3, 1}}) {
      const RadixInsertResult r = tree.insert({std::vector<TokenId>{token}, 0}, fresh_slots(next, 1), priority).value();
      first_token[r.terminal.id.value] = token;
    }
    tree.match({std::vector<TokenId>{1}, 0});
    tree.match({std::vector<TokenId>{1}, 0});
    tree.match({std::vector<TokenId>{2}, 0});
    Recorder rec;
    const RadixEvictResult r = tree.evict(100, &rec);
    CHECK(r.evicted_tokens == 3);
    std::vector<TokenId> order;
    for (RadixNodeId id : rec.nodes) order.push_back(first_token[id.value]);
    CHECK(order == c.victims_first_tokens);
    require_valid(tree);
  }
}

TEST_CASE("0x08E eviction is whole-edge and exposes parents within the call", "[radix]") {
  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  uint64_t next = 1;
  (void)tree.insert({std::vector<TokenId>{1, 2, 3, 4}, 0}, fresh_slots(next, 4)).value();  // slots 1-4
  (void)tree.insert({std::vector<TokenId>{1, 2, 9}, 0}, fresh_slots(next, 3)).value();     // [9] -> 7
  CHECK(tree.ledger().nodes == 3);                                                         // [1 2], [3 4], [9]
  CHECK(tree.ledger().leaf_ready_tokens == 3);
  Recorder rec;
  const RadixEvictResult r = tree.evict(1, &rec);  // oldest leaf [3 4]: 2 tokens for a target of 1
  CHECK(r.evicted_tokens == 2);
  CHECK(rec.slots == slots({3, 4}));
  const RadixEvictResult all = tree.evict(3, &rec);  // [9], then the exposed [1 2]
  CHECK(all.evicted_tokens == 3);
  CHECK(rec.slots == slots({3, 4, 7, 1, 2}));
  CHECK(tree.ledger() == RadixLedger{});
  require_valid(tree);
}

TEST_CASE("RadixTree rejects malformed inserts and stale references without changing state", "[radix]") {
  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  uint64_t next = 1;
  const std::vector<TokenId> t{1, 2, 3};
  const RadixInsertResult a = tree.insert({t, 0}, fresh_slots(next, 3)).value();
  const StateDigest d = tree.state_digest();
  CHECK(tree.insert({t, 0}, slots({1, 2})).error().field == "slots");
  CHECK(tree.state_digest() == d);
  (void)tree.evict(10);
  CHECK(tree.inc_lock(a.terminal).error().code == ErrorCode::unknown_node);
  CHECK(tree.dec_lock(a.terminal).error().code == ErrorCode::unknown_node);
  // The freed arena slot is reused by the next node; the old reference stays stale.
  const RadixInsertResult b = tree.insert({std::vector<TokenId>{7}, 0}, fresh_slots(next, 1)).value();
  CHECK(b.terminal.index == a.terminal.index);
  CHECK_FALSE(tree.is_live(a.terminal));
  CHECK(tree.inc_lock(a.terminal).error().code == ErrorCode::unknown_node);
  require_valid(tree);
}

TEST_CASE("an eviction interrupted before a victim leaves the tree a smaller eviction of the same victims leaves",
          "[radix][fault]") {
  // Interrupted before its k-th victim (the fault point "radix.evict"), an
  // eviction keeps the k-1 victims it removed; from there the tree must go
  // on exactly as a twin that was asked for those victims' tokens only:
  // same digest, same later victims (parents exposed within the call
  // included), same ledger.
  struct Interrupting final : RadixEvictionSink {
    std::vector<RadixNodeId> nodes;
    uint64_t tokens = 0;
    uint32_t allowed = 0;  // victims let through before the interruption
    void evicted(const RadixEvictedEdge& e) override {
      nodes.push_back(e.node);
      tokens += e.tokens.size();
    }
    bool interrupted() override { return nodes.size() >= allowed; }
  };
  auto build = [] {
    RadixTree tree = RadixTree::create(RadixOptions{}).value();
    uint64_t next = 1;
    for (const std::vector<TokenId>& p :
         std::vector<std::vector<TokenId>>{{1, 2, 3, 4}, {1, 2, 9}, {5, 6}, {5, 7, 8}, {10}, {1, 2, 3, 11, 12}})
      (void)tree.insert({p, 0}, fresh_slots(next, p.size())).value();
    return tree;
  };
  for (uint32_t allowed = 0; allowed <= 8; ++allowed) {
    INFO("victims before the interruption: " << allowed);
    RadixTree faulted = build(), twin = build();
    Interrupting stop;
    stop.allowed = allowed;
    const RadixEvictResult partial = faulted.evict(UINT64_MAX, &stop);
    CHECK(partial.evicted_nodes == stop.nodes.size());
    require_valid(faulted);
    Recorder first;
    if (stop.tokens > 0) (void)twin.evict(stop.tokens, &first);
    CHECK(first.nodes == stop.nodes);
    CHECK(faulted.state_digest() == twin.state_digest());
    CHECK(faulted.ledger() == twin.ledger());
    Recorder rest_f, rest_t;
    (void)faulted.evict(UINT64_MAX, &rest_f);
    (void)twin.evict(UINT64_MAX, &rest_t);
    CHECK(rest_f.nodes == rest_t.nodes);
    CHECK(faulted.ledger() == RadixLedger{});
  }
}

TEST_CASE("an insert taken back leaves the tree that never saw it: no split, no stamp, same ids", "[radix][fault]") {
  // The withdrawn adoption of 0x04F: an insert that splits an existing edge
  // and adds a leaf, then undo_insert. Digest (structure and recency),
  // ledger, clock and the next node id must equal a twin's that never saw
  // the insert; an insert of a prefix only (a split, no leaf) too; and once
  // anything walked the tree in between, the undo is refused.
  auto build = [] {
    RadixTree tree = RadixTree::create(RadixOptions{}).value();
    uint64_t next = 1;
    for (const std::vector<TokenId>& p : std::vector<std::vector<TokenId>>{{1, 2, 3, 4, 5, 6}, {7, 8}, {1, 2, 9}})
      (void)tree.insert({p, 0}, fresh_slots(next, p.size())).value();
    (void)tree.match({std::vector<TokenId>{7, 8}, 0});
    return tree;
  };
  for (const std::vector<TokenId>& key :
       std::vector<std::vector<TokenId>>{{1, 2, 3, 4, 10, 11}, {1, 2, 3}, {7, 8, 9}}) {
    INFO("key of " << key.size() << " tokens");
    RadixTree faulted = build(), twin = build();
    uint64_t next = 100;
    RadixInsertUndo undo;
    const RadixInsertResult r = faulted.insert({key, 0}, fresh_slots(next, key.size()), 5, &undo).value();
    CHECK(faulted.state_digest() != twin.state_digest());
    Recorder rec;
    REQUIRE(faulted.undo_insert(undo, &rec));
    CHECK(rec.slots.size() == r.inserted);
    CHECK(faulted.state_digest() == twin.state_digest());
    CHECK(faulted.ledger() == twin.ledger());
    CHECK(faulted.clock() == twin.clock());
    require_valid(faulted);
    // The next node gets the same id, and eviction takes the same edges.
    uint64_t n1 = 500, n2 = 500;
    const RadixInsertResult a = faulted.insert({std::vector<TokenId>{20, 21}, 0}, fresh_slots(n1, 2)).value();
    const RadixInsertResult b = twin.insert({std::vector<TokenId>{20, 21}, 0}, fresh_slots(n2, 2)).value();
    CHECK(a.terminal == b.terminal);
    Recorder ef, et;
    (void)faulted.evict(UINT64_MAX, &ef);
    (void)twin.evict(UINT64_MAX, &et);
    CHECK(ef.nodes == et.nodes);
    CHECK(ef.slots == et.slots);
  }
  RadixTree tree = build();
  uint64_t next = 100;
  RadixInsertUndo undo;
  (void)tree.insert({std::vector<TokenId>{1, 2, 3, 4, 10}, 0}, fresh_slots(next, 5), 0, &undo).value();
  (void)tree.match({std::vector<TokenId>{7, 8}, 0});
  const StateDigest after_match = tree.state_digest();
  CHECK_FALSE(tree.undo_insert(undo));
  CHECK(tree.state_digest() == after_match);
}
