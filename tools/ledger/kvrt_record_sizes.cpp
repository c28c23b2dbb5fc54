#include "tools/ledger/kvrt_record_sizes.hpp"

#include "services/allocator/block_allocator.hpp"
#include "services/common/digest.hpp"

namespace kvrt {

MetadataRecordSizes kvrt_record_sizes() {
  MetadataRecordSizes s;
  s.request_map_entry = sizeof(PhysicalBlockHandle);
  s.block_descriptor = sizeof(BlockMeta);
  s.cached_hash_entry = sizeof(Sha256Digest) + sizeof(uint64_t);
  s.valid_tail_record = sizeof(RequestFence);
  s.free_queue_entry = sizeof(uint32_t);
  return s;
}

}  // namespace kvrt
