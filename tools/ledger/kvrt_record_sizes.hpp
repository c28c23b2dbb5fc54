#pragma once
// kvrt's own in-memory record sizes, the declared inputs of the metadata
// ledger (0x02E, 0x09B) wherever kvrt reports its own metadata (`kvrt run`'s
// peak ledger, `kvrt blocksize`): a table entry is a PhysicalBlockHandle, a
// descriptor a BlockMeta, a cached hash a SHA-256 digest plus its 64-bit
// cache key, a valid-tail record a RequestFence, a free-queue item a 32-bit
// slot.
#include "tools/ledger/metadata_ledger.hpp"

namespace kvrt {

MetadataRecordSizes kvrt_record_sizes();

}  // namespace kvrt
