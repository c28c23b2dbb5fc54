#include "services/executor/execute_batch_run.hpp"

#include <string>

namespace kvrt {

ExecuteBatchRun::ExecuteBatchRun(ExecutorService& service, ExecuteBatch batch)
    : service_(service), batch_(std::move(batch)) {
  receipt_.trace = batch_.trace;
  receipt_.outcomes.reserve(batch_.ops.size());
  settle_memberless();
}

void ExecuteBatchRun::settle_memberless() {
  // A shared op naming no request has no table to read: shared_decode
  // refuses it in its own slot, without a round trip.
  while (receipt_.outcomes.size() == batch_.ops.size() && receipt_.shared_outcomes.size() < batch_.shared.size() &&
         batch_.shared[receipt_.shared_outcomes.size()].members.empty()) {
    Result<SharedPrefixOutput> out = service_.shared_decode(batch_.shared[receipt_.shared_outcomes.size()], {});
    receipt_.shared_outcomes.push_back(out.ok() ? SharedPrefixOutcome(std::move(*out))
                                                : SharedPrefixOutcome(out.error()));
  }
}

std::optional<TableRead> ExecuteBatchRun::next() const {
  const size_t i = receipt_.outcomes.size();
  if (i < batch_.ops.size()) return TableRead{batch_.ops[i].request};
  const size_t k = receipt_.shared_outcomes.size();
  if (k == batch_.shared.size()) return std::nullopt;
  return TableRead{batch_.shared[k].members[member_tables_.size()].request};
}

void ExecuteBatchRun::answer(std::optional<BlockTableView> table) {
  take(std::move(table));
  settle_memberless();
}

void ExecuteBatchRun::take(std::optional<BlockTableView> table) {
  if (receipt_.outcomes.size() < batch_.ops.size()) {
    const DecodeAttentionOp& op = batch_.ops[receipt_.outcomes.size()];
    if (!table) {
      receipt_.outcomes.push_back(make_error(
          ErrorCode::unknown_request,
          "request " + std::to_string(op.request.value) + " has no block table this session may read", "request"));
      return;
    }
    Result<AttentionOutput> out = service_.decode(op, *table);
    receipt_.outcomes.push_back(out.ok() ? ExecuteOutcome(std::move(*out)) : ExecuteOutcome(out.error()));
    return;
  }
  const SharedPrefixDecodeOp& op = batch_.shared[receipt_.shared_outcomes.size()];
  if (!table) {
    const size_t m = member_tables_.size();
    member_tables_.clear();
    receipt_.shared_outcomes.push_back(make_error(
        ErrorCode::unknown_request,
        "request " + std::to_string(op.members[m].request.value) + " has no block table this session may read",
        "members[" + std::to_string(m) + "]"));
    return;
  }
  member_tables_.push_back(std::move(*table));
  if (member_tables_.size() < op.members.size()) return;
  Result<SharedPrefixOutput> out = service_.shared_decode(op, member_tables_);
  member_tables_.clear();
  receipt_.shared_outcomes.push_back(out.ok() ? SharedPrefixOutcome(std::move(*out))
                                              : SharedPrefixOutcome(out.error()));
}

void ExecuteBatchRun::failed(const Error& e) {
  if (receipt_.outcomes.size() < batch_.ops.size()) {
    receipt_.outcomes.push_back(e);
  } else {
    member_tables_.clear();
    receipt_.shared_outcomes.push_back(e);
  }
  settle_memberless();
}

}  // namespace kvrt
