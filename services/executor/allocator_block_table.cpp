#include "services/executor/allocator_block_table.hpp"

#include <string>

namespace kvrt::executor {

Result<ResolvedBlockTable> block_table_from_allocator(const BlockAllocator& allocator, RequestId request,
                                                      uint32_t group_index, uint32_t block_id_base) {
  ResolvedBlockTable out;
  RequestFence fence;
  KVRT_TRY_ASSIGN(fence, allocator.fence(request));
  KVRT_TRY_ASSIGN(out.context_tokens, allocator.context_tokens(request));
  std::vector<PhysicalBlockHandle> handles;
  KVRT_TRY_ASSIGN(handles, allocator.table(request, group_index));
  out.request_id = request;
  out.table_version = fence.table_version;
  out.slots.reserve(handles.size());
  out.valid_rows.reserve(handles.size());
  for (size_t j = 0; j < handles.size(); ++j) {
    const PhysicalBlockHandle& h = handles[j];
    out.group = h.group;
    if (h.block.value < block_id_base)
      return make_error(
          ErrorCode::coordinate_out_of_range,
          "block id " + std::to_string(h.block.value) + " below the pool's base " + std::to_string(block_id_base),
          "block_id_base");
    BlockMeta meta;
    KVRT_TRY_ASSIGN(meta, allocator.block(h));
    out.slots.push_back(h.block.value - block_id_base);
    out.valid_rows.push_back(meta.valid_rows);
  }
  return out;
}

}  // namespace kvrt::executor
