#include "tools/ledger/metadata_ledger.hpp"

#include <string>

namespace kvrt {

Status validate_record_sizes(const MetadataRecordSizes& s) {
  const struct {
    uint64_t value;
    uint64_t bound;
    const char* field;
  } fields[] = {
      {s.request_map_entry, kMaxMetadataRecordBytes, "metadata.request_map_entry"},
      {s.block_descriptor, kMaxMetadataRecordBytes, "metadata.block_descriptor"},
      {s.cached_hash_entry, kMaxMetadataRecordBytes, "metadata.cached_hash_entry"},
      {s.valid_tail_record, kMaxMetadataRecordBytes, "metadata.valid_tail_record"},
      {s.free_queue_entry, kMaxMetadataRecordBytes, "metadata.free_queue_entry"},
      {s.fixed, kMaxMetadataFixedBytes, "metadata.fixed"},
  };
  for (const auto& f : fields)
    if (f.value > f.bound)
      return make_error(ErrorCode::invalid_argument,
                        std::to_string(f.value) + " bytes exceed the bound of " + std::to_string(f.bound), f.field);
  return Status::success();
}

MetadataLedger compute_metadata_ledger(const MetadataRecordSizes& sizes, const MetadataCounts& counts) {
  MetadataLedger m;
  m.record_sizes = sizes;
  m.counts = counts;
  m.request_map_bytes = sizes.request_map_entry * counts.request_block_refs;
  m.descriptor_bytes = sizes.block_descriptor * counts.pool_blocks;
  m.cached_hash_bytes = sizes.cached_hash_entry * counts.cached_hashes;
  m.valid_tail_bytes = sizes.valid_tail_record * counts.live_requests;
  m.free_queue_bytes = sizes.free_queue_entry * counts.free_queue_entries;
  m.fixed_bytes = sizes.fixed;
  m.total_bytes = m.request_map_bytes + m.descriptor_bytes + m.cached_hash_bytes + m.valid_tail_bytes +
                  m.free_queue_bytes + m.fixed_bytes;
  return m;
}

}  // namespace kvrt
