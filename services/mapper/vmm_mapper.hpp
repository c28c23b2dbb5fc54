#pragma once
// VmmMapper: the mapper owner's core (spec 0x06A-0x06F), CPU side.
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
// refusal inside step() (os_mapping_failed, map or unmap) undoes the whole
// step: every bundle it mapped goes back to the free handles with its old
// generation, every retained bundle it reclaimed is mapped back in place and
// every frontier it moved returns, so handles, ledger, digest and the next
// step's choices are those of a mapper that never saw the call. (Only when
// the OS also refuses to map a reclaimed bundle back does that bundle stay
// free, which the error says: a compensating successor, 0x04F.)
// MappingPath::asynchronous is recorded in the receipt. The background mapping
// thread of 0x06D is not part of this core: plan_frontier_mappings() tells a
// PrefetchingBacking (prefetching_backing.hpp) which (address, handle) pairs
// the next step() would map, and the backing performs them ahead of time. The
// core's decisions never read what was prefetched, so the receipts, ledgers
// and digest are those of the synchronous path; only timing changes.
// VmmMapper itself is single-threaded: every call comes from the owner thread.
//
// State digest (0x04F style, as the allocator keeps it): a MultisetDigest over
// one header entry, two entries per slot and one per handle, updated in O(what
// changed) by every transition; validate() recomputes it from scratch.
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
// Where a kernel's scalar lands physically (0x06C: (slot, tensor, q) -> handle + delta).
struct PhysicalLocation {
  KvScalarAddress address;
  PageHandleId handle;
  uint64_t pool_offset = 0;  // handle * G + delta [bytes into the pool]
};

struct HandleRecord {
  HandleState state = HandleState::created_free;
  RequestSlot slot;            // valid while mapped
  uint32_t tensor = 0;         // 2*layer + kind, valid while mapped
  uint32_t page = 0;           // q, valid while mapped
  BlockGeneration generation;  // +1 on every map: fences stale receipts
};

struct SlotRecord {
  bool active = false;
  RequestId request;
  RequestGeneration request_generation;
  SlotGeneration generation;
  uint32_t target_tokens = 0;                    // frontier of the latest step [tokens]
  uint32_t valid_tokens = 0;                     // rows this generation wrote [tokens]
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
  // Rows [0, f) of the request's active slot are mapped for every one of
  // its 2L tensors and published by a step (0x06D): min(pages mapped x
  // P_tokens, the latest step's target). Errors: unknown_request.
  Result<uint32_t> published_frontier(RequestId request) const;
  // A kernel may read rows [0, tokens) of this slot generation.
  Status check_readable(RequestId request, SlotGeneration generation, uint32_t tokens) const;
  // A published receipt still describes the mapper's state and is complete.
  Status verify_receipt(const MappedFrontierReceipt& receipt) const;
  Status free_reqid(RequestId request, SlotGeneration generation, ReleaseMode mode);
  Status shutdown();

  Result<PhysicalLocation> translate(RequestId request, SlotGeneration generation, uint32_t layer, KvTensorKind kind,
                                     uint32_t token, uint32_t head, uint32_t lane) const;

  // The OS-level mappings step(next) would perform, in order, if nothing else
  // changes first: for each request in order, each missing page q of its
  // frontier takes the 2L lowest free handles (exactly as step() does). Stops
  // at the first bundle that would need a reclaim: unmapping an inactive
  // slot's page ahead of time would change state the core still reports as
  // mapped. Requests step() would reject are skipped; never fails, changes
  // nothing. Offsets are bytes from the reservation / pool base.
  std::vector<PlannedMapping> plan_frontier_mappings(const std::vector<StepRequest>& next) const;

  MappingLedger ledger() const;
  Status validate() const;                                      // ledgers, both state machines, page tables, digest
  StateDigest state_digest() const { return digest_.value(); }  // O(1), maintained incrementally
  StateDigest recompute_digest() const;                         // O(slots + handles), from scratch
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
  // One change step() made, in order; undo_step() reverts them newest first.
  struct StepChange {
    enum class Kind : uint8_t { target, mapped, reclaimed } kind;
    uint32_t slot = 0;
    uint32_t old_target = 0;           // target: the frontier before [tokens]
    std::vector<PageHandleId> bundle;  // reclaimed: the victim's bundle, one handle per tensor
  };
  Error undo_step(std::vector<StepChange>& changes, Error cause);
  Status map_bundle(uint32_t slot, std::vector<PageHandleId> handles, std::vector<PageMapping>* out);
  Status unmap_highest_bundle(uint32_t slot);
  std::vector<PageHandleId> take_free_bundle();
  uint64_t free_bundle_count() const { return free_handles_.size() / geometry_.tensor_count(); }
  uint64_t retained_bundle_count() const;
  MappedFrontierReceipt make_receipt(uint32_t slot, MappingPath path, const MappingLedger& ledger) const;
  // Digest entries (state_digest.hpp): header (phase, map/unmap counts), the
  // slot's generation/frontier and its binding, one handle's state machine.
  MultisetDigest::Entry header_entry() const;
  MultisetDigest::Entry slot_frontier_entry(uint32_t slot) const;
  MultisetDigest::Entry slot_binding_entry(uint32_t slot) const;
  MultisetDigest::Entry handle_entry(uint64_t handle) const;
  // Call forget_* before mutating a record and record_* after: the digest then
  // moves by exactly the changed entries.
  void forget_header() { digest_.remove(header_entry()); }
  void record_header() { digest_.add(header_entry()); }
  void forget_slot(uint32_t s) {
    digest_.remove(slot_frontier_entry(s));
    digest_.remove(slot_binding_entry(s));
  }
  void record_slot(uint32_t s) {
    digest_.add(slot_frontier_entry(s));
    digest_.add(slot_binding_entry(s));
  }
  void forget_handle(uint64_t h) { digest_.remove(handle_entry(h)); }
  void record_handle(uint64_t h) { digest_.add(handle_entry(h)); }
  // One handle's transition, with its digest entry moved along.
  void set_handle(uint64_t h, const HandleRecord& record) {
    forget_handle(h);
    handles_[h] = record;
    record_handle(h);
  }

  MapperGeometry geometry_;
  std::unique_ptr<PageBacking> backing_;
  MapperPhase phase_ = MapperPhase::unreserved;
  std::vector<SlotRecord> slots_;
  std::vector<HandleRecord> handles_;
  std::set<uint64_t> free_handles_;    // lowest first: a deterministic trace (0x06F)
  std::vector<bool> reused_retained_;  // per slot: this generation started on retained pages
  uint64_t bundle_maps_ = 0;
  uint64_t bundle_unmaps_ = 0;
  Epoch epoch_{0};
  MultisetDigest digest_;                 // == recompute_digest() after every transition
  std::vector<StepChange> step_changes_;  // step()'s journal, kept to spare a decode step an allocation
};

// The decode prediction of 0x06D: each request of the step just published
// adds at most one token in the next iteration (capped at T_max [tokens]).
std::vector<StepRequest> next_decode_step(const std::vector<StepRequest>& published, uint32_t max_tokens);

}  // namespace kvrt
