#pragma once
// The reference translator of spec 0x03I: one logical K/V coordinate
// (request snapshot, token, model layer, K/V, local head, lane) to one checked
// byte address, through the cache group, its versioned block table, the
// generation-scoped physical descriptor and the declared axis order.
//
// Rejection order (each a typed error; the first failing check wins):
//   0. unknown_request, then stale_table_version when the caller pinned a
//      version that is no longer (or never was) the published one;
//   1. request visibility   token >= context_length       request_not_visible
//      (the layer must resolve to a group before any table exists:
//       a layer outside every group                         coordinate_out_of_range)
//   2. table bounds         logical block >= table length  table_out_of_bounds
//   3. physical identity    other pool / unknown id        unknown_physical
//                           older pool generation          stale_physical
//   4. physical validity    token_offset >= valid_rows     row_not_valid
//   5. head / lane (and the descriptor's slot) in range    coordinate_out_of_range
//   6. base <= address < end                               address_out_of_tensor
// Visibility precedes validity because a shared block may hold rows that
// another, longer request materialised (0x03G).
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "services/address/tensor_geometry.hpp"
#include "services/address/translation_snapshot.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct AddressQuery {
  std::string request;                                 // request name
  std::optional<TableVersion> expected_table_version;  // version the caller planned against
  uint64_t token = 0;                                  // logical token position [tokens]
  uint32_t layer = 0;                                  // model layer
  TensorKind kind = TensorKind::K;
  uint32_t head = 0;  // local K/V head
  uint32_t lane = 0;  // head-dimension lane [scalars]
};

// Every intermediate of one translation, so a trace can be printed and each
// step checked. slot_id and byte_address are different quantities (0x03D).
struct AddressReceipt {
  // Request snapshot.
  RequestId request_id;
  std::string request;
  TableVersion table_version;
  uint64_t context_length = 0;  // [tokens]
  AddressQuery query;
  // Group resolution (0x03C).
  CacheGroupId group;
  uint32_t group_layer_start = 0;
  uint32_t group_layer_end = 0;
  uint32_t layer_local = 0;    // layer - group.layer_start
  uint32_t block_size = 0;     // P_g [tokens / block]
  uint64_t logical_block = 0;  // token // P_g
  uint32_t token_offset = 0;   // token % P_g [rows]
  // Physical identity (0x03A) and its descriptor.
  PoolId pool_id;
  PoolGeneration pool_generation;
  PhysicalBlockId physical_id;
  PhysicalSlot physical_slot;
  uint32_t valid_rows = 0;  // [rows]
  uint64_t slot_id = 0;     // slot * P_g + token_offset [token rows of the pool] (0x03D)
  // Bytes (0x03E).
  TensorGeometry geometry;                              // shape and strides, declared order
  std::array<uint64_t, kTensorAxisCount> coordinate{};  // I_g, declared order
  uint64_t element_offset = 0;                          // [elements]
  uint32_t scalar_bytes = 0;                            // [bytes / element]
  uint64_t byte_offset = 0;                             // [bytes]
  uint64_t tensor_base = 0;                             // [byte address]
  uint64_t tensor_end = 0;                              // one past the tensor's last byte [byte address]
  uint64_t byte_address = 0;                            // [byte address]
};

// A translator over one validated snapshot. Construction validates; a failed
// validation leaves nothing behind. Translation never mutates.
class AddressTranslator {
 public:
  static Result<AddressTranslator> create(TranslationSnapshot snapshot);

  Result<AddressReceipt> translate(const AddressQuery& query) const;
  const TranslationSnapshot& snapshot() const { return snapshot_; }

 private:
  explicit AddressTranslator(TranslationSnapshot s) : snapshot_(std::move(s)) {}
  TranslationSnapshot snapshot_;
};

}  // namespace kvrt
