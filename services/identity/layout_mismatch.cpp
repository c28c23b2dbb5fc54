#include "services/identity/layout_mismatch.hpp"

#include <algorithm>

#include "services/identity/operand_text.hpp"

namespace kvrt {
namespace {

std::string render_axes(const std::vector<TensorAxis>& axes) {
  std::string out = "[";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i > 0) out += ",";
    out += to_string(axes[i]);
  }
  return out + "]";
}

// Built by appending: GCC 12 warns falsely (-Wrestrict, PR105329) on "[" + std::to_string(...).
std::string render_layers(const CacheGroupLayout& g) {
  std::string out = "[";
  out += std::to_string(g.layer_start);
  out += ",";
  out += std::to_string(g.layer_end);
  out += ")";
  return out;
}

// Collects differences per aspect, so the output order is the aspect order
// regardless of the order in which the fields are visited.
class DiffCollector {
 public:
  void value(LayoutAspect aspect, std::string field, const std::string& p, const std::string& c) {
    if (p == c) return;
    std::string operands = "producer " + p + " vs consumer " + c;
    add(aspect, std::move(field), p, c, std::move(operands));
  }
  template <class Int>
  void number(LayoutAspect aspect, std::string field, Int p, Int c) {
    if (p == c) return;
    value(aspect, std::move(field), std::to_string(p), std::to_string(c));
  }
  void text(LayoutAspect aspect, std::string field, std::string_view p, std::string_view c) {
    if (p == c) return;
    add(aspect, std::move(field), quote_operand(p), quote_operand(c), describe_operands(p, c));
  }
  std::vector<LayoutFieldDifference> take() {
    std::stable_sort(out_.begin(), out_.end(), [](const auto& a, const auto& b) { return a.aspect < b.aspect; });
    return std::move(out_);
  }

 private:
  void add(LayoutAspect aspect, std::string field, std::string p, std::string c, std::string operands) {
    out_.push_back({aspect, std::move(field), std::move(p), std::move(c), std::move(operands)});
  }
  std::vector<LayoutFieldDifference> out_;
};

void diff_group(DiffCollector& d, size_t index, const CacheGroupLayout& p, const CacheGroupLayout& c) {
  const std::string at = "cache_groups[" + std::to_string(index) + "].";
  d.number(LayoutAspect::ownership, at + "id", p.group_id.value, c.group_id.value);
  d.value(LayoutAspect::ownership, at + "layers", render_layers(p), render_layers(c));
  d.number(LayoutAspect::ownership, at + "kv_heads_local", p.kv_heads_local, c.kv_heads_local);
  d.number(LayoutAspect::logical, at + "head_dim", p.head_dim, c.head_dim);
  d.value(LayoutAspect::representation, at + "k_dtype", std::string(to_string(p.k_dtype)),
          std::string(to_string(c.k_dtype)));
  d.value(LayoutAspect::representation, at + "v_dtype", std::string(to_string(p.v_dtype)),
          std::string(to_string(c.v_dtype)));
  d.value(LayoutAspect::representation, at + "axis_order", render_axes(p.axis_order), render_axes(c.axis_order));
  d.text(LayoutAspect::representation, at + "stride_identity", p.stride_identity, c.stride_identity);
}

}  // namespace

std::string_view to_string(LayoutAspect a) {
  switch (a) {
    case LayoutAspect::ownership:
      return "ownership";
    case LayoutAspect::representation:
      return "representation";
    case LayoutAspect::position:
      return "position";
    case LayoutAspect::logical:
      return "logical";
    case LayoutAspect::label:
      return "label";
  }
  return "unknown_layout_aspect";
}

std::vector<LayoutFieldDifference> diff_layouts(const CacheLayoutManifest& p, const CacheLayoutManifest& c) {
  using A = LayoutAspect;
  DiffCollector d;
  // The fields below are exactly those CacheLayoutManifest::digest() encodes;
  // a field added there must be added here (the identity tests check that a
  // digest difference always yields at least one named field).
  d.number(A::ownership, "tp_world_size", p.tp_world_size, c.tp_world_size);
  d.number(A::ownership, "tp_rank", p.tp_rank, c.tp_rank);
  d.number(A::ownership, "cache_groups.size", p.cache_groups.size(), c.cache_groups.size());
  const size_t common = std::min(p.cache_groups.size(), c.cache_groups.size());
  for (size_t i = 0; i < common; ++i) diff_group(d, i, p.cache_groups[i], c.cache_groups[i]);
  d.text(A::representation, "quantization_schema", p.quantization_schema, c.quantization_schema);
  d.value(A::representation, "physical_mode", std::string(to_string(p.physical_mode)),
          std::string(to_string(c.physical_mode)));
  d.number(A::representation, "allocator_block_size", p.allocator_block_size, c.allocator_block_size);
  d.number(A::representation, "kernel_block_size", p.kernel_block_size, c.kernel_block_size);
  d.number(A::representation, "hash_block_size", p.hash_block_size, c.hash_block_size);
  d.number(A::representation, "scheduler_block_size", p.scheduler_block_size, c.scheduler_block_size);
  d.number(A::representation, "physical_page_bytes", p.physical_page_bytes, c.physical_page_bytes);
  d.value(A::representation, "hash_family", std::string(to_string(p.hash_family)),
          std::string(to_string(c.hash_family)));
  d.number(A::representation, "allocator_revision", p.allocator_revision, c.allocator_revision);
  d.text(A::position, "position_contract_id", p.position_contract_id, c.position_contract_id);
  d.text(A::logical, "logical_cache_abi_sha256", p.logical_cache_abi_sha256, c.logical_cache_abi_sha256);
  d.number(A::logical, "model_generation", p.model_generation, c.model_generation);
  d.number(A::label, "schema_version", p.schema_version, c.schema_version);
  d.text(A::label, "manifest_id", p.manifest_id, c.manifest_id);
  return d.take();
}

Status explain_layout_mismatch(const CacheLayoutManifest& producer, const CacheLayoutManifest& consumer) {
  const auto diffs = diff_layouts(producer, consumer);
  if (diffs.empty()) return Status::success();
  const auto& first = diffs.front();
  std::string reason = "cache layout differs in " + std::string(to_string(first.aspect)) + " field " + first.field +
                       ": " + first.operands;
  if (diffs.size() > 1) {
    reason += "; also differs:";
    for (size_t i = 1; i < diffs.size(); ++i) reason += " " + diffs[i].field;
  }
  return make_error(ErrorCode::incompatible, std::move(reason), first.field);
}

}  // namespace kvrt
