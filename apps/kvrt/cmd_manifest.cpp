// `kvrt manifest`: loads and validates a layout manifest, prints its groups,
// row bytes (0x02A) and canonical digest (cache_layout_sha256, 0x01A).
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/kvrt/subcommand_registry.hpp"
#include "services/common/units.hpp"
#include "services/identity/layout_loader.hpp"

namespace kvrt::app {
namespace {

struct ManifestOptions {
  std::string layout = "config/layouts/two-group-tp2.toml";
  bool json = false;
};

int run_manifest(const ManifestOptions& o) {
  auto m = load_layout_manifest(default_config_path(o.layout));
  if (!m.ok()) return report_error("manifest", m.error());
  const std::string digest = m->digest().hex();
  if (o.json) {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : m->cache_groups) {
      nlohmann::json axes = nlohmann::json::array();
      for (auto a : g.axis_order) axes.push_back(std::string(to_string(a)));
      groups.push_back({{"id", g.group_id.value},
                        {"layers", {g.layer_start, g.layer_end}},
                        {"kv_heads_local", g.kv_heads_local},
                        {"head_dim", g.head_dim},
                        {"k_dtype", std::string(to_string(g.k_dtype))},
                        {"v_dtype", std::string(to_string(g.v_dtype))},
                        {"axis_order", axes},
                        {"row_bytes", g.row_bytes()}});
    }
    nlohmann::json out{{"manifest_id", m->manifest_id},
                       {"cache_layout_sha256", digest},
                       {"physical_mode", std::string(to_string(m->physical_mode))},
                       {"allocator_block_size", m->allocator_block_size},
                       {"kernel_block_size", m->kernel_block_size},
                       {"hash_block_size", m->hash_block_size},
                       {"tp_world_size", m->tp_world_size},
                       {"tp_rank", m->tp_rank},
                       {"row_bytes", m->row_bytes()},
                       {"cache_groups", groups}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "manifest            " << m->manifest_id << "\n"
            << "cache_layout_sha256 " << digest << "\n"
            << "physical mode       " << to_string(m->physical_mode) << "\n"
            << "block sizes         P_a=" << m->allocator_block_size << " P_k=" << m->kernel_block_size
            << " hash=" << m->hash_block_size << " tokens\n"
            << "tensor parallel     rank " << m->tp_rank << " of " << m->tp_world_size << "\n";
  for (const auto& g : m->cache_groups)
    std::cout << "group " << g.group_id.value << "             layers [" << g.layer_start << "," << g.layer_end
              << ") heads " << g.kv_heads_local << " d_h " << g.head_dim << " K " << to_string(g.k_dtype) << " V "
              << to_string(g.v_dtype) << "  B_row = " << format_kib(g.row_bytes()) << " KiB/token\n";
  std::cout << "B_row,rank          " << format_kib(m->row_bytes()) << " KiB/token (" << m->row_bytes() << " bytes)\n";
  return 0;
}

const SubcommandRegistration kRegistration{
    "manifest", [](CLI::App& parent) {
      auto opts = std::make_shared<ManifestOptions>();
      auto* sub = parent.add_subcommand("manifest", "Validate a layout manifest and print its digest and row bytes");
      sub->add_option("--layout", opts->layout, "layout manifest TOML")->capture_default_str();
      sub->add_flag("--json", opts->json, "print one JSON object");
      return [opts] { return run_manifest(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
