// Codec for the allocator's transaction records (spec 0x04D, 0x05B-0x05F):
// AllocationTxn, AllocationReceipt and ReleaseResult.
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {
namespace {

using detail::read_all;
using detail::read_enum;
using detail::ReadContext;

// Wire enum ordinals must equal the C++ values (both travel as numbers).
static_assert(uint16_t(wire::AllocationOperation::ALLOCATE) == uint8_t(AllocationOperation::allocate));
static_assert(uint16_t(wire::AllocationOperation::APPEND) == uint8_t(AllocationOperation::append));
static_assert(uint16_t(wire::AllocationOperation::FORK) == uint8_t(AllocationOperation::fork));
static_assert(uint16_t(wire::AllocationOperation::COPY_ON_WRITE) == uint8_t(AllocationOperation::copy_on_write));
static_assert(uint16_t(wire::AllocationOperation::TRUNCATE) == uint8_t(AllocationOperation::truncate));
static_assert(uint16_t(wire::AllocationOperation::CANCEL) == uint8_t(AllocationOperation::cancel));
static_assert(uint16_t(wire::AllocationOperation::RELEASE) == uint8_t(AllocationOperation::release));
static_assert(uint16_t(wire::AllocationOperation::TOUCH) == uint8_t(AllocationOperation::touch));
static_assert(uint16_t(wire::AllocationOperation::EVICT) == uint8_t(AllocationOperation::evict));
static_assert(uint16_t(wire::AllocationOperation::PUBLISH_CACHE_KEY) ==
              uint8_t(AllocationOperation::publish_cache_key));
static_assert(uint16_t(wire::AllocationOperation::COMMIT_ROWS) == uint8_t(AllocationOperation::commit_rows));
static_assert(kAllocationOperationMax == uint8_t(AllocationOperation::commit_rows));
static_assert(uint16_t(wire::TransactionPhase::VALIDATED) == uint8_t(TransactionPhase::validated));
static_assert(uint16_t(wire::TransactionPhase::RESERVED) == uint8_t(TransactionPhase::reserved));
static_assert(uint16_t(wire::TransactionPhase::COPYING) == uint8_t(TransactionPhase::copying));
static_assert(uint16_t(wire::TransactionPhase::READY_TO_PUBLISH) == uint8_t(TransactionPhase::ready_to_publish));
static_assert(uint16_t(wire::TransactionPhase::PUBLISHED) == uint8_t(TransactionPhase::published));
static_assert(uint16_t(wire::TransactionPhase::ROLLED_BACK) == uint8_t(TransactionPhase::rolled_back));
static_assert(kTransactionPhaseMax == uint8_t(TransactionPhase::rolled_back));
static_assert(uint16_t(wire::AppendPath::NOT_APPEND) == uint8_t(AppendPath::not_append));
static_assert(uint16_t(wire::AppendPath::NEW_BUNDLE) == uint8_t(AppendPath::new_bundle));
static_assert(uint16_t(wire::AppendPath::PRIVATE_TAIL) == uint8_t(AppendPath::private_tail));
static_assert(uint16_t(wire::AppendPath::COPY_ON_WRITE) == uint8_t(AppendPath::copy_on_write));
static_assert(kAppendPathMax == uint8_t(AppendPath::copy_on_write));
static_assert(uint16_t(wire::AllocationOutcome::COMMITTED) == uint8_t(AllocationOutcome::committed));
static_assert(uint16_t(wire::AllocationOutcome::ROLLED_BACK) == uint8_t(AllocationOutcome::rolled_back));
static_assert(uint16_t(wire::AllocationOutcome::OUT_OF_CAPACITY) == uint8_t(AllocationOutcome::out_of_capacity));
static_assert(kAllocationOutcomeMax == uint8_t(AllocationOutcome::out_of_capacity));
static_assert(uint16_t(wire::ReleaseReason::FINISHED) == uint8_t(ReleaseReason::finished));
static_assert(uint16_t(wire::ReleaseReason::CANCELLED) == uint8_t(ReleaseReason::cancelled));
static_assert(uint16_t(wire::ReleaseReason::TRUNCATED) == uint8_t(ReleaseReason::truncated));
static_assert(uint16_t(wire::ReleaseReason::PREEMPTED) == uint8_t(ReleaseReason::preempted));
static_assert(kReleaseReasonMax == uint8_t(ReleaseReason::preempted));

// A field added to a core type must be added to the schema and to both
// directions below; these counts make the build say so.
static_assert(detail::field_count<PhysicalBlockHandle>() == 4, "update common.capnp PhysicalBlockHandle");
static_assert(detail::field_count<AllocationTxn>() == 11, "update allocator.capnp AllocationTxn and this codec");
static_assert(detail::field_count<RefcountDelta>() == 3, "update allocator.capnp RefcountDelta and this codec");
static_assert(detail::field_count<TableEntryUpdate>() == 3, "update allocator.capnp TableEntryUpdate and this codec");
static_assert(detail::field_count<AllocationReceipt>() == 19,
              "update allocator.capnp AllocationReceipt and this codec");
static_assert(detail::field_count<ReleaseResult>() == 13, "update allocator.capnp ReleaseResult and this codec");

template <class ListBuilder>
void write_deltas(ListBuilder list, const std::vector<RefcountDelta>& deltas) {
  for (unsigned i = 0; i < list.size(); ++i) {
    detail::write(list[i].initHandle(), deltas[i].handle);
    list[i].setRefsBefore(deltas[i].refs_before);
    list[i].setRefsAfter(deltas[i].refs_after);
  }
}

template <class ListReader>
std::vector<RefcountDelta> read_deltas(ReadContext& ctx, const char* field, ListReader list) {
  std::vector<RefcountDelta> out;
  out.reserve(list.size());
  for (auto d : list) {
    ctx.at(field);
    out.push_back(RefcountDelta{detail::read(d.getHandle()), d.getRefsBefore(), d.getRefsAfter()});
  }
  return out;
}

void write(wire::AllocationTxn::Builder b, const AllocationTxn& v) {
  b.setTransactionId(v.transaction_id.value);
  b.setExpectedAllocatorEpoch(v.expected_allocator_epoch.value);
  b.setRequestId(v.request_id.value);
  b.setExpectedRequestGeneration(v.expected_request_generation.value);
  b.setExpectedTableVersion(v.expected_table_version.value);
  b.setOperation(static_cast<wire::AllocationOperation>(v.operation));
  b.setForkChild(v.fork_child.value);
  b.setRequestedRows(v.requested_rows);
  detail::write_handles(b.initTouchedHandles(detail::list_size(v.touched_handles.size())), v.touched_handles);
  detail::write_handles(b.initReservedHandles(detail::list_size(v.reserved_handles.size())), v.reserved_handles);
  b.setPublicationState(static_cast<wire::TransactionPhase>(v.publication_state));
}

Status read(ReadContext& ctx, wire::AllocationTxn::Reader r, AllocationTxn& out) {
  out.transaction_id = TransactionId{r.getTransactionId()};
  out.expected_allocator_epoch = Epoch{r.getExpectedAllocatorEpoch()};
  out.request_id = RequestId{r.getRequestId()};
  out.expected_request_generation = RequestGeneration{r.getExpectedRequestGeneration()};
  out.expected_table_version = TableVersion{r.getExpectedTableVersion()};
  KVRT_TRY(read_enum(ctx, "operation", r.getOperation(), kAllocationOperationMax, out.operation));
  out.fork_child = RequestId{r.getForkChild()};
  out.requested_rows = r.getRequestedRows();
  ctx.at("touched_handles");
  out.touched_handles = read_all(r.getTouchedHandles());
  ctx.at("reserved_handles");
  out.reserved_handles = read_all(r.getReservedHandles());
  return read_enum(ctx, "publication_state", r.getPublicationState(), kTransactionPhaseMax, out.publication_state);
}

}  // namespace

// AllocationReceipt and ReleaseResult are also outcomes of the node protocol's
// AllocatorBatchReceipt (codec_parts.hpp).
namespace detail {

void write(wire::AllocationReceipt::Builder b, const AllocationReceipt& v) {
  b.setTransactionId(v.transaction_id.value);
  b.setOperation(static_cast<wire::AllocationOperation>(v.operation));
  b.setRequestId(v.request_id.value);
  b.setRequestGeneration(v.request_generation.value);
  b.setTableVersionAfter(v.table_version_after.value);
  b.setContextTokensAfter(v.context_tokens_after);
  detail::write(b.initPredecessorDigest(), v.predecessor_digest);
  detail::write(b.initSuccessorDigest(), v.successor_digest);
  b.setUsefulNewRows(v.useful_new_rows);
  b.setNewPhysicalBlocks(v.new_physical_blocks);
  b.setCopiedRows(v.copied_rows);
  b.setCopyPayloadBytes(v.copy_payload_bytes);
  write_deltas(b.initRefcountDeltas(detail::list_size(v.refcount_deltas.size())), v.refcount_deltas);
  auto entries = b.initPublishedEntries(detail::list_size(v.published_entries.size()));
  for (unsigned i = 0; i < entries.size(); ++i) {
    const auto& e = v.published_entries[i];
    entries[i].setLogicalBlock(e.logical_block);
    detail::write(entries[i].initHandle(), e.handle);
    entries[i].setValidRows(e.valid_rows);
  }
  detail::write_handles(b.initEvictedHandles(detail::list_size(v.evicted_handles.size())), v.evicted_handles);
  b.setAllocatorEpochAfter(v.allocator_epoch_after.value);
  b.setAppendPath(static_cast<wire::AppendPath>(v.append_path));
  b.setOutcome(static_cast<wire::AllocationOutcome>(v.outcome));
  b.setRollbackReason(detail::text(v.rollback_reason));
}

Status read(ReadContext& ctx, wire::AllocationReceipt::Reader r, AllocationReceipt& out) {
  out.transaction_id = TransactionId{r.getTransactionId()};
  KVRT_TRY(read_enum(ctx, "operation", r.getOperation(), kAllocationOperationMax, out.operation));
  out.request_id = RequestId{r.getRequestId()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  out.table_version_after = TableVersion{r.getTableVersionAfter()};
  out.context_tokens_after = r.getContextTokensAfter();
  ctx.at("predecessor_digest");
  out.predecessor_digest = detail::read(r.getPredecessorDigest());
  ctx.at("successor_digest");
  out.successor_digest = detail::read(r.getSuccessorDigest());
  out.useful_new_rows = r.getUsefulNewRows();
  out.new_physical_blocks = r.getNewPhysicalBlocks();
  out.copied_rows = r.getCopiedRows();
  out.copy_payload_bytes = r.getCopyPayloadBytes();
  ctx.at("refcount_deltas");
  out.refcount_deltas = read_deltas(ctx, "refcount_deltas", r.getRefcountDeltas());
  ctx.at("published_entries");
  auto entries = r.getPublishedEntries();
  out.published_entries.reserve(entries.size());
  for (auto e : entries) {
    ctx.at("published_entries.handle");
    out.published_entries.push_back(
        TableEntryUpdate{e.getLogicalBlock(), detail::read(e.getHandle()), e.getValidRows()});
  }
  ctx.at("evicted_handles");
  out.evicted_handles = read_all(r.getEvictedHandles());
  out.allocator_epoch_after = Epoch{r.getAllocatorEpochAfter()};
  KVRT_TRY(read_enum(ctx, "append_path", r.getAppendPath(), kAppendPathMax, out.append_path));
  KVRT_TRY(read_enum(ctx, "outcome", r.getOutcome(), kAllocationOutcomeMax, out.outcome));
  ctx.at("rollback_reason");
  out.rollback_reason = detail::to_string(r.getRollbackReason());
  return Status::success();
}

void write(wire::ReleaseResult::Builder b, const ReleaseResult& v) {
  b.setTransactionId(v.transaction_id.value);
  b.setRequestId(v.request_id.value);
  b.setRequestGeneration(v.request_generation.value);
  b.setReason(static_cast<wire::ReleaseReason>(v.reason));
  detail::write(b.initPredecessorDigest(), v.predecessor_digest);
  detail::write(b.initSuccessorDigest(), v.successor_digest);
  b.setContextTokensBefore(v.context_tokens_before);
  b.setContextTokensAfter(v.context_tokens_after);
  b.setTableVersionAfter(v.table_version_after.value);
  write_deltas(b.initRefcountDeltas(detail::list_size(v.refcount_deltas.size())), v.refcount_deltas);
  detail::write_handles(b.initFreedHandles(detail::list_size(v.freed_handles.size())), v.freed_handles);
  detail::write_handles(b.initEvictableHandles(detail::list_size(v.evictable_handles.size())), v.evictable_handles);
  b.setAllocatorEpochAfter(v.allocator_epoch_after.value);
}

Status read(ReadContext& ctx, wire::ReleaseResult::Reader r, ReleaseResult& out) {
  out.transaction_id = TransactionId{r.getTransactionId()};
  out.request_id = RequestId{r.getRequestId()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  KVRT_TRY(read_enum(ctx, "reason", r.getReason(), kReleaseReasonMax, out.reason));
  ctx.at("predecessor_digest");
  out.predecessor_digest = detail::read(r.getPredecessorDigest());
  ctx.at("successor_digest");
  out.successor_digest = detail::read(r.getSuccessorDigest());
  out.context_tokens_before = r.getContextTokensBefore();
  out.context_tokens_after = r.getContextTokensAfter();
  out.table_version_after = TableVersion{r.getTableVersionAfter()};
  ctx.at("refcount_deltas");
  out.refcount_deltas = read_deltas(ctx, "refcount_deltas", r.getRefcountDeltas());
  ctx.at("freed_handles");
  out.freed_handles = read_all(r.getFreedHandles());
  ctx.at("evictable_handles");
  out.evictable_handles = read_all(r.getEvictableHandles());
  out.allocator_epoch_after = Epoch{r.getAllocatorEpochAfter()};
  return Status::success();
}

}  // namespace detail

std::vector<uint8_t> encode(const AllocationTxn& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initAllocationTxn(), value); });
}
std::vector<uint8_t> encode(const AllocationReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { detail::write(e.initAllocationReceipt(), value); });
}
std::vector<uint8_t> encode(const ReleaseResult& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { detail::write(e.initReleaseResult(), value); });
}

template <>
Result<AllocationTxn> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<AllocationTxn>(bytes, limits, wire::Envelope::ALLOCATION_TXN, "AllocationTxn",
                                            [](ReadContext& ctx, wire::Envelope::Reader e, AllocationTxn& out) {
                                              return read(ctx, e.getAllocationTxn(), out);
                                            });
}
template <>
Result<AllocationReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<AllocationReceipt>(bytes, limits, wire::Envelope::ALLOCATION_RECEIPT, "AllocationReceipt",
                                                [](ReadContext& ctx, wire::Envelope::Reader e, AllocationReceipt& out) {
                                                  return detail::read(ctx, e.getAllocationReceipt(), out);
                                                });
}
template <>
Result<ReleaseResult> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ReleaseResult>(bytes, limits, wire::Envelope::RELEASE_RESULT, "ReleaseResult",
                                            [](ReadContext& ctx, wire::Envelope::Reader e, ReleaseResult& out) {
                                              return detail::read(ctx, e.getReleaseResult(), out);
                                            });
}

}  // namespace kvrt::codec
