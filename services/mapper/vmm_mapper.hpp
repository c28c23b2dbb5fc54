#pragma once
// VmmMapper: the mapper owner's core (spec 0x06A-0x06F, issue 6), CPU side.
//
// Lifecycle (0x06B): init -> alloc_reqid -> step(sequence lengths) -> kernels
// read/write through the virtual tensors (append_rows / check_readable) ->
// free_reqid (retain or unmap now) -> shutdown.
//
// Two state machines plus the slot generation (0x06B):
//   virtual range:   UNRESERVED -> VA_RESERVED -> VA_RELEASED   (MapperPhase)
//   physical handle: CREATED_FREE -> MAPPED(slot, tensor, page) -> CREATED_FREE -> RELEASED
//   slot generation: +1 on every alloc_reqid; valid rows restart at 0 (0x06E)
//
// Handles move only as complete K/V-layer bundles (2L handles, one per tensor,
// 0x06D), so a frontier is never half mapped. A caller's broken precondition
// is a typed Error with the state unchanged; running out of handles in step()
// is a normal StepResult (0x06D: "a physical-feasibility result"). An OS
// refusal inside step() (os_mapping_failed) leaves the bundles completed
// before it mapped as slack and undoes the failing bundle, so validate() holds.
// MappingPath::asynchronous is recorded in the receipt; the background mapping
// thread of 0x06D is not part of this core and changes timing only.
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "services/common/state_digest.hpp"
#include "services/mapper/mapper_geometry.hpp"
#include "services/mapper/page_backing.hpp"

namespace kvrt {

enum class MapperPhase : uint8_t { unreserved = 0, va_reserved = 1, va_released = 2 };
enum class HandleState : uint8_t { created_free = 0, mapped = 1, released = 2 };
enum class ReleaseMode : uint8_t { retain = 0, unmap_now = 1 };
enum class MappingFeasibility : uint8_t { ready = 0, insufficient_handles = 1 };

struct SlotBinding {
  RequestSlot slot;
  SlotGeneration generation;
  uint32_t retained_pages = 0;        // pages kept from an inactive owner [pages per tensor]
  bool retained_mapping_reused = false;
};

struct StepRequest {
  RequestId request;
  uint32_t target_tokens = 0;  // T_r: rows the next forward may touch [tokens]
};

struct StepResult {
  MappingFeasibility feasibility = MappingFeasibility::ready;
  uint32_t bundles_needed = 0;     // new page bundles this step needs [bundles]
  uint32_t bundles_available = 0;  // free + reclaimable inactive bundles [bundles]
  std::vector<MappedFrontierReceipt> receipts;  // one per request when ready
};

// Where a kernel's scalar lands physically (0x06C: (slot, tensor, q) -> handle + delta).
struct PhysicalLocation {
  KvScalarAddress address;
  PageHandleId handle;
  uint64_t pool_offset = 0;  // handle * G + delta [bytes into the pool]
};

struct HandleRecord {
  HandleState state = HandleState::created_free;
  RequestSlot slot;        // valid while mapped
  uint32_t tensor = 0;     // 2*layer + kind, valid while mapped
  uint32_t page = 0;       // q, valid while mapped
  BlockGeneration generation;  // +1 on every map: fences stale receipts
};

struct SlotRecord {
  bool active = false;
  RequestId request;
  RequestGeneration request_generation;
  SlotGeneration generation;
  uint32_t target_tokens = 0;  // frontier of the latest step [tokens]
  uint32_t valid_tokens = 0;   // rows this generation wrote [tokens]
  std::vector<std::vector<PageHandleId>> pages;  // page q -> handle per tensor (2L)
};

class VmmMapper {
 public:
  // init (0x06B): reserve the virtual tensors, create N_handle handles unmapped.
  static Result<std::unique_ptr<VmmMapper>> init(const MapperConfig& config, std::unique_ptr<PageBacking> backing);
  ~VmmMapper();

  Result<SlotBinding> alloc_reqid(RequestId request, RequestGeneration generation, uint32_t expected_tokens);
  Result<StepResult> step(const std::vector<StepRequest>& requests, MappingPath path);
  // model.forward committed rows [0, valid_tokens): only inside the mapped frontier.
  Status append_rows(RequestId request, SlotGeneration generation, uint32_t valid_tokens);
  // A kernel may read rows [0, tokens) of this slot generation.
  Status check_readable(RequestId request, SlotGeneration generation, uint32_t tokens) const;
  // A published receipt still describes the mapper's state and is complete.
  Status verify_receipt(const MappedFrontierReceipt& receipt) const;
  Status free_reqid(RequestId request, SlotGeneration generation, ReleaseMode mode);
  Status shutdown();

  Result<PhysicalLocation> translate(RequestId request, SlotGeneration generation, uint32_t layer, KvTensorKind kind,
                                     uint32_t token, uint32_t head, uint32_t lane) const;

  MappingLedger ledger() const;
  Status validate() const;  // ledgers, both state machines, page tables, digest
  StateDigest digest() const;
  const MapperGeometry& geometry() const { return geometry_; }
  MapperPhase phase() const { return phase_; }
  const SlotRecord& slot(uint32_t index) const { return slots_.at(index); }
  const HandleRecord& handle(uint64_t index) const { return handles_.at(index); }
  uint64_t bundle_maps() const { return bundle_maps_; }      // page bundles mapped so far
  uint64_t bundle_unmaps() const { return bundle_unmaps_; }  // page bundles unmapped so far
  Epoch epoch() const { return epoch_; }
  std::byte* reservation_base() const { return backing_->reservation_base(); }

 private:
  VmmMapper(MapperGeometry geometry, std::unique_ptr<PageBacking> backing);
  Result<uint32_t> find_active(RequestId request, SlotGeneration generation) const;
  Status require_reserved() const;
  Status map_bundle(uint32_t slot, std::vector<PageHandleId> handles, std::vector<PageMapping>* out);
  Status unmap_highest_bundle(uint32_t slot);
  std::vector<PageHandleId> take_free_bundle();
  uint64_t free_bundle_count() const { return free_handles_.size() / geometry_.tensor_count(); }
  uint64_t retained_bundle_count() const;
  MappedFrontierReceipt make_receipt(uint32_t slot, MappingPath path) const;

  MapperGeometry geometry_;
  std::unique_ptr<PageBacking> backing_;
  MapperPhase phase_ = MapperPhase::unreserved;
  std::vector<SlotRecord> slots_;
  std::vector<HandleRecord> handles_;
  std::set<uint64_t> free_handles_;  // lowest first: a deterministic trace (0x06F)
  std::vector<bool> reused_retained_;  // per slot: this generation started on retained pages
  uint64_t bundle_maps_ = 0;
  uint64_t bundle_unmaps_ = 0;
  Epoch epoch_{0};
};

}  // namespace kvrt
