// `kvrt bench attention`: the kernel executor measured against
// limits measured in the same run on the same threads (docs/benchmarks.md).
//
//   copy_bandwidth     memcpy of a large buffer split across the pool's
//                      workers; counted as bytes read plus bytes written
//                      (2N / t, the STREAM "copy" convention), so that a
//                      kernel's "bytes moved" and the copy's are the same unit.
//   read_bandwidth     an integer sum over a large buffer (context only: the
//                      read-only ceiling a decode kernel could at best reach).
//   fp32_matmul_rate   executor::blocked_matmul, C = A B at n x n x n, 2n^3 flops.
//   paged_decode_*     one decode query row per query head (H_q 32, H_kv 8,
//                      d 128, fp32 K/V, P_a = P_k = 16) over one request whose
//                      table the allocator owner produced in a fresh pool; K
//                      plus V bytes read per second, over copy bandwidth.
//   shared prefix      B sequences sharing an S-token prefix, U private tokens
//                      each (same heads and widths, P_c = 512): ordinary paged
//                      decode over block tables that share the prefix blocks,
//                      versus Hydragen and ChunkAttention over the snapshot.
//                      ideal speedup = floor(ordinary) / floor(design), each
//                      floor = max(bytes moved / copy bandwidth,
//                                  flops / matmul rate),
//                      bytes = K/V payload read + queries + outputs (+ the
//                      design's partial states, written and read back), flops
//                      = 4 d H_q per logical query-key pair. The row reports
//                      measured speedup / ideal speedup.
#include "bench/attention_bench.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/common/splitmix64.hpp"
#include "services/executor/allocator_block_table.hpp"
#include "services/executor/blocked_matmul.hpp"
#include "services/executor/chunk_attention.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/shared_prefix_workload.hpp"

namespace kvrt::bench {
namespace {

using namespace kvrt::executor;

constexpr uint32_t kQHeads = 32, kKvHeads = 8, kDim = 128, kBlock = 16;
constexpr uint64_t kRowBytes = 2ull * kKvHeads * kDim * sizeof(float);  // K plus V of one token [bytes]

double seconds_since(uint64_t t0) { return double(now_ns() - t0) * 1e-9; }

// Uniform values in [-1, 1) from splitmix64: filling hundreds of MiB must not
// dominate the benchmark.
void fill(std::vector<float>& v, uint64_t seed) {
  SplitMix64 s{seed};
  for (float& x : v) x = float(int32_t(uint32_t(s.next() >> 32))) * (1.0f / 2147483648.0f);
}

// A plain fp32 [slot][token][head][lane] pool of `slots` blocks.
struct BenchPool {
  std::vector<float> k, v;
  PagedKvView view;
  BenchPool(uint32_t slots, uint64_t seed) : k(uint64_t{slots} * kBlock * kKvHeads * kDim), v(k.size()) {
    fill(k, seed);
    fill(v, seed + 1);
    const PlainPoolShape shape{slots, kBlock, kKvHeads, kDim, kDim, ScalarType::fp32, ScalarType::fp32};
    view = plain_kv_view(shape, KvTensorBytes{reinterpret_cast<const std::byte*>(k.data()), k.size() * 4, {}},
                         KvTensorBytes{reinterpret_cast<const std::byte*>(v.data()), v.size() * 4, {}})
               .value();
  }
};

// Bytes read plus written per second by memcpy across all workers [GB/s].
double copy_bandwidth(ThreadPool& pool, uint64_t bytes, int trials) {
  std::vector<char> src(bytes, 1), dst(bytes, 2);
  const unsigned w = pool.workers();
  return median_of(trials, [&] {
    const uint64_t t0 = now_ns();
    pool.parallel_for(w, [&](size_t i, unsigned) {
      const uint64_t share = bytes / w, off = i * share, n = i + 1 == w ? bytes - off : share;
      std::memcpy(dst.data() + off, src.data() + off, n);
    });
    const double s = seconds_since(t0);
    do_not_optimize(dst[bytes / 2]);
    return 2.0 * double(bytes) / s * 1e-9;
  });
}

// Bytes read per second by a plain sum over a large buffer across all
// workers [GB/s]: the ceiling a read-only kernel such as decode can reach,
// for context (memory systems read faster than they copy).
double read_bandwidth(ThreadPool& pool, uint64_t bytes, int trials) {
  std::vector<uint64_t> words(bytes / 8, 1);
  const unsigned w = pool.workers();
  std::vector<uint64_t> sums(w);
  return median_of(trials, [&] {
    const uint64_t t0 = now_ns();
    pool.parallel_for(w, [&](size_t i, unsigned) {
      const uint64_t share = words.size() / w, begin = i * share, end = i + 1 == w ? words.size() : begin + share;
      uint64_t sum = 0;
      for (uint64_t j = begin; j < end; ++j) sum += words[j];  // integer sum: vectorised, order-free
      sums[i] = sum;
    });
    const double s = seconds_since(t0);
    do_not_optimize(sums[0]);
    return double(words.size() * 8) / s * 1e-9;
  });
}

double matmul_rate(ThreadPool& pool, uint32_t n, int trials) {
  std::vector<float> a(uint64_t{n} * n), b(a.size()), c(a.size());
  fill(a, 11);
  fill(b, 12);
  return median_of(trials, [&] {
    const uint64_t t0 = now_ns();
    blocked_matmul(n, n, n, a.data(), n, b.data(), n, c.data(), n, &pool);
    const double s = seconds_since(t0);
    do_not_optimize(c[n]);
    return 2.0 * n * n * double(n) / s * 1e-9;
  });
}

// K/V bytes read per second by paged decode of one request of `ctx` tokens
// [GB/s]. The table comes from the allocator owner (fresh pool: blocks in its
// free-queue order); `scatter` instead permutes the physical blocks, as a
// long-running pool's free queue would.
double decode_gbps(ThreadPool& pool, uint32_t ctx, bool scatter, int trials) {
  const uint32_t blocks = (ctx + kBlock - 1) / kBlock;
  BlockAllocatorConfig config;
  config.block_size = kBlock;
  config.max_requests = 4;
  config.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{1}, PoolGeneration{1}, blocks, 0, kRowBytes, {}});
  BlockAllocator allocator = BlockAllocator::create(config).value();
  const Result<AllocationReceipt> allocated = allocator.allocate(AllocateArgs{ctx, {}, {}});
  KVRT_ASSERT(allocated.ok(), "bench allocation");
  const Result<AllocationReceipt> r = allocator.commit_rows(
      CommitRowsArgs{{allocated->request_id, allocated->request_generation, allocated->table_version_after}, ctx});
  KVRT_ASSERT(r.ok(), "bench commit");
  ResolvedBlockTable table = block_table_from_allocator(allocator, r->request_id, 0, 0).value();
  if (scatter) {
    uint64_t s = 0x5ca77e4;
    for (size_t i = table.slots.size(); i > 1; --i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(table.slots[i - 1], table.slots[(s >> 33) % i]);
    }
  }
  BenchPool kv(blocks, ctx);
  std::vector<float> q(kQHeads * kDim), out(q.size());
  fill(q, 7);
  const std::vector<DecodeRequest> requests{{table.view()}};
  Workspace workspace;
  uint64_t bytes = 0;
  return median_of(trials, [&] {
    const uint64_t t0 = now_ns();
    auto rc =
        paged_decode(kv.view, DecodeArgs{HeadMapping{kQHeads, kKvHeads}, requests, q, out, {}, {}}, &pool, &workspace);
    const double s = seconds_since(t0);
    KVRT_ASSERT(rc.ok(), "bench decode");
    bytes = rc->kv_bytes;
    return double(bytes) / s * 1e-9;
  });
}

struct SharedResult {
  double ordinary_ms = 0, hydragen_ms = 0, chunkattn_ms = 0;
  double ideal_hydragen = 0, ideal_chunkattn = 0;  // floor ratios
  // Each design's own roofline floor [ms]: its bytes at the read bandwidth
  // or its flops at the matmul rate, whichever is larger.
  double hydragen_floor_ms = 0, chunkattn_floor_ms = 0;
};

SharedResult shared_prefix(ThreadPool& pool, uint32_t batch, uint32_t prefix, uint32_t suffix, double copy_gbps,
                           double read_gbps, double matmul_gflops, int trials) {
  SharedPrefixShape shape;
  shape.prefix_tokens = prefix;
  shape.suffix_tokens.assign(batch, suffix);
  shape.chunk_tokens = std::min(512u, prefix);
  shape.block_tokens = kBlock;
  shape.contract = ExecutionContract{HeadMapping{kQHeads, kKvHeads}, kDim, kDim, ScalarType::fp32, ScalarType::fp32, 1};
  const SharedPrefixWorkload w = build_shared_prefix_workload(shape).value();
  BenchPool kv(w.slot_count, uint64_t{batch} * prefix + suffix);
  std::vector<float> q(uint64_t{batch} * kQHeads * kDim), out(q.size());
  fill(q, 3);
  const auto tables = w.tables();
  const SharedPrefixArgs args{&w.snapshot, w.snapshot.fence(), shape.contract.heads, q, out, {}};
  Workspace workspace;  // reused across calls, as a serving loop would
  SharedResult res;
  SharedPrefixReceipt hyd, ca;
  DecodeReceipt ord;
  res.ordinary_ms =
      1e3 * median_of(trials, [&] {
        const uint64_t t0 = now_ns();
        ord =
            paged_decode(kv.view, DecodeArgs{shape.contract.heads, tables, q, out, {}, {}}, &pool, &workspace).value();
        return seconds_since(t0);
      });
  res.hydragen_ms = 1e3 * median_of(trials, [&] {
                      const uint64_t t0 = now_ns();
                      hyd = hydragen_attention(kv.view, args, &pool, &workspace).value();
                      return seconds_since(t0);
                    });
  res.chunkattn_ms = 1e3 * median_of(trials, [&] {
                       const uint64_t t0 = now_ns();
                       ca = chunk_attention(kv.view, args, &pool, &workspace).value();
                       return seconds_since(t0);
                     });
  // Roofline floors [s]. Queries read and outputs written by every variant.
  const double io = 2.0 * double(q.size()) * sizeof(float);
  const double flops = 4.0 * kDim * kQHeads * double(hyd.ledger.logical_pairs);
  auto floor = [&](double bytes) { return std::max(bytes / (copy_gbps * 1e9), flops / (matmul_gflops * 1e9)); };
  const double unique = double(hyd.ledger.unique_rows) * kRowBytes;
  const double floor_ord = floor(double(ord.kv_bytes) + io);
  // Hydragen keeps (O, LSE) per partition; ChunkAttention (u, m, l) per
  // materialised row; each written once and read back once.
  const double floor_hyd = floor(unique + io + 2.0 * double(hyd.partial_states) * (kDim + 1) * sizeof(float));
  const double floor_ca = floor(unique + io + 2.0 * double(ca.partial_states) * (kDim + 2) * sizeof(float));
  res.ideal_hydragen = floor_ord / floor_hyd;
  res.ideal_chunkattn = floor_ord / floor_ca;
  // The designs' own floors read their bytes once: at the read ceiling.
  auto read_floor = [&](double bytes) { return std::max(bytes / (read_gbps * 1e9), flops / (matmul_gflops * 1e9)); };
  res.hydragen_floor_ms = 1e3 * read_floor(unique + io + 2.0 * double(hyd.partial_states) * (kDim + 1) * sizeof(float));
  res.chunkattn_floor_ms = 1e3 * read_floor(unique + io + 2.0 * double(ca.partial_states) * (kDim + 2) * sizeof(float));
  return res;
}

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string speedup_note(double design_ms, double ordinary_ms, double ideal) {
  return fixed(design_ms) + " ms vs ordinary " + fixed(ordinary_ms) + " ms: speedup " + fixed(ordinary_ms / design_ms) +
         "x, ideal " + fixed(ideal) + "x";
}

// The shared-prefix configuration: times against ordinary decode, and the two
// required ratios to the ideal speedup.
void add_shared_rows(BenchReport& report, const SharedResult& r) {
  report.rows.push_back(BenchRow{"hydragen_ms", r.hydragen_ms, "ms", Better::lower, "ordinary_decode", r.ordinary_ms,
                                 std::nullopt, "ideal speedup " + fixed(r.ideal_hydragen) + "x"});
  report.rows.push_back(BenchRow{"chunkattn_ms", r.chunkattn_ms, "ms", Better::lower, "ordinary_decode", r.ordinary_ms,
                                 std::nullopt, "ideal speedup " + fixed(r.ideal_chunkattn) + "x"});
  report.rows.push_back(BenchRow{"hydragen_over_ideal", r.ordinary_ms / r.hydragen_ms / r.ideal_hydragen, "x ideal",
                                 Better::higher, std::nullopt, std::nullopt, Target{0.7, Better::higher}, ""});
  report.rows.push_back(BenchRow{"chunkattn_over_ideal", r.ordinary_ms / r.chunkattn_ms / r.ideal_chunkattn, "x ideal",
                                 Better::higher, std::nullopt, std::nullopt, Target{0.7, Better::higher}, ""});
  report.rows.push_back(BenchRow{"hydragen_over_floor", r.hydragen_ms / r.hydragen_floor_ms, "x floor", Better::lower,
                                 std::nullopt, std::nullopt, Target{1.3, Better::lower},
                                 fixed(r.hydragen_ms) + " ms over its floor of " + fixed(r.hydragen_floor_ms, 3) +
                                     " ms (bytes at read_bandwidth or flops at fp32_matmul_rate)"});
  report.rows.push_back(
      BenchRow{"chunkattn_over_floor", r.chunkattn_ms / r.chunkattn_floor_ms, "x floor", Better::lower, std::nullopt,
               std::nullopt, Target{1.3, Better::lower},
               fixed(r.chunkattn_ms) + " ms over its floor of " + fixed(r.chunkattn_floor_ms, 3) + " ms"});
}

// One sweep point: both designs' ratio to the ideal speedup, times in the note.
void add_sweep_rows(BenchReport& report, uint32_t batch, uint32_t prefix, const SharedResult& r) {
  const std::string tag = "sweep_b" + std::to_string(batch) + "_s" + std::to_string(prefix);
  report.rows.push_back(BenchRow{tag + "_hydragen", r.ordinary_ms / r.hydragen_ms / r.ideal_hydragen, "x ideal",
                                 Better::higher, std::nullopt, std::nullopt, Target{0.7, Better::higher},
                                 speedup_note(r.hydragen_ms, r.ordinary_ms, r.ideal_hydragen)});
  report.rows.push_back(BenchRow{tag + "_chunkattn", r.ordinary_ms / r.chunkattn_ms / r.ideal_chunkattn, "x ideal",
                                 Better::higher, std::nullopt, std::nullopt, Target{0.7, Better::higher},
                                 speedup_note(r.chunkattn_ms, r.ordinary_ms, r.ideal_chunkattn)});
}

}  // namespace

BenchReport run_attention_bench(bool quick) {
  BenchReport report;
  report.bench = "attention";
  report.quick = quick;
  ThreadPool pool(0);
  const int trials = quick ? 2 : 7;
  const double copy = copy_bandwidth(pool, quick ? (64ull << 20) : (512ull << 20), quick ? 3 : 9);
  const double read = read_bandwidth(pool, quick ? (64ull << 20) : (512ull << 20), quick ? 3 : 9);
  const double mm = matmul_rate(pool, quick ? 384 : 1024, quick ? 2 : 5);
  report.rows.push_back(
      BenchRow{"copy_bandwidth", copy, "GB/s", Better::higher, std::nullopt, std::nullopt, std::nullopt,
               "memcpy across " + std::to_string(pool.workers()) + " workers, bytes read + written per second"});
  report.rows.push_back(BenchRow{
      "read_bandwidth", read, "GB/s", Better::higher, std::nullopt, std::nullopt, std::nullopt,
      "integer sum across " + std::to_string(pool.workers()) + " workers: the read-only ceiling, for context"});
  report.rows.push_back(BenchRow{"fp32_matmul_rate", mm, "GFlop/s", Better::higher, std::nullopt, std::nullopt,
                                 std::nullopt,
                                 "blocked_matmul, 2 n^3 flops, n = " + std::to_string(quick ? 384 : 1024)});

  const std::vector<uint32_t> contexts =
      quick ? std::vector<uint32_t>{8192, 32768} : std::vector<uint32_t>{1024, 2048, 4096, 8192, 16384, 32768};
  for (const uint32_t ctx : contexts) {
    const double gbps = decode_gbps(pool, ctx, false, trials);
    // Decode only reads K/V: its roof is the read ceiling (the copy row
    // stays for comparison with earlier records).
    const std::string tag = "paged_decode_" + std::to_string(ctx / 1024) + "k";
    const std::optional<Target> target =
        ctx >= 8192 ? std::optional<Target>(Target{0.9, Better::higher}) : std::nullopt;
    report.rows.push_back(BenchRow{tag + "_over_read", gbps / read, "x read", Better::higher, std::nullopt,
                                   std::nullopt, target, fixed(gbps) + " GB/s of K+V"});
    report.rows.push_back(BenchRow{tag + "_over_copy", gbps / copy, "x copy", Better::higher, std::nullopt,
                                   std::nullopt, std::nullopt, ""});
  }
  if (!quick) {
    const double gbps = decode_gbps(pool, 8192, true, trials);
    report.rows.push_back(BenchRow{"paged_decode_8k_scattered", gbps / copy, "x copy", Better::higher, std::nullopt,
                                   std::nullopt, std::nullopt, fixed(gbps) + " GB/s; physical blocks permuted"});
  }

  if (quick) {
    add_shared_rows(report, shared_prefix(pool, 4, 512, 32, copy, read, mm, trials));
    report.notes.push_back("quick: shared prefix at B=4, S=512, U=32 (full size B=32, S=4096, U=128)");
  } else {
    add_shared_rows(report, shared_prefix(pool, 32, 4096, 128, copy, read, mm, trials));
    for (const auto& [b, s] :
         {std::pair{8u, 4096u}, std::pair{16u, 2048u}, std::pair{32u, 1024u}, std::pair{64u, 4096u}})
      add_sweep_rows(report, b, s, shared_prefix(pool, b, s, 128, copy, read, mm, 3));
  }
  report.notes.push_back("H_q 32, H_kv 8, d 128, fp32 K/V and accumulation, P_a = P_k = 16, P_c = 512, " +
                         std::to_string(pool.workers()) + " worker threads; medians over " + std::to_string(trials) +
                         " trials (sweep: 3)");
  report.notes.push_back(
      "x_over_ideal = (t_ordinary / t_design) / (floor_ordinary / floor_design), "
      "floor = max(bytes / copy_bandwidth, 4 d H_q pairs / fp32_matmul_rate); x_over_floor = t_design / "
      "max(design bytes / read_bandwidth, 4 d H_q pairs / fp32_matmul_rate)");
  return report;
}

}  // namespace kvrt::bench
