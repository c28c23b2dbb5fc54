// `kvrt blocksize`: the block-size cost vector of spec 0x09 / 0x0BL,
// measured per allocator block size over one workload
// (tools/blocksize/block_size_sweep.hpp). Without --workload it replays the
// nested-prefix fixture of 0x09B, whose worked numbers it reproduces.
#include <iostream>
#include <memory>

#include "apps/kvrt/subcommand_registry.hpp"
#include "tools/blocksize/block_size_report.hpp"

namespace kvrt::app {
namespace {

struct BlockSizeOptions {
  std::string workload;                // empty: the 0x09B fixture
  std::vector<uint32_t> sizes;         // P_a
  std::vector<uint32_t> kernel_sizes;  // P_k
  std::vector<uint32_t> page_groups;   // G [rows]
  std::vector<uint32_t> chunk_sizes;   // P_c [rows]
  uint64_t row_bytes = 64 * 1024;      // B_row [bytes / token]
  uint64_t pool_tokens = 0;            // 0: the fixture's 128, or what the workload needs
  uint32_t trials = 5;                 // decode-step timing repetitions; 0: none
  uint64_t kernel_rows = uint64_t{1} << 17;
  std::vector<std::string> weights;  // NAME=W
  std::string report_dir;
  bool json = false;
};

int run_blocksize(const BlockSizeOptions& o) {
  std::vector<SweepRequest> requests;
  BlockSizeSweepConfig config;
  if (o.workload.empty()) {
    requests = nested_prefix_fixture();
    config = nested_prefix_fixture_config();
    config.page_group_tokens = {32, 64};
    config.chunk_tokens = {8, 16};
  } else {
    Result<workload::Workload> w = workload::load_workload(o.workload);
    if (!w.ok()) return report_error("blocksize", w.error());
    requests = sweep_requests(*w);
    config.allocator_block_sizes = {8, 16, 32, 64};
    config.kernel_block_sizes = {8, 16, 32};
    config.page_group_tokens = {32, 64, 256, 1024};
    config.chunk_tokens = {64, 256};
    config.record_sizes = kvrt_record_sizes();
  }
  if (!o.sizes.empty()) config.allocator_block_sizes = o.sizes;
  if (!o.kernel_sizes.empty()) config.kernel_block_sizes = o.kernel_sizes;
  if (!o.page_groups.empty()) config.page_group_tokens = o.page_groups;
  if (!o.chunk_sizes.empty()) config.chunk_tokens = o.chunk_sizes;
  if (!o.workload.empty() || o.row_bytes != 64 * 1024) config.row_bytes = o.row_bytes;
  if (o.pool_tokens != 0) config.pool_tokens = o.pool_tokens;
  config.kernel_timing.trials = o.trials;
  config.kernel_timing.max_rows = o.kernel_rows;
  CostWeights weights;
  for (const std::string& text : o.weights) {
    Result<std::pair<std::string, double>> w = parse_weight(text);
    if (!w.ok()) return report_error("blocksize", w.error());
    weights[w->first] = w->second;
  }
  if (!o.json)
    std::cerr << "kvrt blocksize: replaying the workload at " << config.allocator_block_sizes.size()
              << " allocator block sizes and " << config.page_group_tokens.size() << " page groups...\n";
  Result<BlockSizeSweep> sweep = sweep_block_sizes(requests, config);
  if (!sweep.ok()) return report_error("blocksize", sweep.error());
  if (!o.report_dir.empty())
    if (Status st = write_block_size_report(*sweep, weights, o.report_dir); !st.ok())
      return report_error("blocksize", st.error());
  if (o.json)
    std::cout << block_size_json(*sweep, weights).dump(2) << "\n";
  else
    std::cout << block_size_text(*sweep, weights);
  if (!o.report_dir.empty() && !o.json) std::cout << "\nreport: " << o.report_dir << "/blocksize.json and charts\n";
  return 0;
}

const SubcommandRegistration kRegistration{
    "blocksize", [](CLI::App& parent) {
      auto o = std::make_shared<BlockSizeOptions>();
      auto* sub = parent.add_subcommand(
          "blocksize",
          "The block-size cost vector (0x09): tails, metadata, hits, COW, table cells, decode time and VMM "
          "mappings per allocator block size, measured over a workload");
      sub->add_option("--workload", o->workload,
                      "a kvrt run workload (config/workloads/*.toml); none: the 0x09B fixture");
      sub->add_option("--sizes", o->sizes, "allocator block sizes P_a [tokens]")->delimiter(',');
      sub->add_option("--kernel-sizes", o->kernel_sizes, "kernel block sizes P_k [tokens]; those dividing a P_a")
          ->delimiter(',');
      sub->add_option("--page-groups", o->page_groups,
                      "VMM page groups [rows]; a multiple of 32 (one 4 KiB page of 128-byte rows)")
          ->delimiter(',');
      sub->add_option("--chunk-sizes", o->chunk_sizes, "shared-prefix chunk sizes P_c [rows]")->delimiter(',');
      sub->add_option("--row-bytes", o->row_bytes, "B_row over every cache group [bytes / token]")
          ->capture_default_str();
      sub->add_option("--pool-tokens", o->pool_tokens,
                      "provisioned pool for descriptors and the free queue [token slots]; 0: the default");
      sub->add_option("--trials", o->trials, "decode-step timing repetitions (median); 0: no timing")
          ->capture_default_str();
      sub->add_option("--kernel-rows", o->kernel_rows, "rows of the timed decode batch at most [rows]")
          ->capture_default_str();
      sub->add_option("--weight", o->weights,
                      "NAME=W: print a weighted score per P_a (no score without weights); repeatable");
      sub->add_option("--report-dir", o->report_dir, "write blocksize.json, blocksize.txt and SVG charts there");
      sub->add_flag("--json", o->json, "print one JSON object");
      return [o] { return run_blocksize(*o); };
    }};

}  // namespace
}  // namespace kvrt::app
