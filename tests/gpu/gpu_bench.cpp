// kvrt_gpu_tests --bench [--quick] [--json]: the CUDA kernels against limits
// measured in the same run (docs/benchmarks.md): the device-to-device copy
// rate (bytes read + written per second) and the fp32 FMA rate, then
//   paged_decode_<T>_over_copy   K/V bytes read per second at context T as a
//                                fraction of the copy rate (fp16, H_q 32,
//                                H_kv 8, d 128, P_a 16, scattered blocks)
//   cascade_b<B>_s<S>            shared-prefix (cascade) time against paged
//                                decode over the same blocks, U = 128; the
//                                ideal is the ratio of roofline floors
//                                max(bytes / copy rate, flops / FMA rate)
//   cow_copy_over_copy           the COW block-copy kernel against the copy
// Every figure is the median of five trials of several launches (CUDA events).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/cuda_attention.hpp"
#include "gpu/cuda_attention_shim.hpp"
#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "services/executor/shared_prefix_workload.hpp"
#include "tests/gpu/gpu_ipc_checks.hpp"

namespace kvrt::test {
namespace {

using executor::DecodeRequest;
using executor::HeadMapping;
using executor::KvBlockTable;
using executor::PlainPoolShape;

struct BenchRow {
  std::string name;
  double value = 0;
  std::string unit;
  std::string baseline_name;
  double baseline = 0;
  double ratio = 0;
};

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) {
    if (kvrt_cuda_malloc(&p, bytes) != 0) {
      std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
      std::exit(1);
    }
  }
  ~Device() { kvrt_cuda_free(p); }
};

void check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s failed: %s\n", what, kvrt_cuda_error_string(rc));
    std::exit(1);
  }
}

// Median over five trials of `iterations` launches [seconds per launch].
template <class F>
double median_seconds(F&& launch, int iterations) {
  std::vector<double> trials;
  for (int t = 0; t < 5; ++t) {
    float ms = 0;
    using Launch = std::remove_reference_t<F>;
    check(kvrt_cuda_time([](void* c) { (*static_cast<Launch*>(c))(); }, &launch, iterations, &ms), "timing");
    trials.push_back(ms * 1e-3 / iterations);
  }
  std::sort(trials.begin(), trials.end());
  return trials[2];
}

struct KvShape {
  uint32_t q_heads = 32, kv_heads = 8, d = 128, block_tokens = 16;
  uint64_t row_bytes() const { return uint64_t{kv_heads} * d * 2 * 2; }  // K + V, fp16, all K/V heads
};

// A device pool of `slots` blocks filled with seeded fp16 values.
struct BenchPool {
  BenchPool(const KvShape& s, uint32_t slots)
      : shape{slots, s.block_tokens, s.kv_heads, s.d, s.d, ScalarType::fp16, ScalarType::fp16},
        k(shape.k_elements() * 2),
        v(shape.v_elements() * 2) {
    check(kvrt_cuda_fill_uniform(k.p, shape.k_elements(), 1, 1), "fill K");
    check(kvrt_cuda_fill_uniform(v.p, shape.v_elements(), 1, 2), "fill V");
    auto view =
        executor::plain_kv_view(shape, {static_cast<const std::byte*>(k.p), shape.k_elements() * 2, ScalarType::fp16},
                                {static_cast<const std::byte*>(v.p), shape.v_elements() * 2, ScalarType::fp16});
    if (!view.ok()) std::exit(1);
    layer.view = *view;
  }
  PlainPoolShape shape;
  Device k, v;
  gpu::DeviceKvLayer layer;
};

double time_plan(const gpu::DeviceKvLayer& layer, const HeadMapping& heads, const executor::AttentionWorkPlan& plan,
                 int iterations) {
  const uint64_t rows = uint64_t{plan.sequences} * heads.q_heads;
  Device q(rows * layer.view.k.head_dim * 4), out(rows * layer.view.k.head_dim * 4);
  check(kvrt_cuda_fill_uniform(q.p, rows * layer.view.k.head_dim, 0, 3), "fill queries");
  gpu::DeviceAttentionWorkspace ws;
  auto up = gpu::upload_attention_plan(layer, heads, plan, {static_cast<float*>(q.p), rows * layer.view.k.head_dim},
                                       {static_cast<float*>(out.p), rows * layer.view.k.head_dim}, {}, ws);
  if (!up.ok()) {
    std::fprintf(stderr, "%s\n", up.error().describe().c_str());
    std::exit(1);
  }
  auto launch = [&] { (void)gpu::launch_attention_plan(*up); };
  return median_seconds(launch, iterations);
}

}  // namespace

int run_gpu_bench(int argc, char** argv) {
  bool quick = false, json = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--json") == 0)
      json = true;
  }
  std::vector<BenchRow> rows;
  const CudaDeviceProbe probe = probe_cuda_device();

  // Copy rate: bytes read + written per second.
  const size_t copy_bytes = quick ? (64u << 20) : (1u << 30);
  double copy_rate = 0;
  {
    Device a(copy_bytes), b(copy_bytes);
    check(kvrt_cuda_memset(a.p, 1, copy_bytes), "memset");
    auto launch = [&] { kvrt_cuda_memcpy_d2d(b.p, a.p, copy_bytes); };
    copy_rate = 2.0 * copy_bytes / median_seconds(launch, 10);
    rows.push_back({"copy_bandwidth", copy_rate / 1e9, "GB/s", "", 0, 0});
  }
  double fma_rate = 0;
  {
    const int blocks = 132 * 16, iterations = quick ? 1024 : 8192;
    Device sink(size_t{blocks} * 256 * 4);
    auto launch = [&] { kvrt_cuda_fma_probe(static_cast<float*>(sink.p), blocks, iterations); };
    fma_rate = 2.0 * 8 * iterations * 256.0 * blocks / median_seconds(launch, 5);
    rows.push_back({"fp32_fma_rate", fma_rate / 1e12, "TFLOP/s", "", 0, 0});
  }

  const KvShape kv;
  const HeadMapping heads{kv.q_heads, kv.kv_heads};
  // Paged decode: 256K tokens of K/V (1 GiB) per context length, scattered.
  const uint64_t total_tokens = quick ? (16u << 10) : (256u << 10);
  {
    BenchPool pool(kv, static_cast<uint32_t>(total_tokens / kv.block_tokens));
    std::mt19937_64 rng(7);
    std::vector<uint32_t> order(pool.shape.slot_count);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint64_t context : {1024u, 4096u, 8192u, 16384u, 32768u}) {
      if (context > total_tokens) continue;
      const uint64_t batch = total_tokens / context;
      const uint64_t blocks = context / kv.block_tokens;
      std::vector<std::vector<uint32_t>> slots(batch), valid(batch);
      std::vector<DecodeRequest> requests(batch);
      for (uint64_t r = 0; r < batch; ++r) {
        slots[r].assign(order.begin() + r * blocks, order.begin() + (r + 1) * blocks);
        valid[r].assign(blocks, kv.block_tokens);
        requests[r].table = KvBlockTable{slots[r], valid[r], context};
      }
      auto plan = executor::plan_paged_decode(pool.layer.view, heads, requests, {});
      if (!plan.ok()) return std::fprintf(stderr, "%s\n", plan.error().describe().c_str()), 1;
      const double seconds = time_plan(pool.layer, heads, *plan, 10);
      const double rate = static_cast<double>(batch * context * kv.row_bytes()) / seconds;
      rows.push_back({"paged_decode_" + std::to_string(context / 1024) + "k_over_copy", rate / copy_rate, "fraction",
                      "copy_bandwidth", copy_rate / 1e9, rate / copy_rate});
      rows.push_back({"paged_decode_" + std::to_string(context / 1024) + "k_rate", rate / 1e9, "GB/s", "", 0, 0});
    }
  }

  // Cascade against paged decode over the same blocks.
  struct CascadeShape {
    uint32_t b, s;
  };
  const std::vector<CascadeShape> cascades =
      quick ? std::vector<CascadeShape>{{8, 1024}}
            : std::vector<CascadeShape>{{32, 4096}, {8, 4096}, {64, 4096}, {32, 16384}};
  for (const CascadeShape& c : cascades) {
    executor::SharedPrefixShape shape;
    shape.prefix_tokens = c.s;
    shape.suffix_tokens.assign(c.b, 128);
    shape.chunk_tokens = 512;
    shape.block_tokens = kv.block_tokens;
    shape.contract = executor::ExecutionContract{heads, kv.d, kv.d, ScalarType::fp16, ScalarType::fp16, 1};
    auto w = executor::build_shared_prefix_workload(shape);
    if (!w.ok()) return std::fprintf(stderr, "%s\n", w.error().describe().c_str()), 1;
    BenchPool pool(kv, w->slot_count);
    const auto tables = w->tables();
    auto paged_plan = executor::plan_paged_decode(pool.layer.view, heads, tables, {});
    if (!paged_plan.ok()) return std::fprintf(stderr, "%s\n", paged_plan.error().describe().c_str()), 1;
    const double paged = time_plan(pool.layer, heads, *paged_plan, 10);
    // The cascade's partition size trades grid fill against partial traffic
    // (fp32 partials per sequence and head): measured, the best one kept.
    double cascade = 0;
    uint32_t best_partition = 0;
    for (uint32_t partition : {128u, 256u, 512u}) {
      executor::WorkPlanOptions options;
      options.partition_tokens = partition;
      auto plan = executor::plan_shared_prefix(pool.layer.view, w->snapshot, w->snapshot.fence(), heads, options);
      if (!plan.ok()) return std::fprintf(stderr, "%s\n", plan.error().describe().c_str()), 1;
      const double t = time_plan(pool.layer, heads, *plan, 10);
      if (best_partition == 0 || t < cascade) {
        cascade = t;
        best_partition = partition;
      }
    }
    const double flops = 4.0 * c.b * kv.q_heads * (c.s + 128.0) * kv.d;
    const double paged_floor = std::max(double(c.b) * (c.s + 128) * kv.row_bytes() / copy_rate, flops / fma_rate);
    const double cascade_floor = std::max((c.s + 128.0 * c.b) * kv.row_bytes() / copy_rate, flops / fma_rate);
    const std::string tag = "cascade_b" + std::to_string(c.b) + "_s" + std::to_string(c.s);
    rows.push_back({tag + "_us", cascade * 1e6, "us", "paged_decode", paged * 1e6, paged / cascade});
    rows.push_back({tag + "_partition", double(best_partition), "keys", "", 0, 0});
    rows.push_back({tag + "_over_ideal", (paged / cascade) / (paged_floor / cascade_floor), "fraction", "ideal_speedup",
                    paged_floor / cascade_floor, (paged / cascade) / (paged_floor / cascade_floor)});
  }

  // COW block copy: 64 KiB blocks (P_a = 16 rows of K and V), disjoint,
  // through the device copy kernel the mapper's page backing uses.
  {
    const uint64_t block = 64 << 10, n = quick ? 512 : 8192;
    void* buf = nullptr;
    if (kvrt_cuda_malloc(&buf, 2 * n * block) != 0) return 1;
    std::vector<uint64_t> copies;
    for (uint64_t i = 0; i < n; ++i) copies.insert(copies.end(), {i * block, (n + i) * block, block});
    auto launch = [&] { (void)kvrt_cuda_copy_ranges(buf, copies.data(), n); };
    const double rate = 2.0 * n * block / median_seconds(launch, 5);
    (void)kvrt_cuda_free(buf);
    rows.push_back(
        {"cow_copy_over_copy", rate / copy_rate, "fraction", "copy_bandwidth", copy_rate / 1e9, rate / copy_rate});
  }

  if (json) {
    std::printf("{\"bench\": \"gpu\", \"machine\": {\"device\": \"%s\", \"quick\": %s}, \"rows\": [",
                probe.device_name.c_str(), quick ? "true" : "false");
    for (size_t i = 0; i < rows.size(); ++i) {
      const BenchRow& r = rows[i];
      std::printf("%s\n  {\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"", i ? "," : "", r.name.c_str(), r.value,
                  r.unit.c_str());
      if (!r.baseline_name.empty())
        std::printf(", \"baseline_name\": \"%s\", \"baseline\": %.6g, \"ratio\": %.4g", r.baseline_name.c_str(),
                    r.baseline, r.ratio);
      std::printf("}");
    }
    std::printf("\n]}\n");
  } else {
    std::printf("device: %s; medians of 5 trials (CUDA events)\n", probe.device_name.c_str());
    std::printf("%-32s %12s %-9s %-16s %12s %8s\n", "name", "value", "unit", "baseline", "baseline", "ratio");
    for (const BenchRow& r : rows) {
      std::printf("%-32s %12.4g %-9s %-16s", r.name.c_str(), r.value, r.unit.c_str(), r.baseline_name.c_str());
      if (!r.baseline_name.empty()) std::printf(" %12.4g %8.3f", r.baseline, r.ratio);
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace kvrt::test
