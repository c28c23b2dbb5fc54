#pragma once
// A request's block table taken straight from the allocator owner's
// BlockAllocator for the executor: physical slots in logical order and each
// block's committed rows, at the request's current table version. This is
// how a single-process model (engine/model/) or the executor's actor hands
// an allocation receipt's request to a paged kernel; across processes the
// same table travels as an AllocationReceipt and is rebuilt by the reader.
#include <cstdint>

#include "services/allocator/block_allocator.hpp"
#include "services/common/result.hpp"
#include "services/executor/block_table.hpp"

namespace kvrt::executor {

// `block_id_base` is the group pool's GroupPoolConfig::block_id_base (block
// id of slot s is base + s). Errors: those of BlockAllocator::table /
// fence / context_tokens / block (unknown or stale request, stale handle),
// and coordinate_out_of_range when a handle's id lies below the base.
Result<ResolvedBlockTable> block_table_from_allocator(const BlockAllocator& allocator, RequestId request,
                                                      uint32_t group_index, uint32_t block_id_base);

}  // namespace kvrt::executor
