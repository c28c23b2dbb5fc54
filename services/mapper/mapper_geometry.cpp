#include "services/mapper/mapper_geometry.hpp"

#include <string>

#include "services/common/units.hpp"

namespace kvrt {
namespace {

Error config_error(std::string reason, std::string field) {
  return make_error(ErrorCode::config_field, std::move(reason), std::move(field));
}

}  // namespace

Result<MapperGeometry> MapperGeometry::make(const MapperConfig& c) {
  if (c.local_layers == 0) return config_error("L must be positive", "local_layers");
  if (c.request_slots == 0) return config_error("B must be positive", "request_slots");
  if (c.max_tokens == 0) return config_error("T_max must be positive", "max_tokens");
  if (c.kv_heads == 0) return config_error("H_kv must be positive", "kv_heads");
  if (c.head_dim == 0) return config_error("d_h must be positive", "head_dim");
  if (c.element_bytes == 0) return config_error("b must be positive", "element_bytes");
  if (c.page_group_bytes == 0) return config_error("G must be positive", "page_group_bytes");
  MapperGeometry g;
  g.config_ = c;
  g.row_bytes_ = uint64_t{c.kv_heads} * c.head_dim * c.element_bytes;
  // 0x06A assumes G divisible by the one-tensor row size; a row straddling two
  // page groups would make "tokens per page" meaningless.
  if (c.page_group_bytes % g.row_bytes_ != 0)
    return config_error("G = " + std::to_string(c.page_group_bytes) + " B is not a multiple of the row (" +
                            std::to_string(g.row_bytes_) + " B)",
                        "page_group_bytes");
  g.tokens_per_page_ = static_cast<uint32_t>(c.page_group_bytes / g.row_bytes_);
  g.slot_range_bytes_ = c.page_group_bytes * ceil_div(uint64_t{c.max_tokens} * g.row_bytes_, c.page_group_bytes);
  // Handles move as complete K/V-layer bundles (0x06D); a remainder could never be mapped.
  if (c.handle_count == 0 || c.handle_count % g.tensor_count() != 0)
    return config_error("N_handle = " + std::to_string(c.handle_count) +
                            " is not a positive multiple of 2L = " + std::to_string(g.tensor_count()),
                        "handle_count");
  return g;
}

uint32_t MapperGeometry::pages_for_tokens(uint32_t tokens) const {
  return static_cast<uint32_t>(ceil_div(uint64_t{tokens}, uint64_t{tokens_per_page_}));
}

Result<KvScalarAddress> MapperGeometry::locate(uint32_t layer, KvTensorKind kind, uint32_t slot, uint32_t token,
                                               uint32_t head, uint32_t lane) const {
  if (layer >= config_.local_layers) return make_error(ErrorCode::coordinate_out_of_range, "layer", "layer");
  if (slot >= config_.request_slots) return make_error(ErrorCode::coordinate_out_of_range, "slot", "slot");
  if (token >= config_.max_tokens) return make_error(ErrorCode::coordinate_out_of_range, "token >= T_max", "token");
  if (head >= config_.kv_heads) return make_error(ErrorCode::coordinate_out_of_range, "head >= H_kv", "head");
  if (lane >= config_.head_dim) return make_error(ErrorCode::coordinate_out_of_range, "lane >= d_h", "lane");
  KvScalarAddress a;
  a.tensor_index = tensor_index(layer, kind);
  // u = (t H_kv d_h + h d_h + d) b
  a.offset_in_slot =
      (uint64_t{token} * config_.kv_heads * config_.head_dim + uint64_t{head} * config_.head_dim + lane) *
      config_.element_bytes;
  a.page_index = static_cast<uint32_t>(a.offset_in_slot / config_.page_group_bytes);
  a.offset_in_page = a.offset_in_slot % config_.page_group_bytes;
  a.reservation_offset = a.tensor_index * tensor_bytes() + uint64_t{slot} * slot_range_bytes_ + a.offset_in_slot;
  return a;
}

}  // namespace kvrt
