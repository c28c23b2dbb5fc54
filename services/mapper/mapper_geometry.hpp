#pragma once
// Page-group arithmetic of the mapper owner (spec 0x06A, 0x06C, 0x0BJ). Pure
// integers, no OS calls: the 0x06F teaching fixture runs this at G = 64 B while
// real mappings (memfd_backing.hpp) use a G that is a multiple of the OS page.
//
// Tensor order inside the reservation is K0, V0, K1, V1, ... (tensor index
// 2*layer + kind). 0x06C fixes it: base(V1) = 3 * (B * R), so V1 is tensor 3.
#include <cstdint>

#include "services/common/result.hpp"
#include "services/mapper/mapped_frontier_receipt.hpp"

namespace kvrt {

struct MapperConfig {
  uint32_t local_layers = 0;      // L [layers]
  uint32_t request_slots = 0;     // B [slots]
  uint32_t max_tokens = 0;        // T_max [tokens per request]
  uint32_t kv_heads = 0;          // H_kv, local after TP sharding [heads]
  uint32_t head_dim = 0;          // d_h [elements per head]
  uint32_t element_bytes = 0;     // b [bytes per element]
  uint64_t page_group_bytes = 0;  // G [bytes per page group]
  uint32_t handle_count = 0;      // N_handle [page handles of G bytes]
};

// Where one scalar lives (0x06C).
struct KvScalarAddress {
  uint32_t tensor_index = 0;        // 2*layer + kind
  uint64_t offset_in_slot = 0;      // u [bytes within the slot's subrange]
  uint32_t page_index = 0;          // q = floor(u / G) [pages]
  uint64_t offset_in_page = 0;      // delta = u mod G [bytes]
  uint64_t reservation_offset = 0;  // A_VA - reservation base [bytes]
};

class MapperGeometry {
 public:
  // Rejects a configuration the arithmetic cannot honour (field names it).
  static Result<MapperGeometry> make(const MapperConfig& config);

  const MapperConfig& config() const { return config_; }
  uint32_t tensor_count() const { return 2 * config_.local_layers; }  // 2L
  uint64_t row_bytes() const { return row_bytes_; }                   // B_tensor,row [bytes]
  uint32_t tokens_per_page() const { return tokens_per_page_; }       // P_tokens
  uint64_t slot_range_bytes() const { return slot_range_bytes_; }     // R [bytes]
  uint32_t pages_per_slot() const { return static_cast<uint32_t>(slot_range_bytes_ / config_.page_group_bytes); }
  uint64_t tensor_bytes() const { return uint64_t{config_.request_slots} * slot_range_bytes_; }  // B R
  uint64_t virtual_reserved_bytes() const { return tensor_count() * tensor_bytes(); }            // M_VA = 2LBR
  uint64_t physical_pool_bytes() const { return uint64_t{config_.handle_count} * config_.page_group_bytes; }
  uint64_t bundle_bytes() const { return tensor_count() * config_.page_group_bytes; }  // 2LG
  uint32_t bundle_count() const { return config_.handle_count / tensor_count(); }
  // N_r,pages = ceil(T_r / P_tokens) [pages]
  uint32_t pages_for_tokens(uint32_t tokens) const;

  uint32_t tensor_index(uint32_t layer, KvTensorKind kind) const { return 2 * layer + static_cast<uint32_t>(kind); }
  // Offset of (tensor, slot, page q) from the reservation base [bytes].
  uint64_t page_offset(uint32_t tensor, uint32_t slot, uint32_t page) const {
    return tensor * tensor_bytes() + uint64_t{slot} * slot_range_bytes_ + uint64_t{page} * config_.page_group_bytes;
  }
  // 0x06C address of one scalar; rejects coordinates outside the tensor.
  Result<KvScalarAddress> locate(uint32_t layer, KvTensorKind kind, uint32_t slot, uint32_t token, uint32_t head,
                                 uint32_t lane) const;

 private:
  MapperConfig config_;
  uint64_t row_bytes_ = 0;
  uint32_t tokens_per_page_ = 0;
  uint64_t slot_range_bytes_ = 0;
};

}  // namespace kvrt
