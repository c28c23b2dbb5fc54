#pragma once
// MapperService: the mapper owner as the node serves it. It holds the VmmMapper core over one memfd page pool, which
// worker session owns each bound request, applies one batch of wire operations in order (one outcome per operation),
// and frees a session's slots through the core's normal free_reqid when the session ends (worker death). No CAF here:
// actors/mapper_actor.cpp only decodes, calls apply(), and encodes.
//
// Workers see the pages through their own contiguous views of the same memfd
// (services/mapper/page_pool_channel.hpp). The node's socket sends the fd
// with an empty page table and a worker maps the pages its receipts announce
// (MapperPoolView); page_offer() is the full table of every slot mapped now,
// for a view that must show all slots at once (an observer, a test).
#include <cstdint>
#include <memory>

#include "schema/mapper_types.hpp"
#include "schema/session_types.hpp"
#include "services/mapper/fault_point_backing.hpp"
#include "services/mapper/memfd_backing.hpp"
#include "services/mapper/page_pool_channel.hpp"
#include "services/mapper/prefetching_backing.hpp"
#include "services/mapper/vmm_mapper.hpp"
#include "services/session/session_holdings.hpp"

namespace kvrt {

class MapperService {
 public:
  // Reserves the virtual ranges and creates the page pool (0x06B init); the
  // core maps through a FaultPointBacking over the memfd (faults()). With
  // `map_ahead`, a PrefetchingBacking sits between them: after every batch
  // with a ready step, the pages the next decode step of the active slots
  // (one row further) would map are mapped by a background thread (0x06D),
  // so that step finds them in place. The core's decisions, receipts and
  // digest do not change.
  // Errors: those of MapperGeometry::make (a field the arithmetic cannot
  // honour) and of the backing (io when the OS refuses).
  static Result<std::unique_ptr<MapperService>> create(const MapperConfig& config, PoolGeneration generation,
                                                       bool map_ahead = false);

  MapperBatchReceipt apply(SessionId session, const MapperBatch& batch);
  // One op; with map-ahead, the plan for the next step follows at the end
  // of the batch (apply), not of each op.
  MapperOutcome apply_one(SessionId session, const MapperOp& op);
  // 0x0CD step 7 for a reuse whose rows land in the session's request slot:
  // the slot's published frontier [tokens] (VmmMapper::published_frontier).
  // Errors: not_owner (another session's request), unknown_request.
  Result<uint32_t> published_frontier(SessionId session, RequestId request) const;
  // Frees every slot the session still holds (retain mode: the pages stay as
  // reusable capacity, never as K/V, 0x06E). Returns how many were freed.
  uint32_t end_session(SessionId session);

  // The memfd, and the page table of every mapped slot (0x06C layout).
  int pool_fd() const { return backing_->pool_fd(); }
  PagePoolOffer page_offer() const;
  const MapperGeometry& geometry() const { return mapper_->geometry(); }

  // The OS-call fault points (FaultPointBacking::fault_point_names()), for
  // the node's fault_arm route.
  FaultPoints& faults() { return *faults_; }

  OwnerStats stats() const;
  Status validate() const { return mapper_->validate(); }
  const VmmMapper& core() const { return *mapper_; }

 private:
  MapperService(std::unique_ptr<FaultPoints> faults, std::unique_ptr<VmmMapper> mapper, MemfdBacking* backing,
                FaultPointBacking* calls, PrefetchingBacking* ahead, PoolGeneration generation)
      : faults_(std::move(faults)),
        mapper_(std::move(mapper)),
        backing_(backing),
        calls_(calls),
        ahead_(ahead),
        generation_(generation) {}
  MapperOutcome apply(SessionId s, const MapperAllocOp& op);
  MapperOutcome apply(SessionId s, const MapperStepOp& op);
  MapperOutcome apply(SessionId s, const MapperAppendOp& op);
  MapperOutcome apply(SessionId s, const MapperFreeOp& op);
  // After a batch with a ready step, with map-ahead: the next decode step's
  // pages, to the background thread.
  void plan_next_step();

  std::unique_ptr<FaultPoints> faults_;  // before mapper_: its backing reaches them until it goes
  std::unique_ptr<VmmMapper> mapper_;
  MemfdBacking* backing_;       // owned by mapper_
  FaultPointBacking* calls_;    // owned by mapper_
  PrefetchingBacking* ahead_;   // owned by mapper_; null without map-ahead
  uint64_t plans_refused_ = 0;  // plans the backing refused (none expected: the core made them)
  std::vector<StepRequest> planned_steps_;  // the ready steps' requests of the batch being applied, in order
  PoolGeneration generation_;
  SessionHoldings<uint64_t> requests_{"request"};       // RequestId value -> session
  std::map<uint64_t, SlotGeneration> slot_generation_;  // RequestId value -> its slot generation
  uint64_t operations_ = 0, errors_ = 0, insufficient_ = 0, sessions_reclaimed_ = 0;
};

}  // namespace kvrt
