#include "tools/ledger/row_ledger.hpp"

#include <string>

namespace kvrt {

Result<RowLedger> derive_row_ledger(const CacheLayoutManifest& manifest) {
  KVRT_TRY(manifest.validate());
  RowLedger out;
  if (manifest.allocator_block_size > kMaxLedgerBlockRows)
    return make_error(ErrorCode::invalid_argument,
                      "allocator_block_size " + std::to_string(manifest.allocator_block_size) + " exceeds " +
                          std::to_string(kMaxLedgerBlockRows) + " rows per block",
                      "allocator_block_size");
  out.block_rows = manifest.allocator_block_size;
  for (size_t i = 0; i < manifest.cache_groups.size(); ++i) {
    const CacheGroupLayout& g = manifest.cache_groups[i];
    // Each factor is a uint32; a 128-bit product cannot overflow before the bound check.
    const unsigned __int128 scalars_per_token =
        static_cast<unsigned __int128>(g.layers()) * g.kv_heads_local * g.head_dim;
    const unsigned __int128 row = scalars_per_token * (scalar_bytes(g.k_dtype) + scalar_bytes(g.v_dtype));
    if (row > kMaxLedgerRowBytes)
      return make_error(ErrorCode::invalid_argument,
                        "group " + std::to_string(g.group_id.value) + " row is wider than " +
                            std::to_string(kMaxLedgerRowBytes) + " bytes per token",
                        "cache_groups[" + std::to_string(i) + "]");
    GroupRowLedger gl;
    gl.group_id = g.group_id;
    gl.layers = g.layers();
    gl.kv_heads_local = g.kv_heads_local;
    gl.head_dim = g.head_dim;
    gl.k_scalar_bytes = scalar_bytes(g.k_dtype);
    gl.v_scalar_bytes = scalar_bytes(g.v_dtype);
    gl.k_row_bytes = g.k_row_bytes();
    gl.v_row_bytes = g.v_row_bytes();
    gl.row_bytes = gl.k_row_bytes + gl.v_row_bytes;
    gl.block_bytes = gl.row_bytes * out.block_rows;
    out.row_bytes += gl.row_bytes;
    out.groups.push_back(gl);
  }
  if (out.row_bytes > kMaxLedgerRowBytes)
    return make_error(ErrorCode::invalid_argument,
                      "B_row,rank " + std::to_string(out.row_bytes) + " is wider than " +
                          std::to_string(kMaxLedgerRowBytes) + " bytes per token",
                      "cache_groups");
  out.block_bytes = out.row_bytes * out.block_rows;
  return out;
}

}  // namespace kvrt
