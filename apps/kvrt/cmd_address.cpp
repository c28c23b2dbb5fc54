// `kvrt address`: translates one logical K/V coordinate of a request snapshot
// to its slot id and checked byte address through the reference translator
// (spec 0x03I), printing every step of the 0x03F trace. The defaults are the
// spec's worked example: request A, token 16, layer 24, K head 1, lane 5.
// A rejected read prints its typed error and exits 2.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/kvrt/subcommand_registry.hpp"
#include "services/address/address_translator.hpp"
#include "services/address/snapshot_loader.hpp"
#include "services/identity/layout_loader.hpp"

namespace kvrt::app {
namespace {

struct AddressOptions {
  std::string layout = "config/layouts/two-group-tp2.toml";
  std::string snapshot = "config/snapshots/loop4-fixture.toml";
  std::string request = "A";
  uint64_t token = 16;
  uint32_t layer = 24;
  std::string kind = "K";
  uint32_t head = 1;
  uint32_t lane = 5;
  std::optional<uint64_t> table_version;
  bool json = false;
};

template <class Array>
std::string bracketed(const Array& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

nlohmann::json error_json(const Error& e) {
  return {{"error", {{"code", std::string(to_string(e.code))}, {"reason", e.reason}, {"field", e.field}}}};
}

nlohmann::json receipt_json(const AddressReceipt& r) {
  nlohmann::json axes = nlohmann::json::array();
  for (auto a : r.geometry.axis_order) axes.push_back(std::string(to_string(a)));
  return {{"request", r.request},
          {"request_id", r.request_id.value},
          {"table_version", r.table_version.value},
          {"context_length", r.context_length},
          {"token", r.query.token},
          {"layer", r.query.layer},
          {"kind", std::string(to_string(r.query.kind))},
          {"head", r.query.head},
          {"lane", r.query.lane},
          {"group", r.group.value},
          {"group_layers", {r.group_layer_start, r.group_layer_end}},
          {"layer_local", r.layer_local},
          {"block_size", r.block_size},
          {"logical_block", r.logical_block},
          {"token_offset", r.token_offset},
          {"pool_id", r.pool_id.value},
          {"pool_generation", r.pool_generation.value},
          {"physical_block", r.physical_id.value},
          {"physical_slot", r.physical_slot.value},
          {"valid_rows", r.valid_rows},
          {"slot_id", r.slot_id},
          {"axis_order", axes},
          {"shape", r.geometry.shape},
          {"strides", r.geometry.strides},
          {"coordinate", r.coordinate},
          {"element_offset", r.element_offset},
          {"scalar_bytes", r.scalar_bytes},
          {"byte_offset", r.byte_offset},
          {"tensor_base", r.tensor_base},
          {"tensor_end", r.tensor_end},
          {"byte_address", r.byte_address}};
}

void print_trace(const AddressReceipt& r) {
  const std::string g = "g" + std::to_string(r.group.value);
  const std::string kind{to_string(r.query.kind)};
  std::ostringstream shape;
  shape << "[";
  for (size_t a = 0; a < r.geometry.shape.size(); ++a)
    shape << (a ? ", " : "") << r.geometry.shape[a] << " " << to_string(r.geometry.axis_order[a]);
  shape << "]";
  std::cout << "request " << r.request << " (id " << r.request_id.value << ") table version " << r.table_version.value
            << ", context " << r.context_length << " tokens\n"
            << "read    token " << r.query.token << ", layer " << r.query.layer << ", " << kind << " head "
            << r.query.head << ", lane " << r.query.lane << "\n"
            << " 1. layer " << r.query.layer << " selects " << g << ", whose layer range is [" << r.group_layer_start
            << "," << r.group_layer_end << ")\n"
            << " 2. layer_local   = " << r.query.layer << " - " << r.group_layer_start << " = " << r.layer_local << "\n"
            << " 3. logical_block = " << r.query.token << " // " << r.block_size << " = " << r.logical_block << "\n"
            << " 4. token_offset  = " << r.query.token << " % " << r.block_size << " = " << r.token_offset << "\n"
            << " 5. " << r.request << "." << g << ".table[v=" << r.table_version.value << "][" << r.logical_block
            << "] -> physical block " << r.physical_id.value << "\n"
            << " 6. descriptor(" << r.physical_id.value << ") -> pool " << r.pool_id.value << " generation "
            << r.pool_generation.value << ", physical slot " << r.physical_slot.value << ", valid_rows " << r.valid_rows
            << "\n"
            << " 7. slot_id = " << r.physical_slot.value << " * " << r.block_size << " + " << r.token_offset << " = "
            << r.slot_id << "\n"
            << " 8. " << g << " " << kind << " shape = " << shape.str() << "\n"
            << " 9. " << g << " strides = " << bracketed(r.geometry.strides) << " elements\n"
            << "10. coordinate = " << bracketed(r.coordinate) << "\n"
            << "element_offset = " << r.element_offset << " elements\n"
            << "byte_offset    = " << r.scalar_bytes << " * " << r.element_offset << " = " << r.byte_offset
            << " bytes\n"
            << kind << " base         = " << r.tensor_base << " (tensor end " << r.tensor_end << ")\n"
            << "byte address   = " << r.byte_address << "\n"
            << "slot id        = " << r.slot_id << " (a token row of the " << g << " pool, not a byte address)\n";
}

int run_address(const AddressOptions& o) {
  auto fail = [&](const Error& e) {
    if (o.json) std::cout << error_json(e).dump(2) << "\n";
    return report_error("address", e);
  };
  auto layout = load_layout_manifest(default_config_path(o.layout));
  if (!layout.ok()) return fail(layout.error());
  auto snapshot = load_translation_snapshot(default_config_path(o.snapshot), *layout);
  if (!snapshot.ok()) return fail(snapshot.error());
  auto translator = AddressTranslator::create(std::move(snapshot).value());
  if (!translator.ok()) return fail(translator.error());

  auto kind = tensor_kind_from_string(o.kind);
  if (!kind)
    return fail(make_error(ErrorCode::invalid_argument, "kind must be K or V, got \"" + o.kind + "\"", "kind"));
  AddressQuery q;
  q.request = o.request;
  if (o.table_version) q.expected_table_version = TableVersion{*o.table_version};
  q.token = o.token;
  q.layer = o.layer;
  q.kind = *kind;
  q.head = o.head;
  q.lane = o.lane;
  auto receipt = translator->translate(q);
  if (!receipt.ok()) return fail(receipt.error());
  if (o.json)
    std::cout << receipt_json(*receipt).dump(2) << "\n";
  else
    print_trace(*receipt);
  return 0;
}

const SubcommandRegistration kRegistration{
    "address", [](CLI::App& parent) {
      auto opts = std::make_shared<AddressOptions>();
      auto* sub = parent.add_subcommand(
          "address",
          "Translate a (request, token, layer, K/V, head, lane) read to its slot id and byte address (0x03I)");
      sub->add_option("--layout", opts->layout, "layout manifest TOML")->capture_default_str();
      sub->add_option("--snapshot", opts->snapshot, "translation snapshot TOML (pools, descriptors, request tables)")
          ->capture_default_str();
      sub->add_option("--request", opts->request, "request name")->capture_default_str();
      sub->add_option("--token", opts->token, "logical token position")->capture_default_str();
      sub->add_option("--layer", opts->layer, "model layer")->capture_default_str();
      sub->add_option("--kind", opts->kind, "K or V")->capture_default_str();
      sub->add_option("--head", opts->head, "local K/V head")->capture_default_str();
      sub->add_option("--lane", opts->lane, "head-dimension lane")->capture_default_str();
      sub->add_option("--table-version", opts->table_version,
                      "table version the read was planned against; a superseded one is rejected");
      sub->add_flag("--json", opts->json, "print one JSON object");
      return [opts] { return run_address(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
