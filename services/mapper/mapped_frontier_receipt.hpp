#pragma once
// MappedFrontierReceipt (spec 0x06B-0x06F): the mapper's proof that a request
// slot's virtual K/V range is physically backed up to a frontier, for every K
// and V tensor of every local layer at once (0x06D: a kernel must never see
// K0:q mapped without V1:q). The spec names the receipt but gives no field
// list; it is rebuilt from 0x06A (ledgers), 0x06B (slot generations), 0x06D
// (sync/async readiness, covers()), 0x06E (retained mappings are capacity,
// not K/V validity) and 0x06F (reclaiming an inactive slot's page bundle).
#include <cstdint>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

enum class KvTensorKind : uint8_t { key = 0, value = 1 };
inline constexpr uint8_t kKvTensorKindMax = 1;

// How the frontier was made ready (0x06D).
enum class MappingPath : uint8_t {
  synchronous = 0,   // mapped inside step(); ready before the receipt was published
  asynchronous = 1,  // mapped ahead in the background; the receipt publishes completion
};
inline constexpr uint8_t kMappingPathMax = 1;

// One page of one tensor mapped by this step: (tensor, slot, page q) -> handle (0x06C).
struct PageMapping {
  uint32_t local_layer = 0;  // layer index local to this worker [layers]
  KvTensorKind tensor = KvTensorKind::key;
  uint32_t page_index = 0;            // q: page within the slot's subrange [pages]
  PageHandleId handle;                // physical handle of G bytes
  BlockGeneration handle_generation;  // fences a recycled handle id

  friend bool operator==(const PageMapping&, const PageMapping&) = default;
};

// A complete K/V-layer page bundle moved from an inactive slot to this
// frontier under pressure (0x06E, 0x06F: D reclaims B's inactive bundle).
struct ReclaimedPageBundle {
  RequestSlot from_slot;
  SlotGeneration from_slot_generation;  // the inactive owner's generation
  uint32_t from_page_index = 0;         // page unmapped from the inactive slot [pages]
  uint32_t to_page_index = 0;           // page it now backs in this slot [pages]

  friend bool operator==(const ReclaimedPageBundle&, const ReclaimedPageBundle&) = default;
};

// The mapper's byte ledgers after this step (0x06A). They reconcile as
//   mapped = active_valid + active_slack + inactive_retained
//   phys_pool = mapped + free_handles
// and the virtual reservation appears in neither equation.
struct MappingLedger {
  uint64_t virtual_reserved_bytes = 0;   // M_VA = 2 L B R [bytes of address space]
  uint64_t physical_pool_bytes = 0;      // M_phys,pool = N_handle G [bytes]
  uint64_t mapped_bytes = 0;             // M_mapped [bytes]
  uint64_t active_valid_bytes = 0;       // M_active,valid: rows produced [bytes]
  uint64_t active_slack_bytes = 0;       // M_active,slack [bytes]
  uint64_t inactive_retained_bytes = 0;  // M_inactive,retained [bytes]
  uint64_t free_handle_bytes = 0;        // M_free-handles [bytes]

  friend bool operator==(const MappingLedger&, const MappingLedger&) = default;
};

struct MappedFrontierReceipt {
  RequestId request_id;
  RequestGeneration request_generation;
  RequestSlot request_slot;                // the slot's row in the virtual tensors (cache_batch_idx)
  SlotGeneration slot_generation;          // advanced when the slot is bound to a new request (0x06E)
  Epoch mapper_epoch;                      // mapper state version this receipt was published at
  uint32_t local_layers = 0;               // L: every frontier covers 2 L tensors [layers]
  uint64_t page_group_bytes = 0;           // G [bytes / page]
  uint32_t tokens_per_page = 0;            // P_tokens = G / B_tensor,row [tokens / page]
  uint32_t target_tokens = 0;              // T_r: the frontier this receipt covers [tokens]
  uint32_t mapped_pages = 0;               // pages per tensor now mapped for the slot [pages];
                                           // at least ceil(T_r / P_tokens)
  uint32_t valid_tokens = 0;               // K/V rows the current owner has written [tokens];
                                           // 0 when a retained slot is re-bound (0x06E)
  bool retained_mapping_reused = false;    // the slot kept pages from an inactive owner
  bool old_kv_semantically_valid = false;  // never true across owners (0x06E): reused
                                           // mapping is capacity, not prefix identity
  std::vector<PageMapping> new_mappings;   // pages mapped by this step, all 2 L tensors
  std::vector<ReclaimedPageBundle> reclaimed_bundles;
  MappingPath mapping_path = MappingPath::synchronous;
  bool ready_before_use = false;  // every page above is mapped and visible (0x06D)
  MappingLedger ledger;

  // receipt.covers(request_generation, target_tokens) of 0x06D: the kernel may
  // read rows [0, tokens) of this request generation.
  bool covers(RequestGeneration generation, uint32_t tokens) const {
    return ready_before_use && generation == request_generation && uint64_t{mapped_pages} * tokens_per_page >= tokens;
  }

  friend bool operator==(const MappedFrontierReceipt&, const MappedFrontierReceipt&) = default;
};

}  // namespace kvrt
