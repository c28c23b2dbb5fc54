#pragma once
// ExecuteBatchRun: one ExecuteBatch on the node, as a sans-IO protocol with
// the allocator owner. Each op's table is read from the allocator under the
// calling session (another session's request answers "no table" there,
// before any kernel runs: 0x0BH, the executor reads only what a current
// receipt names), then ExecutorService::decode runs over the node's pools.
// Then each shared-prefix op: every member's table is read the same way,
// then ExecutorService::shared_decode runs. One outcome per op, in order.
//
// The caller (the executor's actor, or a test) asks next() for the table to
// read, answers it, and repeats until next() answers nothing; then
// take_receipt().
#include <optional>
#include <vector>

#include "schema/executor_types.hpp"
#include "services/allocator/allocator_requests.hpp"
#include "services/executor/executor_service.hpp"

namespace kvrt {

class ExecuteBatchRun {
 public:
  using Request = TableRead;

  ExecuteBatchRun(ExecutorService& service, ExecuteBatch batch);

  // The table of the next op; nothing once every op is answered.
  std::optional<TableRead> next() const;
  // The table next() asked for, or nullopt: the session holds no such request.
  void answer(std::optional<BlockTableView> table);
  // The allocator did not answer: the op ends with `e`.
  void failed(const Error& e);

  const TraceContext& trace() const { return batch_.trace; }
  ExecuteBatchReceipt take_receipt() { return std::move(receipt_); }

 private:
  void take(std::optional<BlockTableView> table);
  void settle_memberless();

  ExecutorService& service_;
  ExecuteBatch batch_;
  ExecuteBatchReceipt receipt_;
  std::vector<BlockTableView> member_tables_;  // of the shared op in progress, read so far
};

}  // namespace kvrt
