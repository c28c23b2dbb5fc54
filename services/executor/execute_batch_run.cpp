#include "services/executor/execute_batch_run.hpp"

#include <string>

namespace kvrt {

ExecuteBatchRun::ExecuteBatchRun(ExecutorService& service, ExecuteBatch batch)
    : service_(service), batch_(std::move(batch)) {
  receipt_.trace = batch_.trace;
  receipt_.outcomes.reserve(batch_.ops.size());
}

std::optional<TableRead> ExecuteBatchRun::next() const {
  const size_t i = receipt_.outcomes.size();
  if (i == batch_.ops.size()) return std::nullopt;
  return TableRead{batch_.ops[i].request};
}

void ExecuteBatchRun::answer(std::optional<BlockTableView> table) {
  const DecodeAttentionOp& op = batch_.ops[receipt_.outcomes.size()];
  if (!table) {
    receipt_.outcomes.push_back(make_error(
        ErrorCode::unknown_request,
        "request " + std::to_string(op.request.value) + " has no block table this session may read", "request"));
    return;
  }
  Result<AttentionOutput> out = service_.decode(op, *table);
  receipt_.outcomes.push_back(out.ok() ? ExecuteOutcome(std::move(*out)) : ExecuteOutcome(out.error()));
}

void ExecuteBatchRun::failed(const Error& e) { receipt_.outcomes.push_back(e); }

}  // namespace kvrt
