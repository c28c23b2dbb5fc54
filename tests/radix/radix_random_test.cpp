// Seeded randomised differential tests of the radix index against the
// brute-force reference of radix_reference.hpp (a list of stored sequences),
// with validate() after every operation.
#include <catch2/catch.hpp>
#include <random>

#include "tests/radix/radix_fixture.hpp"
#include "tests/radix/radix_reference.hpp"

using namespace kvrt;
using namespace kvrt::radix_test;

namespace {

// Records the edges an eviction removes with their full path tokens.
struct PathSink final : RadixEvictionSink {
  struct Edge {
    RadixNodeId node;
    uint64_t extra;
    uint32_t depth;
    std::vector<TokenId> full_path;
  };
  const RadixTree* tree = nullptr;
  std::vector<Edge> edges;
  void evicted(const RadixEvictedEdge& e) override {
    // The parent is still live while the sink runs: its path is the prefix.
    std::vector<TokenId> path;
    if (e.parent.value != 0) path = tree->path_tokens(*tree->find(e.parent));
    path.insert(path.end(), e.tokens.begin(), e.tokens.end());
    edges.push_back(Edge{e.node, e.extra_key, e.depth, std::move(path)});
  }
};

struct HeldLock {
  RadixNodeRef terminal;
  uint64_t extra;
  std::vector<TokenId> path;
};

void differential_run(uint64_t seed, const RadixOptions& options, int ops) {
  INFO("seed " << seed << " page " << options.page_size << " policy " << to_string(options.eviction));
  std::mt19937_64 rng(seed);
  RadixTree tree = RadixTree::create(options).value();
  ReferenceIndex ref(options.page_size);
  std::vector<HeldLock> locks;
  uint64_t next_slot = 1;
  const int alphabet = 2 + static_cast<int>(seed % 3);
  auto random_tokens = [&] {
    std::vector<TokenId> t(rng() % 13);
    for (auto& x : t) x = static_cast<TokenId>(rng() % alphabet);
    return t;
  };
  for (int step = 0; step < ops; ++step) {
    INFO("step " << step);
    const uint64_t extra = rng() % 4 == 0 ? 7 : 0;
    const unsigned dice = rng() % 100;
    if (dice < 35) {
      const std::vector<TokenId> t = random_tokens();
      std::vector<TokenSlotId> s(t.size());
      for (auto& x : s) x = TokenSlotId{next_slot++};
      const RadixInsertResult r = tree.insert({t, extra}, s, static_cast<int64_t>(rng() % 3)).value();
      const uint32_t expected_prefix = ref.insert(extra, t, s);
      CHECK(r.prefix_len == expected_prefix);
      CHECK(r.stored_len == t.size() - t.size() % options.page_size);
      CHECK(r.inserted == r.stored_len - r.prefix_len);
    } else if (dice < 60) {
      const std::vector<TokenId> t = random_tokens();
      // A peek answers what the match will, and changes nothing the digest
      // or the eviction order sees.
      const StateDigest before = tree.state_digest();
      const std::vector<RadixNodeId> victims_before = rebuilt_heap_victims(tree, 1);
      std::vector<TokenSlotId> peeked;
      const uint32_t peek = tree.peek({t, extra}, &peeked);
      CHECK(tree.state_digest() == before);
      CHECK(rebuilt_heap_victims(tree, 1) == victims_before);
      std::vector<TokenSlotId> got;
      const RadixMatchResult m = tree.match({t, extra}, &got);
      const auto [expected, expected_slots] = ref.match(extra, t);
      CHECK(m.matched == expected);
      CHECK(got == expected_slots);
      CHECK(peek == expected);
      CHECK(peeked == expected_slots);
      if (!m.terminal.is_root()) CHECK(tree.node(m.terminal).end_depth() == m.matched);
    } else if (dice < 72) {
      const std::vector<TokenId> t = random_tokens();
      const RadixMatchResult m = tree.match({t, extra}, nullptr);
      const uint64_t protected_before = tree.ledger().protected_tokens;
      const int64_t delta = tree.inc_lock(m.terminal).value();
      CHECK(-delta == static_cast<int64_t>(tree.ledger().protected_tokens - protected_before));
      std::vector<TokenId> path(t.begin(), t.begin() + m.matched);
      ref.lock(extra, path);
      locks.push_back(HeldLock{m.terminal, extra, std::move(path)});
    } else if (dice < 84 && !locks.empty()) {
      const size_t k = rng() % locks.size();
      REQUIRE(tree.is_live(locks[k].terminal));  // a locked node is never evicted
      const int64_t delta = tree.dec_lock(locks[k].terminal).value();
      CHECK(delta >= 0);
      ref.unlock(locks[k].extra, locks[k].path);
      locks.erase(locks.begin() + static_cast<ptrdiff_t>(k));
    } else if (dice < 97) {
      const uint64_t target = rng() % 12;
      const std::vector<RadixNodeId> expected_victims = rebuilt_heap_victims(tree, target);
      PathSink sink;
      sink.tree = &tree;
      const uint64_t evictable_before = tree.ledger().evictable_tokens;
      const RadixEvictResult r = tree.evict(target, &sink);
      std::vector<RadixNodeId> victims;
      for (const auto& e : sink.edges) {
        victims.push_back(e.node);
        CHECK(ref.evict_edge(e.extra, e.full_path, e.depth));
      }
      CHECK(victims == expected_victims);
      CHECK(r.evicted_nodes == victims.size());
      CHECK(tree.ledger().evictable_tokens == evictable_before - r.evicted_tokens);
      // Stops only when the target is met or nothing unlocked is left.
      CHECK((r.evicted_tokens >= target || tree.ledger().evictable_tokens == 0));
    } else {
      tree.reset();
      ref.clear();
      locks.clear();
    }
    require_valid(tree);
    const RadixLedger& l = tree.ledger();
    CHECK(l.total_tokens == ref.total());
    CHECK(l.protected_tokens == ref.protected_tokens());
    CHECK(l.evictable_tokens + l.protected_tokens == l.total_tokens);
    CHECK(l.leaf_ready_tokens <= l.evictable_tokens);
  }
}

}  // namespace

TEST_CASE("radix tree matches a brute-force list of sequences under every policy", "[radix][random]") {
  const EvictionPolicy policies[] = {EvictionPolicy::lru, EvictionPolicy::lfu,  EvictionPolicy::fifo,
                                     EvictionPolicy::mru, EvictionPolicy::filo, EvictionPolicy::priority,
                                     EvictionPolicy::slru};
  uint64_t seed = 20261130;
  for (EvictionPolicy policy : policies)
    for (uint32_t page : {1u, 2u, 4u})
      for (bool hits : {true, false}) {
        RadixOptions o;
        o.page_size = page;
        o.eviction = policy;
        o.count_hits = hits;
        differential_run(seed++, o, 300);
      }
}

TEST_CASE("radix index owner stays valid and reconciled under random transactions", "[radix][random]") {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    RadixIndexConfig c;
    c.pool_slots = 48;
    c.row_bytes = 64;
    c.tree.eviction = static_cast<EvictionPolicy>(seed % 7);
    RadixIndex ix = RadixIndex::create(c).value();
    std::vector<std::pair<RadixRequestRef, LeaseId>> running;  // request leases
    std::vector<RadixHandoffLabReceipt> handed;
    uint64_t next_request = 1;
    auto random_tokens = [&](size_t max_len) {
      std::vector<TokenId> t(1 + rng() % max_len);
      for (auto& x : t) x = static_cast<TokenId>(rng() % 3);
      return t;
    };
    for (int step = 0; step < 400; ++step) {
      INFO("step " << step);
      const StateDigest digest_before = ix.state_digest();
      const TreeVersion version_before = ix.version();
      const unsigned dice = rng() % 100;
      bool committed = false;
      if (dice < 25) {  // a new request publishes its prompt
        const std::vector<TokenId> t = random_tokens(8);
        if (ix.pool().free_count() < t.size()) (void)ix.evict(t.size());
        RadixPublishArgs a;
        a.request = request(next_request++);
        a.publication = rng() % 2 ? RadixPublication::finished : RadixPublication::unfinished;
        a.tokens = t;
        a.append_slots = ix.pool().peek_free(static_cast<uint32_t>(t.size()));
        Result<RadixMutationReceipt> r = ix.publish(a);
        committed = r.ok();
        if (r.ok() && r->lease) running.emplace_back(a.request, *r->lease);
        if (r.ok()) CHECK(r->duplicate_slots_released.size() == r->prefix_len);
      } else if (dice < 40 && !running.empty()) {  // a running request extends its sequence
        const size_t k = rng() % running.size();
        const RadixLease& l = *ix.lease(running[k].second);
        RadixPublishArgs a;
        a.request = running[k].first;
        a.lease = running[k].second;
        a.publication = rng() % 3 ? RadixPublication::unfinished : RadixPublication::finished;
        a.tokens = ix.tree().path_tokens(l.terminal);
        const std::vector<TokenId> more = random_tokens(4);
        a.tokens.insert(a.tokens.end(), more.begin(), more.end());
        if (ix.pool().free_count() < more.size()) (void)ix.evict(more.size());
        a.append_slots = ix.pool().peek_free(static_cast<uint32_t>(more.size()));
        Result<RadixMutationReceipt> r = ix.publish(a);
        committed = r.ok();
        if (r.ok() && a.publication == RadixPublication::finished) running.erase(running.begin() + k);
      } else if (dice < 52) {
        RadixHandoffArgs h;
        h.request = request(next_request++, static_cast<uint32_t>(rng() % 5));
        h.prompt = random_tokens(10);
        Result<RadixHandoff> r = ix.handoff(h);
        committed = r.ok();
        if (r.ok()) handed.push_back(r->receipt);
      } else if (dice < 62 && !handed.empty()) {  // M5.2 disposes of a handoff
        const RadixHandoffLabReceipt h = handed.back();
        handed.pop_back();
        if (rng() % 2 && ix.verify_handoff(h).ok()) {
          Result<RadixMutationReceipt> r = ix.admit_handoff(h);
          committed = r.ok();
          if (r.ok()) running.emplace_back(RadixRequestRef{h.request_id, h.request_generation}, *r->lease);
        } else {
          committed = ix.release(h.lock_lease_id).ok();
        }
      } else if (dice < 70 && !running.empty()) {
        const size_t k = rng() % running.size();
        committed = ix.release(running[k].second).ok();
        running.erase(running.begin() + k);
      } else if (dice < 80) {
        committed = ix.probe({request(next_request++), random_tokens(9), 0}).ok();
      } else if (dice < 90) {
        committed = ix.evict(rng() % 10).ok();
      } else if (dice < 95) {
        const RadixRequestRef req = request(next_request++);
        Result<RadixMutationReceipt> r = ix.reserve(req, static_cast<uint32_t>(rng() % 4));
        committed = r.ok();
        if (r.ok() && rng() % 2) committed = ix.release_private(req, r->reserved_slots).ok();
      } else {  // a malformed publication must change nothing
        RadixPublishArgs a;
        a.request = request(next_request++);
        a.tokens = {1, 2};
        a.append_slots = slots({1, 1});
        CHECK_FALSE(ix.publish(a).ok());
      }
      if (!committed) {
        // Either nothing was attempted or it was rejected; a successful
        // pre-step (an eviction for room) is itself a committed op.
        CHECK((ix.version() == version_before || ix.version().value == version_before.value + 1));
        if (ix.version() == version_before) CHECK(ix.state_digest() == digest_before);
      }
      require_valid(ix);
      const TokenSlotPool& p = ix.pool();
      CHECK(p.tree_count() + p.private_count() + p.free_count() == p.size());
      CHECK(ix.tree().ledger().total_tokens == p.tree_count());
    }
  }
}
