// Radix rows of `kvrt bench index`: per-token match and insert cost, lock +
// unlock of a depth-10 path, and per-node eviction of the RadixTree core
// (spec 0x08, SGLang RadixCache semantics, validate() off), on a generated
// chat workload (bench/chat_workload.hpp). Baselines run in the same process
// on the same workload:
//   - match / insert: a linear scan over the stored sequences (no tree);
//   - evict: the same evictions with the candidate heap rebuilt from every
//     unlocked leaf before each call, as SGLang's evict() does.
#include "bench/radix_bench.hpp"

#include <malloc.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/chat_workload.hpp"
#include "services/radix/radix_tree.hpp"

namespace kvrt::bench {
namespace {

struct Sizes {
  ChatWorkloadShape shape;
  int radix_trials = 5;
  int baseline_trials = 3;
  uint32_t lock_pairs = 1u << 20;
  uint64_t evict_call_tokens = 2048;  // one prompt's worth per call, as a scheduler asks [tokens]
};

Sizes sizes(bool quick) {
  Sizes s;
  if (quick) {
    s.shape.requests = 200;
    s.radix_trials = 3;
    s.baseline_trials = 1;
    s.lock_pairs = 1u << 14;
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The naive baseline: every cached sequence stored whole; a lookup scans all
// of them for the longest common prefix.
class SequenceList {
 public:
  uint32_t match(std::span<const TokenId> q, std::vector<TokenSlotId>* slots_out) const {
    uint32_t best = 0;
    const Stored* from = nullptr;
    for (const Stored& s : list_) {
      const size_t limit = std::min(s.tokens.size(), q.size());
      uint32_t i = 0;
      while (i < limit && s.tokens[i] == q[i]) ++i;
      if (i > best) best = i, from = &s;
    }
    if (slots_out != nullptr && from != nullptr) slots_out->assign(from->slots.begin(), from->slots.begin() + best);
    return best;
  }
  uint32_t insert(std::span<const TokenId> tokens, std::span<const TokenSlotId> slots) {
    std::vector<TokenSlotId> cached;
    const uint32_t prefix = match(tokens, &cached);
    if (prefix < tokens.size()) {
      Stored s{std::vector<TokenId>(tokens.begin(), tokens.end()), std::move(cached)};
      s.slots.insert(s.slots.end(), slots.begin() + prefix, slots.end());
      list_.push_back(std::move(s));
    }
    return prefix;
  }

 private:
  struct Stored {
    std::vector<TokenId> tokens;
    std::vector<TokenSlotId> slots;
  };
  std::vector<Stored> list_;
};

struct StreamCost {
  double match_ns = 0, insert_ns = 0;  // sums [ns]
  uint64_t matched = 0, inserted = 0;  // sums [tokens]
  double match_per_token() const { return match_ns / double(matched); }
  double insert_per_token() const { return insert_ns / double(inserted); }
};

// Each request: look its prompt up (collecting the matched slots), then
// publish its prompt + response with fresh slots. The request's tokens are
// first copied into a scratch buffer, untimed: a prompt arrives in cache
// (just tokenized), while the index's edges are wherever the index left them.
template <class Index>
StreamCost replay_stream(const ChatWorkload& w, Index& index) {
  StreamCost c;
  std::vector<TokenSlotId> matched_slots, fresh;
  std::vector<TokenId> request;
  uint64_t next_slot = 1;
  for (const ChatRequest& r : w.requests) {
    matched_slots.clear();
    request.assign(r.sequence.begin(), r.sequence.end());
    fresh.resize(r.sequence.size());
    for (auto& s : fresh) s = TokenSlotId{next_slot++};
    const uint64_t t0 = now_ns();
    const uint32_t matched = index.match_tokens(std::span<const TokenId>(request.data(), r.prompt_len), &matched_slots);
    const uint64_t t1 = now_ns();
    const uint32_t prefix = index.insert_tokens(request, fresh);
    const uint64_t t2 = now_ns();
    do_not_optimize(matched_slots.data());
    c.match_ns += double(t1 - t0);
    c.insert_ns += double(t2 - t1);
    c.matched += matched;
    c.inserted += r.sequence.size() - prefix;
  }
  return c;
}

struct TreeIndex {
  RadixTree tree = RadixTree::create(RadixOptions{}).value();
  uint32_t match_tokens(std::span<const TokenId> q, std::vector<TokenSlotId>* out) {
    return tree.match(RadixKeyView{q, 0}, out).matched;
  }
  uint32_t insert_tokens(std::span<const TokenId> t, std::span<const TokenSlotId> s) {
    return tree.insert(RadixKeyView{t, 0}, s).value().prefix_len;
  }
};

struct ListIndex {
  SequenceList list;
  uint32_t match_tokens(std::span<const TokenId> q, std::vector<TokenSlotId>* out) { return list.match(q, out); }
  uint32_t insert_tokens(std::span<const TokenId> t, std::span<const TokenSlotId> s) { return list.insert(t, s); }
};

// A 10-node path (ten 10-token edges, each split off by a one-token branch)
// added to a workload tree, then lock + unlock of its terminal.
double lock_unlock_depth10(TreeIndex& index, uint32_t pairs) {
  std::vector<TokenId> chain(100);
  for (TokenId k = 0; k < 100; ++k) chain[k] = 2'000'000'000 + k;  // outside the workload vocabulary
  uint64_t next_slot = 1'000'000'000;
  auto fresh = [&](size_t n) {
    std::vector<TokenSlotId> s(n);
    for (auto& x : s) x = TokenSlotId{next_slot++};
    return s;
  };
  (void)index.tree.insert(RadixKeyView{chain, 0}, fresh(chain.size())).value();
  for (uint32_t d = 1; d < 10; ++d) {
    std::vector<TokenId> branch(chain.begin(), chain.begin() + 10 * d);
    branch.push_back(2'100'000'000 + static_cast<TokenId>(d));
    (void)index.tree.insert(RadixKeyView{branch, 0}, fresh(branch.size())).value();
  }
  const RadixNodeRef terminal = index.tree.match(RadixKeyView{chain, 0}).terminal;
  KVRT_ASSERT(index.tree.path_ids(terminal).size() == 10, "the bench chain must be 10 nodes deep");
  const uint64_t t0 = now_ns();
  for (uint32_t k = 0; k < pairs; ++k) {
    do_not_optimize(index.tree.inc_lock(terminal).value());
    do_not_optimize(index.tree.dec_lock(terminal).value());
  }
  return double(now_ns() - t0) / pairs;
}

// Fills `index` with the workload (untimed), then empties it with
// evict(call_tokens) calls; ns per evicted node. The same index is refilled
// for every trial, as a serving index reuses its memory.
double evict_per_node(const ChatWorkload& w, TreeIndex& index, uint64_t call_tokens, bool rebuild_heap_each_call) {
  (void)replay_stream(w, index);
  RadixTree& tree = index.tree;
  const uint32_t nodes = tree.ledger().nodes;
  std::vector<std::pair<EvictionKey, NodeIndex>> heap;
  uint64_t evicted = 0;
  const uint64_t t0 = now_ns();
  while (tree.ledger().total_tokens > 0) {
    if (rebuild_heap_each_call) {
      heap.clear();
      tree.for_each_node([&](RadixNodeRef ref, const RadixNode& n) {
        if (n.lock_count == 0 && n.child_count == 0) heap.emplace_back(tree.eviction_key(n), ref.index);
      });
      std::make_heap(heap.begin(), heap.end(), std::greater<>{});
      do_not_optimize(heap.data());
    }
    evicted += tree.evict(call_tokens).evicted_nodes;
  }
  const double ns = double(now_ns() - t0);
  KVRT_ASSERT(evicted == nodes, "every node is evicted exactly once");
  return ns / double(evicted);
}

BenchRow row(std::string name, double value, std::string unit, double target, std::string note) {
  BenchRow r;
  r.name = std::move(name);
  r.value = value;
  r.unit = std::move(unit);
  r.target = Target{target, Better::lower};
  r.note = std::move(note);
  return r;
}

}  // namespace

BenchReport run_radix_index_bench(bool quick) {
  // Steady state: a serving index recycles its edge memory. Without this,
  // glibc hands the memory of one trial's tree back to the OS and the next
  // trial measures page faults instead of the index. Restored on return.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const Sizes s = sizes(quick);
  const ChatWorkload w = make_chat_workload(s.shape, 20261130);
  BenchReport rep;
  rep.bench = "index";
  rep.quick = quick;
  {
    TreeIndex warm_up;  // maps the allocator's pages once, untimed
    (void)replay_stream(w, warm_up);
  }

  std::vector<double> match_ns, insert_ns;
  uint64_t matched = 0, inserted = 0, nodes = 0;
  for (int t = 0; t < s.radix_trials; ++t) {
    TreeIndex index;
    const StreamCost c = replay_stream(w, index);
    match_ns.push_back(c.match_per_token());
    insert_ns.push_back(c.insert_per_token());
    matched = c.matched;
    inserted = c.inserted;
    nodes = index.tree.ledger().nodes;
  }
  std::vector<double> list_match_ns, list_insert_ns;
  for (int t = 0; t < s.baseline_trials; ++t) {
    ListIndex list;
    const StreamCost c = replay_stream(w, list);
    KVRT_ASSERT(c.matched == matched && c.inserted == inserted, "baseline and tree disagree on the workload");
    list_match_ns.push_back(c.match_per_token());
    list_insert_ns.push_back(c.insert_per_token());
  }
  BenchRow m = row("radix_match_per_token", median(match_ns), "ns/token", 2.0,
                   "prompt lookups collecting matched slot ids; ns per matched token");
  m.baseline_name = "linear_scan";
  m.baseline = median(list_match_ns);
  rep.rows.push_back(m);
  BenchRow i = row("radix_insert_per_token", median(insert_ns), "ns/token", 2.5,
                   "prompt + response published with fresh slots; ns per newly stored token");
  i.baseline_name = "linear_scan";
  i.baseline = median(list_insert_ns);
  rep.rows.push_back(i);

  rep.rows.push_back(row("radix_lock_unlock_depth10",
                         median_of(s.radix_trials,
                                   [&] {
                                     TreeIndex index;
                                     (void)replay_stream(w, index);
                                     return lock_unlock_depth10(index, s.lock_pairs);
                                   }),
                         "ns/op", 100.0, "inc_lock + dec_lock of a 10-node path in the workload tree"));

  TreeIndex evict_index;
  BenchRow e =
      row("radix_evict_per_node",
          median_of(s.radix_trials, [&] { return evict_per_node(w, evict_index, s.evict_call_tokens, false); }),
          "ns/node", 100.0,
          "evict(" + std::to_string(s.evict_call_tokens) +
              " tokens) calls until empty; victims from the incrementally kept order");
  e.baseline_name = "heap_per_call";
  e.baseline = median_of(s.baseline_trials, [&] { return evict_per_node(w, evict_index, s.evict_call_tokens, true); });
  rep.rows.push_back(e);

  rep.notes.push_back("chat workload: " + std::to_string(s.shape.requests) + " requests, " +
                      std::to_string(s.shape.system_prompts) + " shared system prompts, " +
                      std::to_string(w.prompt_tokens) + " prompt tokens, " + std::to_string(matched) + " matched, " +
                      std::to_string(inserted) + " stored in " + std::to_string(nodes) +
                      " nodes; page size 1, LRU, validate() off; one untimed warm-up pass; the evict rows refill and "
                      "empty one reused tree (steady state)");
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);  // glibc's default
  rep.notes.push_back(
      "baselines: linear_scan = longest common prefix over every stored sequence; heap_per_call = "
      "the same evictions after rebuilding a heap of all unlocked leaves (SGLang evict())");
  return rep;
}

}  // namespace kvrt::bench
