#pragma once
// PrefixBatchRun: one PrefixBatch on the node, as a sans-IO protocol between
// an index owner and the allocator owner. Both index owners answer the
// prefix route with it: the hash chain (PrefixService) and the radix index
// (RadixBlockService). A lookup (a match or a side-effect-free
// peek) and a scheduler handoff or its disposition are answered at once; a publication is three
// phases across the two owners:
//
//   phase     request to the allocator        answer
//   table     TableRead (under the session)   the request's BlockTableView, or none
//   decide    (the index, no request)          a DecidedPublication / RadixPublication
//   allocate  TagApply (hash chain) or        one flag per tag / one lease per block
//             NodeLeaseAcquire (radix)
//   confirm   (the index) and NodeLeaseRelease of what confirm hands back
//
// so the index never names an identity the allocator does not hold: a tag
// the allocator refused is withdrawn, an adoption whose leases were refused
// is undone. The ops stay in order, one outcome each; one receipt per batch.
//
// The caller (the index owner's actor, or a test) asks next() for the
// request to send, answers it, and repeats until next() answers nothing;
// then take_receipt(). NodeLeaseRelease needs no answer.
//
// Fault points (the index's faults(), armed by a node run with [node]
// fault_injection): "after_table_read" ends the publication before the index
// decides anything (0x04F: the predecessor digest); "after_decide" ends it
// after the index decided, withdrawing the decision exactly as a refused
// allocation does; "after_allocate", where the index can hand back what the
// allocator granted (Index::kAllocationWithdrawable: the radix tree's node
// leases, not the hash chain's tags, which the allocator keeps), ends it
// after the allocator answered. The op then answers fault_injected.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "schema/prefix_types.hpp"
#include "services/allocator/allocator_requests.hpp"
#include "services/common/assert.hpp"
#include "services/common/result.hpp"

namespace kvrt {

template <class Index>
class PrefixBatchRun {
 public:
  using Request = std::variant<TableRead, TagApply, NodeLeaseAcquire, NodeLeaseRelease>;
  using Publication = typename decltype(std::declval<Index&>().decide_publication(
      SessionId{}, std::declval<const PrefixPublishOp&>(), std::declval<const BlockTableView&>()))::value_type;

  PrefixBatchRun(Index& index, SessionId session, PrefixBatch batch)
      : index_(index), session_(session), batch_(std::move(batch)) {
    receipt_.trace = batch_.trace;
    receipt_.outcomes.reserve(batch_.ops.size());
  }

  // The names Index::faults() can arm, in the order a publication reaches them.
  static std::vector<std::string> fault_point_names() {
    std::vector<std::string> names{"after_table_read", "after_decide"};
    if constexpr (Index::kAllocationWithdrawable) names.push_back("after_allocate");
    return names;
  }

  // The next request for the allocator owner; nothing when every op is
  // answered. Lookups and refused publications are answered on the way.
  std::optional<Request> next() {
    if (!release_.empty()) return Request(NodeLeaseRelease{std::exchange(release_, {})});
    if (pending_) return std::exchange(pending_, std::nullopt);
    KVRT_ASSERT(phase_ == Phase::next_op, "PrefixBatchRun::next() while an answer is outstanding");
    while (receipt_.outcomes.size() < batch_.ops.size()) {
      const PrefixOp& op = batch_.ops[receipt_.outcomes.size()];
      if (const auto* m = std::get_if<PrefixMatchOp>(&op)) {
        Result<PrefixMatchReceipt> r = index_.match(session_, *m);
        receipt_.outcomes.push_back(r.ok() ? PrefixOutcome(std::move(*r)) : PrefixOutcome(r.error()));
        continue;
      }
      if (const auto* p = std::get_if<PrefixPeekOp>(&op)) {
        Result<PrefixMatchReceipt> r = index_.peek(session_, p->match);
        receipt_.outcomes.push_back(r.ok() ? PrefixOutcome(std::move(*r)) : PrefixOutcome(r.error()));
        continue;
      }
      if (const auto* h = std::get_if<PrefixHandoffOp>(&op)) {
        Result<RadixSchedulerHandoffReceipt> r = index_.handoff(session_, *h);
        receipt_.outcomes.push_back(r.ok() ? PrefixOutcome(std::move(*r)) : PrefixOutcome(r.error()));
        continue;
      }
      if (const auto* d = std::get_if<PrefixHandoffDispositionOp>(&op)) {
        Result<HandoffDispositionReceipt> r = index_.dispose_handoff(session_, *d);
        receipt_.outcomes.push_back(r.ok() ? PrefixOutcome(std::move(*r)) : PrefixOutcome(r.error()));
        continue;
      }
      const auto& pub = std::get<PrefixPublishOp>(op);
      if (Status st = index_.check_publication(session_, pub); !st.ok()) {
        receipt_.outcomes.push_back(st.error());
        continue;
      }
      phase_ = Phase::table;
      return Request(TableRead{pub.request});
    }
    return std::nullopt;
  }

  // Phase table: the view, or none (the session holds no such request).
  void answer(std::optional<BlockTableView> table) {
    KVRT_ASSERT(phase_ == Phase::table, "PrefixBatchRun got a table it did not ask for");
    const auto& op = std::get<PrefixPublishOp>(batch_.ops[receipt_.outcomes.size()]);
    if (!table) {
      end_op(make_error(ErrorCode::unknown_request,
                        "request " + std::to_string(op.request.value) + " has no block table this session may publish",
                        "request"));
      return;
    }
    if (fault_fires("after_table_read")) return end_op(fault_error("after_table_read", "nothing was decided"));
    Result<Publication> decided = index_.decide_publication(session_, op, *table);
    if (!decided.ok()) return end_op(decided.error());
    publication_.emplace(std::move(decided).value());
    if (fault_fires("after_decide")) return withdraw(fault_error("after_decide", "the decision was withdrawn"));
    if (std::optional request = allocator_request(*publication_)) {
      phase_ = Phase::allocate;
      pending_ = Request(std::move(*request));
      return;
    }
    confirm({});
  }

  // Phase allocate: the allocator's answer to TagApply or NodeLeaseAcquire.
  void answer(PublicationAnswer allocated) {
    KVRT_ASSERT(phase_ == Phase::allocate, "PrefixBatchRun got an allocation it did not ask for");
    if constexpr (Index::kAllocationWithdrawable) {
      if (fault_fires("after_allocate")) {
        // What the allocator granted goes back with the withdrawn decision.
        for (const std::optional<LeaseId>& l : allocated.leases)
          if (l) release_.push_back(*l);
        return withdraw(fault_error("after_allocate", "the allocation was handed back and the decision withdrawn"));
      }
    }
    confirm(allocated);
  }

  // The allocator did not answer the last request: the op ends with `e`,
  // and a decided publication is withdrawn (confirmed with nothing granted).
  void failed(const Error& e) {
    KVRT_ASSERT(phase_ != Phase::next_op, "PrefixBatchRun::failed() with no request outstanding");
    if (phase_ == Phase::allocate) return withdraw(e);
    end_op(e);
  }

  const TraceContext& trace() const { return batch_.trace; }
  PrefixBatchReceipt take_receipt() { return std::move(receipt_); }

 private:
  enum class Phase : uint8_t { next_op, table, allocate };

  // A decided publication confirmed with nothing granted: the index takes
  // back every entry it decided; the op ends with `e`.
  void withdraw(const Error& e) {
    std::vector<LeaseId> back = index_.confirm_publication(*publication_, PublicationAnswer{{}, {}, true});
    release_.insert(release_.end(), back.begin(), back.end());
    end_op(e);
  }
  bool fault_fires(std::string_view point) { return index_.faults().reached(point); }
  Error fault_error(std::string_view point, std::string_view what) const {
    return make_error(ErrorCode::fault_injected,
                      "fault point " + std::string(Index::kFaultOwner) + "." + std::string(point) +
                          " fired: the publication ended there and " + std::string(what),
                      "publish");
  }

  void confirm(const PublicationAnswer& allocated) {
    std::vector<LeaseId> back = index_.confirm_publication(*publication_, allocated);
    release_.insert(release_.end(), back.begin(), back.end());
    end_op(publication_->receipt);
  }
  void end_op(PrefixOutcome outcome) {
    receipt_.outcomes.push_back(std::move(outcome));
    publication_.reset();
    phase_ = Phase::next_op;
  }

  Index& index_;
  SessionId session_;
  PrefixBatch batch_;
  PrefixBatchReceipt receipt_;
  Phase phase_ = Phase::next_op;
  std::optional<Publication> publication_;  // decided, awaiting the allocator
  std::optional<Request> pending_;          // the request an answer produced, for next()
  std::vector<LeaseId> release_;            // node leases to hand back before anything else
};

}  // namespace kvrt
