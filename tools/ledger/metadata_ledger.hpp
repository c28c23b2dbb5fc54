#pragma once
// Metadata ledger (spec 0x02E, 0x09B): allocator indexing and ownership records,
// counted per declared record family and kept apart from K/V payload.
//
//   M_meta = I_map  * N_request_block_refs   [entries]
//          + I_desc * N_pool_blocks          [descriptors]
//          + I_hash * N_cached_hashes        [entries]
//          + I_tail * N_live_requests        [requests]
//          + I_free * N_free_blocks          [queue items]
//          + M_fixed                         [bytes]
//
// The record sizes are declared inputs, not measurements, and say nothing about
// where (CPU or GPU) each record lives: the formula is dimensional only.
#include <cstdint>

#include "services/common/result.hpp"

namespace kvrt {

struct MetadataRecordSizes {
  uint64_t request_map_entry = 0;  // I_map  [bytes / block-table entry]
  uint64_t block_descriptor = 0;   // I_desc [bytes / provisioned block]
  uint64_t cached_hash_entry = 0;  // I_hash [bytes / full-block hash entry]
  uint64_t valid_tail_record = 0;  // I_tail [bytes / live request]
  uint64_t free_queue_entry = 0;   // I_free [bytes / free-queue item]
  uint64_t fixed = 0;              // M_fixed [bytes]
};

// Largest declared record (and fixed block) the ledger accepts [bytes]; with the
// count bounds it keeps M_meta exact in 64 bits.
inline constexpr uint64_t kMaxMetadataRecordBytes = uint64_t{1} << 24;
inline constexpr uint64_t kMaxMetadataFixedBytes = uint64_t{1} << 40;

// Rejects a record larger than the bounds above (invalid_argument naming the
// record field, e.g. "metadata.block_descriptor").
Status validate_record_sizes(const MetadataRecordSizes& sizes);

struct MetadataCounts {
  uint64_t request_block_refs = 0;  // N_ref: sum of table lengths [entries]
  uint64_t pool_blocks = 0;         // N_pool: one descriptor per provisioned block
  uint64_t cached_hashes = 0;       // N_full: one hash per full unique block (0x09B)
  uint64_t live_requests = 0;       // one valid-tail record per live request
  uint64_t free_queue_entries = 0;  // N_free = N_pool - N_live
};

struct MetadataLedger {
  MetadataRecordSizes record_sizes;
  MetadataCounts counts;
  uint64_t request_map_bytes = 0;
  uint64_t descriptor_bytes = 0;
  uint64_t cached_hash_bytes = 0;
  uint64_t valid_tail_bytes = 0;
  uint64_t free_queue_bytes = 0;
  uint64_t fixed_bytes = 0;
  uint64_t total_bytes = 0;  // M_meta
};

// Counts are bounded by the request-view and pool bounds, so products are exact.
MetadataLedger compute_metadata_ledger(const MetadataRecordSizes& sizes, const MetadataCounts& counts);

}  // namespace kvrt
