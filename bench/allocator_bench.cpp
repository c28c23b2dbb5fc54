// `kvrt bench allocator`: per-operation cost of the allocator owner on one
// thread with validate() off, against the rectangular reservation baseline
// replaying the same operation trace in the same run.
//
// Geometry: one cache group (the vLLM v1 single-group comparison point),
// P = 16 tokens per block, 128-block (2048-token) prompts. Receipts are filled
// in full (digests, deltas, published entries) for every operation. The COW
// path is measured on metadata (no payload store): its byte copy depends on
// B_row and is a memcpy of r rows.
#include "bench/allocator_bench.hpp"

#include <cstdint>
#include <string>

#include "bench/rectangular_baseline.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/common/splitmix64.hpp"

namespace kvrt {

// The rows time the transactions' bodies in place, one receipt lent to every
// call (its vectors reused, nothing allocated); append_private_tail_call
// times the same appends through the public Result-returning operation.
struct BlockAllocatorBodies {
  BlockAllocator& al;
  Status allocate(const AllocateArgs& a, AllocationReceipt& out) { return al.allocate_into(a, out); }
  Status append(const AppendArgs& a, AllocationReceipt& out) { return al.append_into(a, out); }
  Status fork(const ForkArgs& a, AllocationReceipt& out) { return al.fork_into(a, out); }
  Status commit_rows(const CommitRowsArgs& a, AllocationReceipt& out) { return al.commit_rows_into(a, out); }
  Status release(const ReleaseArgs& a, ReleaseResult& out) { return al.release_into(a, out); }
  Status publish_cache_key(const PhysicalBlockHandle& h, CacheKey k, AllocationReceipt& out) {
    return al.publish_cache_key_into(h, k, out);
  }
};

}  // namespace kvrt

namespace kvrt::bench {
namespace {

// splitmix64: a generator cheap enough not to dominate the ops it drives
// (std::mt19937_64 cost as much as a kvrt append).
struct SplitMix {
  SplitMix64 stream;
  uint64_t operator()() { return stream.next(); }
};

// The public operations answer Result<Receipt> and recycle the receipt they
// are lent: keep() takes it back into `r`.
template <class Receipt>
Status keep(Result<Receipt> answer, Receipt& r) {
  if (!answer.ok()) return answer.error();
  r = std::move(answer).value();
  return Status::success();
}

constexpr uint32_t kP = 16;
constexpr uint32_t kPromptRows = 2048;  // 128 blocks
constexpr uint32_t kTMax = 4096;        // baseline reservation per request [rows]

BlockAllocator make_allocator(uint32_t blocks, uint32_t max_requests) {
  BlockAllocatorConfig c;
  c.block_size = kP;
  c.max_requests = max_requests;
  c.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{1}, PoolGeneration{1}, blocks, 0, 64 * 1024, {}});
  return BlockAllocator::create(c).value();
}

struct Sizes {
  uint32_t requests;  // requests per trial
  int trials;
};

// ns per allocate of a 128-block prompt (releases untimed).
double kvrt_allocate(const Sizes& s, double& release_ns) {
  BlockAllocator al = make_allocator(s.requests * 128, s.requests);
  BlockAllocatorBodies tx{al};
  AllocationReceipt r;
  ReleaseResult rr;
  std::vector<RequestFence> fences(s.requests);
  double alloc_total = 0, release_total = 0;
  alloc_total = median_of(s.trials, [&] {
    const uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < s.requests; ++i) {
      (void)tx.allocate(AllocateArgs{kPromptRows, {}, {}}, r);
      fences[i] = RequestFence{r.request_id, r.request_generation, r.table_version_after};
    }
    const uint64_t t1 = now_ns();
    for (uint32_t i = 0; i < s.requests; ++i) (void)tx.release(ReleaseArgs{fences[i], ReleaseReason::finished}, rr);
    const uint64_t t2 = now_ns();
    release_total += double(t2 - t1) / s.requests;
    return double(t1 - t0) / s.requests;
  });
  release_ns = release_total / s.trials;
  return alloc_total;
}

double kvrt_release(const Sizes& s) {
  BlockAllocator al = make_allocator(s.requests * 128, s.requests);
  BlockAllocatorBodies tx{al};
  AllocationReceipt r;
  ReleaseResult rr;
  std::vector<RequestFence> fences(s.requests);
  return median_of(s.trials, [&] {
    for (uint32_t i = 0; i < s.requests; ++i) {
      (void)tx.allocate(AllocateArgs{kPromptRows, {}, {}}, r);
      fences[i] = RequestFence{r.request_id, r.request_generation, r.table_version_after};
    }
    const uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < s.requests; ++i) (void)tx.release(ReleaseArgs{fences[i], ReleaseReason::finished}, rr);
    return double(now_ns() - t0) / s.requests;
  });
}

// The floor under release_128_blocks, measured in the same run: the same
// blocks' reference drops and free-ring pushes alone (no fence, receipt,
// digest, epoch or pool counters), over the tables the allocator laid out,
// with the allocator's own BlockMeta and FreeBlockRing.
double release_floor(const Sizes& s) {
  const uint32_t capacity = s.requests * 128;
  BlockAllocator al = make_allocator(capacity, s.requests);
  BlockAllocatorBodies tx{al};
  AllocationReceipt r;
  std::vector<std::vector<uint32_t>> tables(s.requests);
  for (uint32_t i = 0; i < s.requests; ++i) {
    (void)tx.allocate(AllocateArgs{kPromptRows, {}, {}}, r);
    const std::vector<PhysicalBlockHandle> table = al.table(r.request_id, 0).value();
    for (const PhysicalBlockHandle& h : table) tables[i].push_back(h.block.value);
  }
  std::vector<BlockMeta> blocks(capacity);
  FreeBlockRing ring;
  return median_of(s.trials, [&] {
    for (BlockMeta& b : blocks) {
      b.refcount = 1;
      b.state = BlockState::live;
    }
    ring = FreeBlockRing(capacity);
    const uint64_t t0 = now_ns();
    for (const auto& table : tables)
      for (size_t j = table.size(); j-- > 0;) {
        BlockMeta& b = blocks[table[j]];
        if (--b.refcount == 0) {
          b.state = BlockState::free;
          ring.push_back(table[j]);
        }
      }
    const double ns = double(now_ns() - t0) / s.requests;
    do_not_optimize(ring.size());
    return ns;
  });
}

// Decode appends: private-tail appends (offsets 1..15) and new-block appends
// (offset 0) timed separately over the same decode loop. kThroughCall: the
// appends go through the public BlockAllocator::append, whose answer moves
// the lent receipt into a Result and back.
template <bool kThroughCall>
void kvrt_append(const Sizes& s, double& private_ns, double& new_block_ns) {
  const uint32_t rounds = 64;  // tokens appended per request per trial
  BlockAllocator al = make_allocator(s.requests * (2 + (rounds + 16) / kP + 1), s.requests);
  BlockAllocatorBodies tx{al};
  AllocationReceipt r;
  ReleaseResult rr;
  std::vector<RequestFence> f(s.requests);
  std::vector<double> priv, fresh;
  for (int trial = 0; trial < s.trials; ++trial) {
    for (uint32_t i = 0; i < s.requests; ++i) {
      (void)tx.allocate(AllocateArgs{17, {}, {}}, r);  // offset 1 in block 1
      f[i] = RequestFence{r.request_id, r.request_generation, r.table_version_after};
    }
    uint64_t priv_ns = 0, fresh_ns = 0, priv_n = 0, fresh_n = 0;
    for (uint32_t t = 17; t < 17 + rounds; ++t) {
      const uint64_t t0 = now_ns();
      for (uint32_t i = 0; i < s.requests; ++i) {
        if constexpr (kThroughCall)
          (void)keep(al.append(AppendArgs{f[i], {}, {}}, std::move(r)), r);
        else
          (void)tx.append(AppendArgs{f[i], {}, {}}, r);
        f[i].table_version = r.table_version_after;
      }
      const uint64_t dt = now_ns() - t0;
      if (t % kP == 0)
        fresh_ns += dt, fresh_n += s.requests;
      else
        priv_ns += dt, priv_n += s.requests;
    }
    priv.push_back(double(priv_ns) / priv_n);
    fresh.push_back(double(fresh_ns) / fresh_n);
    for (uint32_t i = 0; i < s.requests; ++i) (void)tx.release(ReleaseArgs{f[i], ReleaseReason::finished}, rr);
  }
  std::sort(priv.begin(), priv.end());
  std::sort(fresh.begin(), fresh.end());
  private_ns = priv[priv.size() / 2];
  new_block_ns = fresh[fresh.size() / 2];
}

// fork of a 128-block request, then a COW append on the child at offset 1.
void kvrt_fork_cow(const Sizes& s, double& fork_ns, double& cow_ns) {
  BlockAllocator al = make_allocator(s.requests * 2 + 256, s.requests + 1);
  BlockAllocatorBodies tx{al};
  AllocationReceipt r;
  ReleaseResult rr;
  (void)tx.allocate(AllocateArgs{kPromptRows + 1, {}, {}}, r);  // 129 blocks, tail offset 1
  RequestFence parent{r.request_id, r.request_generation, r.table_version_after};
  (void)tx.commit_rows(CommitRowsArgs{parent, kPromptRows + 1}, r);
  parent.table_version = r.table_version_after;
  std::vector<RequestFence> kids(s.requests - 1);
  std::vector<double> forks, cows;
  for (int trial = 0; trial < s.trials; ++trial) {
    uint64_t t0 = now_ns();
    for (auto& k : kids) {
      (void)tx.fork(ForkArgs{parent}, r);
      k = RequestFence{r.request_id, r.request_generation, r.table_version_after};
    }
    forks.push_back(double(now_ns() - t0) / kids.size());
    t0 = now_ns();
    for (auto& k : kids) {
      (void)tx.append(AppendArgs{k, {}, {}}, r);
      k.table_version = r.table_version_after;
    }
    cows.push_back(double(now_ns() - t0) / kids.size());
    for (auto& k : kids) (void)tx.release(ReleaseArgs{k, ReleaseReason::finished}, rr);
  }
  std::sort(forks.begin(), forks.end());
  std::sort(cows.begin(), cows.end());
  fork_ns = forks[forks.size() / 2];
  cow_ns = cows[cows.size() / 2];
}

// A pool whose blocks are all cached and unreferenced: every allocation of a
// one-block prompt evicts the oldest cached block.
double kvrt_evict_on_allocate(const Sizes& s) {
  const uint32_t blocks = s.requests;
  BlockAllocator al = make_allocator(blocks, blocks);
  BlockAllocatorBodies tx{al};
  AllocationReceipt r;
  ReleaseResult rr;
  std::vector<RequestFence> f(blocks);
  uint64_t key = 1;
  return median_of(s.trials, [&] {
    for (uint32_t i = 0; i < blocks; ++i) {
      (void)tx.allocate(AllocateArgs{kP, {}, {}}, r);
      f[i] = RequestFence{r.request_id, r.request_generation, r.table_version_after};
      (void)tx.commit_rows(CommitRowsArgs{f[i], kP}, r);
      f[i].table_version = r.table_version_after;
      const PhysicalBlockHandle block = r.published_entries[0].handle;  // copied: r is lent to the call
      (void)tx.publish_cache_key(block, CacheKey{key++}, r);
    }
    for (uint32_t i = 0; i < blocks; ++i) (void)tx.release(ReleaseArgs{f[i], ReleaseReason::finished}, rr);
    (void)al.drain_events();
    const uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < blocks; ++i) {
      (void)tx.allocate(AllocateArgs{kP, {}, {}}, r);
      f[i] = RequestFence{r.request_id, r.request_generation, r.table_version_after};
    }
    const double ns = double(now_ns() - t0) / blocks;
    for (uint32_t i = 0; i < blocks; ++i) (void)tx.release(ReleaseArgs{f[i], ReleaseReason::finished}, rr);
    (void)al.drain_events();
    return ns;
  });
}

// Seeded mix of engine-loop operations; returns operations per second.
// The mixed trace, one step per draw. An allocate step is allocate plus the
// commit_rows that publishes the prefilled prompt, and a fork step commits the
// parent's rows before forking it (parallel sampling forks after prefill), so
// that the copy-on-write appends of forked requests find committed rows.
// Appends publish no rows (metadata only). `rejected` counts steps that
// answered an Error: a well-formed trace has none.
double kvrt_mixed(const Sizes& s, uint64_t seed, uint64_t& rejected) {
  const uint32_t max_live = 256;
  BlockAllocator al = make_allocator(max_live * 24, max_live);
  BlockAllocatorBodies tx{al};
  rejected = 0;
  return median_of(s.trials, [&] {
    SplitMix rng{seed};
    AllocationReceipt r;
    ReleaseResult rr;
    std::vector<RequestFence> live;
    uint64_t ops = 0;
    const uint64_t total = uint64_t{s.requests} * 256;
    auto committed = [&](const Status& st) {
      if (!st.ok()) ++rejected;
      return st.ok() && r.outcome == AllocationOutcome::committed;
    };
    auto fence_of = [&] { return RequestFence{r.request_id, r.request_generation, r.table_version_after}; };
    const uint64_t t0 = now_ns();
    while (ops < total) {
      const uint32_t dice = static_cast<uint32_t>(rng() % 100);
      if (live.size() < 8 || (dice < 4 && live.size() < max_live)) {
        const uint32_t rows = static_cast<uint32_t>(64 + rng() % 192);
        if (committed(tx.allocate(AllocateArgs{rows, {}, {}}, r))) {
          const RequestFence fresh = fence_of();  // read before r is lent to commit_rows
          if (committed(tx.commit_rows(CommitRowsArgs{fresh, rows}, r))) live.push_back(fence_of());
        }
      } else if (dice < 90) {
        auto& f = live[rng() % live.size()];
        if (committed(tx.append(AppendArgs{f, {}, {}}, r))) f.table_version = r.table_version_after;
      } else if (dice < 93 && live.size() < max_live) {
        auto& f = live[rng() % live.size()];
        const uint32_t context = al.context_tokens(f.request).value();
        if (committed(tx.commit_rows(CommitRowsArgs{f, context}, r))) {
          f.table_version = r.table_version_after;
          if (committed(tx.fork(ForkArgs{f}, r))) live.push_back(fence_of());
        }
      } else {
        const size_t k = rng() % live.size();
        if (!tx.release(ReleaseArgs{live[k], ReleaseReason::finished}, rr).ok()) ++rejected;
        live[k] = live.back();
        live.pop_back();
      }
      ++ops;
    }
    const double secs = double(now_ns() - t0) * 1e-9;
    for (auto& f : live) (void)tx.release(ReleaseArgs{f, ReleaseReason::finished}, rr);
    return double(ops) / secs;
  });
}

// --- baseline: the same traces on rectangular reservations -----------------

double rect_allocate(const Sizes& s, double& release_ns) {
  RectangularReservationAllocator rect(uint64_t{s.requests} * kTMax);
  std::vector<int64_t> ids(s.requests);
  double rel = 0;
  const double alloc = median_of(s.trials, [&] {
    const uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < s.requests; ++i) ids[i] = rect.reserve(kTMax, kPromptRows);
    const uint64_t t1 = now_ns();
    for (uint32_t i = 0; i < s.requests; ++i) rect.release(static_cast<uint32_t>(ids[i]));
    rel += double(now_ns() - t1) / s.requests;
    return double(t1 - t0) / s.requests;
  });
  release_ns = rel / s.trials;
  return alloc;
}

double rect_append(const Sizes& s) {
  RectangularReservationAllocator rect(uint64_t{s.requests} * kTMax);
  std::vector<int64_t> ids(s.requests);
  for (uint32_t i = 0; i < s.requests; ++i) ids[i] = rect.reserve(kTMax, 17);
  return median_of(s.trials, [&] {
    const uint64_t t0 = now_ns();
    for (uint32_t t = 0; t < 16; ++t)
      for (uint32_t i = 0; i < s.requests; ++i) do_not_optimize(rect.append(static_cast<uint32_t>(ids[i])));
    return double(now_ns() - t0) / (16.0 * s.requests);
  });
}

double rect_fork(const Sizes& s) {
  RectangularReservationAllocator rect(uint64_t{s.requests + 1} * kTMax);
  const auto parent = static_cast<uint32_t>(rect.reserve(kTMax, kPromptRows + 1));
  std::vector<int64_t> kids(s.requests - 1);
  return median_of(s.trials, [&] {
    const uint64_t t0 = now_ns();
    for (auto& k : kids) k = rect.fork(parent);
    const double ns = double(now_ns() - t0) / kids.size();
    for (auto k : kids) rect.release(static_cast<uint32_t>(k));
    return ns;
  });
}

double rect_mixed(const Sizes& s, uint64_t seed) {
  const uint32_t max_live = 256;
  RectangularReservationAllocator rect(uint64_t{max_live} * 512);
  return median_of(s.trials, [&] {
    SplitMix rng{seed};
    std::vector<uint32_t> live;
    uint64_t ops = 0;
    const uint64_t total = uint64_t{s.requests} * 256;
    const uint64_t t0 = now_ns();
    while (ops < total) {
      const uint32_t dice = static_cast<uint32_t>(rng() % 100);
      if (live.size() < 8 || (dice < 4 && live.size() < max_live)) {
        const int64_t id = rect.reserve(512, static_cast<uint32_t>(64 + rng() % 192));
        if (id >= 0) live.push_back(static_cast<uint32_t>(id));
      } else if (dice < 90) {
        do_not_optimize(rect.append(live[rng() % live.size()]));
      } else if (dice < 93 && live.size() < max_live) {
        const int64_t id = rect.fork(live[rng() % live.size()]);
        if (id >= 0) live.push_back(static_cast<uint32_t>(id));
      } else {
        const size_t k = rng() % live.size();
        rect.release(live[k]);
        live[k] = live.back();
        live.pop_back();
      }
      ++ops;
    }
    const double secs = double(now_ns() - t0) * 1e-9;
    for (auto id : live) rect.release(id);
    return double(ops) / secs;
  });
}

BenchRow ns_row(std::string name, double value, std::optional<double> baseline, double target) {
  BenchRow row;
  row.name = std::move(name);
  row.value = value;
  row.unit = "ns/op";
  if (baseline) {
    row.baseline_name = "rectangular";
    row.baseline = *baseline;
  }
  row.target = Target{target, Better::lower};
  return row;
}

}  // namespace

BenchReport run_allocator_bench(bool quick) {
  const Sizes s = quick ? Sizes{64, 3} : Sizes{1024, 9};
  BenchReport rep;
  rep.bench = "allocator";
  rep.quick = quick;

  double kvrt_release_in_alloc = 0, rect_release_ns = 0;
  const double alloc = kvrt_allocate(s, kvrt_release_in_alloc);
  const double rect_alloc = rect_allocate(s, rect_release_ns);
  rep.rows.push_back(ns_row("allocate_128_blocks", alloc, rect_alloc, 1000));

  double priv = 0, fresh = 0, priv_call = 0, fresh_call = 0;
  kvrt_append<false>(s, priv, fresh);
  kvrt_append<true>(s, priv_call, fresh_call);
  const double rect_app = rect_append(s);
  rep.rows.push_back(ns_row("append_private_tail", priv, rect_app, 25));
  rep.rows.push_back(ns_row("append_new_block", fresh, rect_app, 40));
  BenchRow call_row = ns_row("append_private_tail_call", priv_call, std::nullopt, 0);
  call_row.target.reset();
  call_row.baseline_name = "in_place";
  call_row.baseline = priv;
  call_row.note = "the same appends through the public append(), which moves the lent receipt into its Result and back";
  rep.rows.push_back(call_row);

  double fork_ns = 0, cow_ns = 0;
  kvrt_fork_cow(s, fork_ns, cow_ns);
  BenchRow fork_row = ns_row("fork", fork_ns, rect_fork(s), 0);
  fork_row.target.reset();
  fork_row.note = "fork of a 129-block request; baseline reserves and copies a second T_max range";
  rep.rows.push_back(fork_row);
  BenchRow cow_row = ns_row("cow_append", cow_ns, rect_app, 0);
  cow_row.target.reset();
  cow_row.note = "metadata only (no payload store); baseline appends into its private reservation";
  rep.rows.push_back(cow_row);

  rep.rows.push_back(ns_row("release_128_blocks", kvrt_release(s), rect_release_ns, 150));
  BenchRow floor = ns_row("release_refcount_floor", release_floor(s), std::nullopt, 0);
  floor.target.reset();
  floor.note =
      "the same 128 blocks' reference drops and free-ring pushes alone, no receipt/digest/fence: "
      "what any per-block release costs on this machine";
  rep.rows.push_back(floor);
  BenchRow evict = ns_row("evict_on_allocate", kvrt_evict_on_allocate(s), std::nullopt, 0);
  evict.target.reset();
  evict.note = "one-block allocation that evicts the oldest cached block; the baseline has no cache";
  rep.rows.push_back(evict);

  BenchRow mixed;
  mixed.name = "mixed_ops";
  uint64_t rejected = 0;
  mixed.value = kvrt_mixed(s, 20261130, rejected);
  mixed.unit = "ops/s";
  mixed.better = Better::higher;
  mixed.baseline_name = "rectangular";
  mixed.baseline = rect_mixed(s, 20261130);
  mixed.target = Target{20e6, Better::higher};
  mixed.note = "seeded mix of steps: 86% append, 4% allocate (+ commit_rows), 3% fork (commit_rows +), 7% release; " +
               std::to_string(rejected) + " steps rejected";
  rep.rows.push_back(mixed);

  BenchRow meta;
  meta.name = "metadata_per_block";
  // One block descriptor, its place in the free ring, and one request-map
  // entry per block reference.
  meta.value = double(sizeof(BlockMeta) + sizeof(uint32_t) + sizeof(uint32_t));
  meta.unit = "bytes";
  meta.baseline_name = "rectangular";
  // The baseline keeps one record per request; per 16-row block of a
  // 2048-row request that is record / 128.
  meta.baseline = double(RectangularReservationAllocator::metadata_bytes_per_request()) / 128.0;
  meta.target = Target{48, Better::lower};
  meta.note =
      "BlockMeta (32 B per pool block) + 4 B free-ring entry + 4 B request-map entry; the baseline has no "
      "per-block state";
  rep.rows.push_back(meta);

  rep.notes.push_back("single cache group, P = 16, validate() off, full receipts with incremental digests");
  return rep;
}

}  // namespace kvrt::bench
