// `kvrt kernel-blocks`: the kernel-side block arithmetic of spec 0x0A-0x0AC.
// Prints (1) allocator block ids expanded to kernel block ids for
// P_a = q * P_k (0x0AC), (2) the dense/used/padding ledger of a ragged batch's
// block table (0x0AB), and (3) the paged-kernel geometry per block size
// (0x0AA). Defaults are the spec's fixtures: [3,7] with P_a=32, P_k=16;
// lengths [64,63,17,1]; T=2049, P_part=512, block sizes 8/16/32, warp 32, fp16.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "apps/kvrt/subcommand_registry.hpp"
#include "services/address/kernel_block_split.hpp"
#include "services/address/paged_kernel_geometry.hpp"
#include "services/address/ragged_table_ledger.hpp"

namespace kvrt::app {
namespace {

struct KernelBlocksOptions {
  std::vector<uint64_t> allocator_ids{3, 7};
  uint32_t allocator_block = 32;  // P_a [tokens]
  uint32_t kernel_block = 16;     // P_k [tokens]
  std::vector<uint64_t> lengths{64, 63, 17, 1};
  uint64_t context = 2049;   // T [tokens]
  uint32_t partition = 512;  // P_part [tokens]
  std::vector<uint32_t> block_sizes{8, 16, 32};
  uint32_t warp = 32;
  uint32_t scalar_bytes = 2;
  bool json = false;
};

template <class T>
std::string list(const std::vector<T>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
  out << "]";
  return out.str();
}

int run_kernel_blocks(const KernelBlocksOptions& o) {
  auto split = split_allocator_blocks(o.allocator_ids, o.allocator_block, o.kernel_block);
  if (!split.ok()) return report_error("kernel-blocks", split.error());
  auto ledger = ragged_table_ledger(o.lengths, o.kernel_block);
  if (!ledger.ok()) return report_error("kernel-blocks", ledger.error());
  std::vector<PagedKernelGeometry> rows;
  for (uint32_t p : o.block_sizes) {
    auto g = paged_kernel_geometry({o.context, o.partition, p, o.warp, o.scalar_bytes});
    if (!g.ok()) return report_error("kernel-blocks", g.error());
    rows.push_back(*g);
  }

  if (o.json) {
    nlohmann::json geometry = nlohmann::json::array();
    for (const auto& g : rows)
      geometry.push_back({{"block_size", g.shape.block_size},
                          {"num_seq_blocks", g.num_seq_blocks},
                          {"num_partitions", g.num_partitions},
                          {"blocks_per_partition", g.blocks_per_partition},
                          {"thread_group_size", g.thread_group_size},
                          {"tokens_per_thread_group", g.tokens_per_thread_group},
                          {"value_vector_width", g.value_vector_width}});
    nlohmann::json out{{"split",
                        {{"allocator_block_size", split->allocator_block_size},
                         {"kernel_block_size", split->kernel_block_size},
                         {"q", split->split_factor},
                         {"allocator_ids", o.allocator_ids},
                         {"kernel_ids", split->kernel_ids}}},
                       {"ragged_table",
                        {{"lengths", o.lengths},
                         {"blocks_per_row", ledger->blocks_per_row},
                         {"rows", ledger->rows},
                         {"max_blocks", ledger->max_blocks},
                         {"dense_cells", ledger->dense_cells},
                         {"used_cells", ledger->used_cells},
                         {"padding_cells", ledger->padding_cells},
                         {"dense_bytes", ledger->dense_bytes()},
                         {"used_bytes", ledger->used_bytes()},
                         {"padding_bytes", ledger->padding_bytes()}}},
                       {"geometry",
                        {{"context_length", o.context},
                         {"partition_size", o.partition},
                         {"warp_size", o.warp},
                         {"scalar_bytes", o.scalar_bytes},
                         {"rows", geometry}}}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "kernel block split (0x0AC)  P_a=" << split->allocator_block_size << " P_k=" << split->kernel_block_size
            << " q=" << split->split_factor << "\n"
            << "  allocator ids " << list(o.allocator_ids) << " -> kernel ids " << list(split->kernel_ids) << "\n"
            << "ragged block table (0x0AB)  P_k=" << o.kernel_block << ", lengths " << list(o.lengths) << " tokens\n"
            << "  blocks per row " << list(ledger->blocks_per_row) << ", B=" << ledger->rows
            << " n_max=" << ledger->max_blocks << "\n"
            << "  dense " << ledger->dense_cells << " cells (" << ledger->dense_bytes() << " bytes), used "
            << ledger->used_cells << " (" << ledger->used_bytes() << " bytes), padding " << ledger->padding_cells
            << " (" << ledger->padding_bytes() << " bytes) at " << ledger->entry_bytes << " bytes/cell\n"
            << "paged kernel geometry (0x0AA)  T=" << o.context << " P_part=" << o.partition << " warp=" << o.warp
            << " scalar=" << o.scalar_bytes << " bytes\n"
            << "  BLOCK_SIZE  seq_blocks  partitions  blocks/partition  thread_group  tokens/thread_group  "
               "V vec width\n";
  for (const auto& g : rows) {
    char line[160];
    std::snprintf(line, sizeof line, "  %10u  %10llu  %10llu  %16u  %12u  %19u  %11u\n", g.shape.block_size,
                  static_cast<unsigned long long>(g.num_seq_blocks), static_cast<unsigned long long>(g.num_partitions),
                  g.blocks_per_partition, g.thread_group_size, g.tokens_per_thread_group, g.value_vector_width);
    std::cout << line;
  }
  return 0;
}

const SubcommandRegistration kRegistration{
    "kernel-blocks", [](CLI::App& parent) {
      auto opts = std::make_shared<KernelBlocksOptions>();
      auto* sub = parent.add_subcommand(
          "kernel-blocks", "Kernel block split, ragged block-table ledger and paged-kernel geometry (0x0A-0x0AC)");
      sub->add_option("--allocator-ids", opts->allocator_ids, "allocator block ids to split")
          ->delimiter(',')
          ->capture_default_str();
      sub->add_option("--allocator-block", opts->allocator_block, "P_a [tokens]")->capture_default_str();
      sub->add_option("--kernel-block", opts->kernel_block, "P_k [tokens]; must divide P_a")->capture_default_str();
      sub->add_option("--lengths", opts->lengths, "context lengths of the ragged batch [tokens]")
          ->delimiter(',')
          ->capture_default_str();
      sub->add_option("--context", opts->context, "T for the kernel geometry [tokens]")->capture_default_str();
      sub->add_option("--partition", opts->partition, "P_part [tokens]")->capture_default_str();
      sub->add_option("--block-sizes", opts->block_sizes, "kernel BLOCK_SIZE values")
          ->delimiter(',')
          ->capture_default_str();
      sub->add_option("--warp", opts->warp, "warp size [threads]")->capture_default_str();
      sub->add_option("--scalar-bytes", opts->scalar_bytes, "bytes per K/V scalar")->capture_default_str();
      sub->add_flag("--json", opts->json, "print one JSON object");
      return [opts] { return run_kernel_blocks(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
