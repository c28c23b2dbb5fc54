@0xfd094de9abab4fa8;
# The mapper owner's messages (services/mapper/; spec 0x06A-0x06F): the
# readiness receipt of a mapped frontier, and the batched operations a worker
# sends with the batch receipt the owner answers: bind a request to a slot,
# make every active frontier of the step mapped before use (0x06D), record
# the rows written, free the slot. Each operation is answered by one outcome
# at its index; one that fails answers a typed Error and changes nothing
# (0x04F).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
$Kvrt.include(["services/common/receipt_ids.hpp"]);

enum KvTensorKind {
  key @0;
  value @1;
}

enum MappingPath {
  synchronous @0;    # mapped inside step(); ready before the receipt was published
  asynchronous @1;   # mapped ahead in the background; the receipt publishes completion
}

struct PageMapping {
  # (tensor, slot, page q) -> physical handle (0x06C).
  localLayer @0 :UInt32;                                       # layer index local to this worker [layers]
  tensor @1 :KvTensorKind;
  pageIndex @2 :UInt32;                                        # q: page within the slot's subrange [pages]
  handle @3 :UInt64 $Kvrt.type("PageHandleId");                # physical handle of G bytes
  handleGeneration @4 :UInt32 $Kvrt.type("BlockGeneration");   # fences a recycled handle id
}

struct ReclaimedPageBundle {
  # A K/V-layer page bundle taken from an inactive slot (0x06E, 0x06F).
  fromSlot @0 :UInt32 $Kvrt.type("RequestSlot");
  fromSlotGeneration @1 :UInt64 $Kvrt.type("SlotGeneration");  # the inactive owner's generation
  fromPageIndex @2 :UInt32;          # page unmapped from the inactive slot [pages]
  toPageIndex @3 :UInt32;            # page it now backs in this slot [pages]
}

struct MappingLedger {
  # Byte ledgers of 0x06A after this step.
  virtualReservedBytes @0 :UInt64;   # M_VA = 2 L B R [bytes of address space, not resident]
  physicalPoolBytes @1 :UInt64;      # M_phys,pool = N_handle G [bytes]
  mappedBytes @2 :UInt64;            # M_mapped [bytes]
  activeValidBytes @3 :UInt64;       # M_active,valid: rows produced [bytes]
  activeSlackBytes @4 :UInt64;       # M_active,slack [bytes]
  inactiveRetainedBytes @5 :UInt64;  # M_inactive,retained [bytes]
  freeHandleBytes @6 :UInt64;        # M_free-handles [bytes]
}

struct MappedFrontierReceipt $Kvrt.message {
  # MappedFrontierReceipt (0x06D): the mapper's proof that a request slot's
  # virtual K/V range is physically backed up to a frontier, for every one of
  # its 2 L tensors at once (a kernel must never see K0:q mapped without
  # V1:q), before a kernel dereferences it. covers()
  # (services/mapper/mapped_frontier_receipt.hpp) is the check a consumer
  # makes. The spec names the receipt but gives no field list; it is rebuilt
  # from 0x06A (ledgers), 0x06B (slot generations), 0x06D (sync/async
  # readiness), 0x06E (retained mappings are capacity, not K/V validity) and
  # 0x06F (reclaiming an inactive slot's page bundle).
  requestId @0 :UInt64 $Kvrt.type("RequestId");
  requestGeneration @1 :UInt32 $Kvrt.type("RequestGeneration");
  requestSlot @2 :UInt32 $Kvrt.type("RequestSlot");           # the slot's row in the virtual tensors (cache_batch_idx)
  slotGeneration @3 :UInt64 $Kvrt.type("SlotGeneration");     # advanced when the slot is bound to a new request (0x06E)
  mapperEpoch @4 :UInt64 $Kvrt.type("Epoch");                 # mapper state version this receipt was published at
  localLayers @5 :UInt32;            # L: every frontier covers 2 L tensors [layers]
  pageGroupBytes @6 :UInt64;         # G [bytes / page]
  tokensPerPage @7 :UInt32;          # P_tokens = G / B_tensor,row [tokens / page]
  targetTokens @8 :UInt32;           # T_r: the frontier this receipt covers [tokens]
  mappedPages @9 :UInt32;            # pages per tensor now mapped for the slot [pages]
  validTokens @10 :UInt32;           # K/V rows the current owner has written [tokens]
  retainedMappingReused @11 :Bool;   # the slot kept pages from an inactive owner
  oldKvSemanticallyValid @12 :Bool;
  # Never true across owners (0x06E): reused pages hold another request's rows.
  newMappings @13 :List(PageMapping);                          # pages mapped by this step, all 2 L tensors
  reclaimedBundles @14 :List(ReclaimedPageBundle);
  mappingPath @15 :MappingPath;
  readyBeforeUse @16 :Bool;          # every page above is mapped and visible (0x06D)
  ledger @17 :MappingLedger;
}

# ---- the batched operations a worker sends --------------------------------

enum ReleaseMode {
  retain @0;       # the slot keeps its pages for a later owner (0x06E)
  unmapNow @1;     # the pages go back to the free handles at once
}

enum MappingFeasibility {
  ready @0;
  insufficientHandles @1;
}

struct SlotBinding {
  slot @0 :UInt32 $Kvrt.type("RequestSlot");
  generation @1 :UInt64 $Kvrt.type("SlotGeneration");
  retainedPages @2 :UInt32;                # pages kept from an inactive owner [pages per tensor]
  retainedMappingReused @3 :Bool;
  retainedMappings @4 :List(PageMapping);  # the retained pages of every tensor: a worker's view maps them before use (0x06B, 0x06E)
}

struct StepRequest {
  request @0 :UInt64 $Kvrt.type("RequestId");
  targetTokens @1 :UInt32;                 # T_r: rows the next forward may touch [tokens]
}

struct StepResult {
  feasibility @0 :MappingFeasibility;
  bundlesNeeded @1 :UInt32;                # new page bundles this step needs [bundles]
  bundlesAvailable @2 :UInt32;             # free + reclaimable inactive bundles [bundles]
  receipts @3 :List(MappedFrontierReceipt);   # one per request when ready
}

struct MapperAllocOp {
  request @0 :UInt64 $Kvrt.type("RequestId");
  generation @1 :UInt32 $Kvrt.type("RequestGeneration");
  expectedTokens @2 :UInt32;               # [tokens], <= T_max
}

struct MapperStepOp {
  requests @0 :List(StepRequest);          # the step's active frontiers
  path @1 :MappingPath;
}

struct MapperAppendOp {
  request @0 :UInt64 $Kvrt.type("RequestId");
  generation @1 :UInt64 $Kvrt.type("SlotGeneration");
  validTokens @2 :UInt32;                  # rows [0, valid_tokens) are written [tokens]
}

struct MapperFreeOp {
  request @0 :UInt64 $Kvrt.type("RequestId");
  generation @1 :UInt64 $Kvrt.type("SlotGeneration");
  mode @2 :ReleaseMode;
}

struct MapperOp {
  union {
    alloc @0 :MapperAllocOp;
    step @1 :MapperStepOp;
    append @2 :MapperAppendOp;
    free @3 :MapperFreeOp;
  }
}

# Append and free answer only "done" (their effect shows in the next step's
# receipts and in the ledgers).
struct MapperDone {}

struct MapperOutcome {
  union {
    slotBinding @0 :SlotBinding;
    stepResult @1 :StepResult;
    done @2 :MapperDone;
    error @3 :Common.TypedError;
  }
}

struct MapperBatch $Kvrt.message {
  trace @0 :Common.TraceContext;
  ops @1 :List(MapperOp);                  # applied in order [operations]
}

struct MapperBatchReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcomes @1 :List(MapperOutcome);        # outcomes[i] answers ops[i] [operations]
}
