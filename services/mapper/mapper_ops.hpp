#pragma once
// The mapper owner's wire operations (issue 6 with issue 5): the VmmMapper
// calls a worker makes, batched like the allocator's (allocator_ops.hpp) so
// one scheduler iteration costs one message: bind a request to a slot, make
// every active frontier of the step mapped before use (0x06D), record the
// rows written, free the slot. Each operation is answered by one outcome at
// its index; one that fails answers a typed Error and changes nothing (0x04F).
#include <cstdint>
#include <variant>
#include <vector>

#include "services/common/error.hpp"
#include "services/mapper/vmm_mapper.hpp"
#include "services/common/trace_context.hpp"

namespace kvrt {

struct MapperAllocOp {
  RequestId request;
  RequestGeneration generation;
  uint32_t expected_tokens = 0;  // [tokens], <= T_max
  friend bool operator==(const MapperAllocOp&, const MapperAllocOp&) = default;
};

struct MapperStepOp {
  std::vector<StepRequest> requests;  // the step's active frontiers
  MappingPath path = MappingPath::synchronous;
  friend bool operator==(const MapperStepOp&, const MapperStepOp&) = default;
};

struct MapperAppendOp {
  RequestId request;
  SlotGeneration generation;
  uint32_t valid_tokens = 0;  // rows [0, valid_tokens) are written [tokens]
  friend bool operator==(const MapperAppendOp&, const MapperAppendOp&) = default;
};

struct MapperFreeOp {
  RequestId request;
  SlotGeneration generation;
  ReleaseMode mode = ReleaseMode::retain;
  friend bool operator==(const MapperFreeOp&, const MapperFreeOp&) = default;
};

using MapperOp = std::variant<MapperAllocOp, MapperStepOp, MapperAppendOp, MapperFreeOp>;

// Append and free answer only "done" (their effect shows in the next step's
// receipts and in the ledgers).
struct MapperDone {
  friend bool operator==(const MapperDone&, const MapperDone&) = default;
};

using MapperOutcome = std::variant<SlotBinding, StepResult, MapperDone, Error>;

struct MapperBatch {
  TraceContext trace;
  std::vector<MapperOp> ops;
  friend bool operator==(const MapperBatch&, const MapperBatch&) = default;
};

struct MapperBatchReceipt {
  TraceContext trace;
  std::vector<MapperOutcome> outcomes;
  friend bool operator==(const MapperBatchReceipt&, const MapperBatchReceipt&) = default;
};

}  // namespace kvrt
