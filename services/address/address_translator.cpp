#include "services/address/address_translator.hpp"

namespace kvrt {
namespace {

std::string num(uint64_t v) { return std::to_string(v); }

// Steps 0 and 1: which request snapshot, and is the token inside it.
Result<const RequestTables*> resolve_request(const TranslationSnapshot& s, const AddressQuery& q) {
  const RequestTables* r = s.current(q.request);
  if (r == nullptr) return make_error(ErrorCode::unknown_request, "no request named \"" + q.request + "\"", "request");
  if (q.expected_table_version && *q.expected_table_version != r->table_version)
    return make_error(ErrorCode::stale_table_version,
                      "request " + r->name + " was planned against table version " +
                          num(q.expected_table_version->value) + " but the published version is " +
                          num(r->table_version.value) +
                          (q.expected_table_version->value < r->table_version.value ? " (a successor superseded it)"
                                                                                    : " (never published)"),
                      "table_version");
  if (q.token >= r->context_length)
    return make_error(ErrorCode::request_not_visible,
                      "token " + num(q.token) + " is outside request " + r->name + "'s context of " +
                          num(r->context_length) + " tokens (v" + num(r->table_version.value) + ")",
                      "token");
  return r;
}

// Step 3: the table's PhysicalRef must name this pool, at its current
// generation, and an identity that has a descriptor (0x03A).
Result<const PoolDescriptor*> resolve_physical(const GroupPool& pool, const GroupTable& table, PhysicalBlockId id) {
  const std::string ref = "physical block " + num(id.value);
  if (table.pool_id != pool.pool_id)
    return make_error(ErrorCode::unknown_physical,
                      ref + " is scoped by pool " + num(table.pool_id.value) + ", but group " + num(pool.group.value) +
                          " reads pool " + num(pool.pool_id.value),
                      "table.pool_id");
  if (table.pool_generation != pool.pool_generation) {
    const bool older = table.pool_generation < pool.pool_generation;
    return make_error(older ? ErrorCode::stale_physical : ErrorCode::unknown_physical,
                      ref + " was published under pool " + num(pool.pool_id.value) + " generation " +
                          num(table.pool_generation.value) + "; the pool is at generation " +
                          num(pool.pool_generation.value) +
                          (older ? " (the pool was recycled since)" : " (that generation does not exist yet)"),
                      "table.pool_generation");
  }
  const PoolDescriptor* d = pool.descriptor(id);
  if (d == nullptr)
    return make_error(ErrorCode::unknown_physical,
                      ref + " has no descriptor in pool " + num(pool.pool_id.value) + " generation " +
                          num(pool.pool_generation.value),
                      "physical_block");
  if (d->pool_generation != pool.pool_generation)  // excluded by validate(); kept for the oracle's sake
    return make_error(ErrorCode::stale_physical,
                      ref + "'s descriptor is of generation " + num(d->pool_generation.value), "physical_block");
  return d;
}

Status check_range(uint64_t value, uint64_t extent, const char* what, const char* field) {
  if (value < extent) return Status::success();
  return make_error(ErrorCode::coordinate_out_of_range,
                    std::string(what) + " " + num(value) + " is outside [0," + num(extent) + ")", field);
}

}  // namespace

Result<AddressTranslator> AddressTranslator::create(TranslationSnapshot snapshot) {
  KVRT_TRY(snapshot.validate());
  return AddressTranslator(std::move(snapshot));
}

Result<AddressReceipt> AddressTranslator::translate(const AddressQuery& q) const {
  const TranslationSnapshot& s = snapshot_;
  AddressReceipt out;
  out.query = q;

  const RequestTables* request = nullptr;
  KVRT_TRY_ASSIGN(request, resolve_request(s, q));
  out.request_id = request->request_id;
  out.request = request->name;
  out.table_version = request->table_version;
  out.context_length = request->context_length;

  // 0x03C: the layer selects exactly one group; block and offset follow from P_g.
  const CacheGroupLayout* group = s.layout.group_for_layer(q.layer);
  if (group == nullptr)
    return make_error(
        ErrorCode::coordinate_out_of_range,
        "layer " + num(q.layer) + " belongs to no cache group (model has " + num(s.layout.layer_count()) + " layers)",
        "layer");
  out.group = group->group_id;
  out.group_layer_start = group->layer_start;
  out.group_layer_end = group->layer_end;
  out.layer_local = q.layer - group->layer_start;
  out.block_size = s.block_size();
  out.logical_block = q.token / out.block_size;
  out.token_offset = static_cast<uint32_t>(q.token % out.block_size);

  const GroupTable* table = request->table(group->group_id);
  const GroupPool* pool = s.pool(group->group_id);
  KVRT_ASSERT(table != nullptr && pool != nullptr, "validated snapshot lacks a table or pool for a group");

  // Step 2: table bounds.
  if (out.logical_block >= table->blocks.size())
    return make_error(ErrorCode::table_out_of_bounds,
                      "logical block " + num(out.logical_block) + " is beyond request " + request->name + "'s g" +
                          num(group->group_id.value) + " table of " + num(table->blocks.size()) + " blocks",
                      "token");
  const PhysicalBlockId id = table->blocks[out.logical_block];

  // Step 3: physical identity.
  const PoolDescriptor* desc = nullptr;
  KVRT_TRY_ASSIGN(desc, resolve_physical(*pool, *table, id));
  out.pool_id = pool->pool_id;
  out.pool_generation = pool->pool_generation;
  out.physical_id = id;
  out.physical_slot = desc->slot;
  out.valid_rows = desc->valid_rows;

  // Step 4: physical validity. The request may see the row; the block must
  // also have committed it, or the read would consume stale bytes (0x03G).
  if (out.token_offset >= desc->valid_rows)
    return make_error(ErrorCode::row_not_valid,
                      "token offset " + num(out.token_offset) + " of physical block " + num(id.value) +
                          " is not committed (valid rows " + num(desc->valid_rows) + ")",
                      "token");

  // Step 5: the remaining coordinates. The slot is already bounded by
  // validate(); checking it here keeps a layer-major layout from aliasing a
  // neighbouring layer while staying numerically in bounds (0x03).
  KVRT_TRY(check_range(q.head, group->kv_heads_local, "head", "head"));
  KVRT_TRY(check_range(q.lane, group->head_dim, "lane", "lane"));
  KVRT_TRY(check_range(desc->slot.value, pool->slot_count, "physical slot", "physical_slot"));

  // 0x03D: the token-slot id names a row of the group pool, not a byte.
  out.slot_id = uint64_t{desc->slot.value} * out.block_size + out.token_offset;

  // 0x03E: coordinate in declared axis order, row-major strides, bytes.
  out.geometry = s.geometry(*group, *pool);
  AxisValues by_axis{};
  by_axis[static_cast<size_t>(TensorAxis::layer_local)] = out.layer_local;
  by_axis[static_cast<size_t>(TensorAxis::physical_slot)] = desc->slot.value;
  by_axis[static_cast<size_t>(TensorAxis::token_offset)] = out.token_offset;
  by_axis[static_cast<size_t>(TensorAxis::kv_head)] = q.head;
  by_axis[static_cast<size_t>(TensorAxis::head_dim)] = q.lane;
  out.coordinate = out.geometry.declared(by_axis);
  out.element_offset = out.geometry.element_offset(out.coordinate);
  out.scalar_bytes = tensor_scalar_bytes(*group, q.kind);
  out.byte_offset = out.element_offset * out.scalar_bytes;
  out.tensor_base = pool->base(q.kind);
  out.tensor_end = s.tensor_end(*group, *pool, q.kind);
  out.byte_address = out.tensor_base + out.byte_offset;

  // Step 6: the last line of defence of 0x03I. With every coordinate inside
  // its extent the row-major offset is < elements, so this holds for any
  // validated snapshot; it stays as the typed check the spec's oracle ends on.
  if (out.byte_address < out.tensor_base || out.byte_address + out.scalar_bytes > out.tensor_end)
    return make_error(ErrorCode::address_out_of_tensor,
                      "byte address " + num(out.byte_address) + " is outside g" + num(group->group_id.value) + " " +
                          std::string(to_string(q.kind)) + " [" + num(out.tensor_base) + "," + num(out.tensor_end) +
                          ")",
                      "byte_address");
  return out;
}

}  // namespace kvrt
