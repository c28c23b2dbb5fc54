@0xfd094de9abab4fa8;
# The mapper's readiness receipt (spec 0x06A-0x06F). Mirrors
# services/mapper/mapped_frontier_receipt.hpp; enum ordinals equal the C++
# enum values (the codec static_asserts it).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");

enum KvTensorKind {
  key @0;
  value @1;
}

enum MappingPath {
  synchronous @0;
  asynchronous @1;
}

# (tensor, slot, page q) -> physical handle (0x06C).
struct PageMapping {
  localLayer @0 :UInt32;         # layer local to this worker [layers]
  tensor @1 :KvTensorKind;
  pageIndex @2 :UInt32;          # q [pages]
  handle @3 :UInt64;             # PageHandleId of a G-byte physical handle
  handleGeneration @4 :UInt32;   # BlockGeneration of the handle
}

# A K/V-layer page bundle taken from an inactive slot (0x06E, 0x06F).
struct ReclaimedPageBundle {
  fromSlot @0 :UInt32;             # RequestSlot
  fromSlotGeneration @1 :UInt64;   # SlotGeneration of the inactive owner
  fromPageIndex @2 :UInt32;        # [pages]
  toPageIndex @3 :UInt32;          # [pages]
}

# Byte ledgers of 0x06A after this step.
struct MappingLedger {
  virtualReservedBytes @0 :UInt64;   # M_VA [bytes of address space, not resident]
  physicalPoolBytes @1 :UInt64;      # M_phys,pool [bytes]
  mappedBytes @2 :UInt64;            # M_mapped [bytes]
  activeValidBytes @3 :UInt64;       # [bytes]
  activeSlackBytes @4 :UInt64;       # [bytes]
  inactiveRetainedBytes @5 :UInt64;  # [bytes]
  freeHandleBytes @6 :UInt64;        # [bytes]
}

# MappedFrontierReceipt (spec 0x06D).
struct MappedFrontierReceipt {
  requestId @0 :UInt64;              # RequestId
  requestGeneration @1 :UInt32;      # RequestGeneration
  requestSlot @2 :UInt32;            # RequestSlot
  slotGeneration @3 :UInt64;         # SlotGeneration
  mapperEpoch @4 :UInt64;            # Epoch of the mapper state
  localLayers @5 :UInt32;            # L [layers]; a frontier spans 2L tensors
  pageGroupBytes @6 :UInt64;         # G [bytes / page]
  tokensPerPage @7 :UInt32;          # P_tokens [tokens / page]
  targetTokens @8 :UInt32;           # T_r [tokens]
  mappedPages @9 :UInt32;            # per tensor [pages]
  validTokens @10 :UInt32;           # rows written by the current owner [tokens]
  retainedMappingReused @11 :Bool;
  oldKvSemanticallyValid @12 :Bool;  # always false across owners (0x06E)
  newMappings @13 :List(PageMapping);
  reclaimedBundles @14 :List(ReclaimedPageBundle);
  mappingPath @15 :MappingPath;
  readyBeforeUse @16 :Bool;
  ledger @17 :MappingLedger;
}
