// Codec for the node protocol (issue 5), part 2: the allocator owner's
// AllocatorBatch and AllocatorBatchReceipt. Outcome receipts reuse the
// AllocationReceipt / ReleaseResult / TypedError codecs (codec_parts.hpp).
//
// Every op and outcome is read under its own context, so a failure names the
// element and the union member: "AllocatorBatch.ops[3].append.rows". An
// unknown union discriminant (an op or outcome kind from a newer peer) is
// unknown_enum naming the element.
#include <variant>

#include "schema/codec_node.hpp"
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {
namespace {

using detail::read_all;
using detail::read_element;
using detail::read_enum;
using detail::ReadContext;

// ReleaseOp.reason travels as allocator.capnp's ReleaseReason (codec_allocator.cpp
// checks every enumerant); re-checked here because this file relies on it too.
static_assert(uint16_t(wire::ReleaseReason::PREEMPTED) == uint8_t(ReleaseReason::preempted));
static_assert(kReleaseReasonMax == uint8_t(ReleaseReason::preempted));

// A field added to a core type must be added to node.capnp and to both
// directions below; these counts make the build say so. An alternative added
// to a variant fails to compile in put() (encode) and trips the size check
// (decode).
static_assert(detail::field_count<AllocateOp>() == 3, "update node.capnp AllocateOp and this codec");
static_assert(detail::field_count<AppendOp>() == 3, "update node.capnp AppendOp and this codec");
static_assert(detail::field_count<CommitRowsOp>() == 2, "update node.capnp CommitRowsOp and this codec");
static_assert(detail::field_count<ForkOp>() == 1, "update node.capnp ForkOp and this codec");
static_assert(detail::field_count<TruncateOp>() == 3, "update node.capnp TruncateOp and this codec");
static_assert(detail::field_count<ReleaseOp>() == 2, "update node.capnp ReleaseOp and this codec");
static_assert(detail::field_count<TouchOp>() == 2, "update node.capnp TouchOp and this codec");
static_assert(detail::field_count<AcquireLeaseOp>() == 1, "update node.capnp AcquireLeaseOp and this codec");
static_assert(detail::field_count<ReleaseLeaseOp>() == 1, "update node.capnp ReleaseLeaseOp and this codec");
static_assert(detail::field_count<ReadTableOp>() == 1, "update node.capnp ReadTableOp and this codec");
static_assert(detail::field_count<LeaseReceipt>() == 3, "update node.capnp LeaseReceipt and this codec");
static_assert(detail::field_count<LeaseReleaseReceipt>() == 3, "update node.capnp LeaseReleaseReceipt and this codec");
static_assert(detail::field_count<BlockTableEntry>() == 3, "update node.capnp BlockTableEntry and this codec");
static_assert(detail::field_count<BlockTableView>() == 4, "update node.capnp BlockTableView and this codec");
static_assert(detail::field_count<AllocatorBatch>() == 2, "update node.capnp AllocatorBatch and this codec");
static_assert(detail::field_count<AllocatorBatchReceipt>() == 2, "update node.capnp AllocatorBatchReceipt");
static_assert(std::variant_size_v<AllocatorOp> == 10, "update node.capnp AllocatorOp and read_op");
static_assert(std::variant_size_v<AllocatorOutcome> == 6, "update node.capnp AllocatorOutcome and read_outcome");

// ---- optional epoch: a union group {none, epoch} ----------------------------

template <class GroupBuilder>
void write_epoch(GroupBuilder b, const std::optional<Epoch>& epoch) {
  if (epoch)
    b.setEpoch(epoch->value);
  else
    b.setNone();
}

template <class GroupReader>
Status read_epoch(const ReadContext& ctx, GroupReader r, std::optional<Epoch>& out) {
  if (r.isNone()) {
    out.reset();
  } else if (r.isEpoch()) {
    out = Epoch{r.getEpoch()};
  } else {
    return make_error(ErrorCode::unknown_enum,
                      ctx.field_path("expected_epoch") + ": union discriminant " +
                          std::to_string(static_cast<unsigned>(r.which())) + " is neither none (0) nor epoch (1)",
                      ctx.field_path("expected_epoch"));
  }
  return Status::success();
}

// ---- operations ---------------------------------------------------------------

void write(wire::AllocateOp::Builder b, const AllocateOp& v) {
  b.setPromptRows(v.prompt_rows);
  detail::write_handles(b.initPrefixHit(detail::list_size(v.prefix_hit.size())), v.prefix_hit);
  write_epoch(b.getExpectedEpoch(), v.expected_epoch);
}
Status read(ReadContext& ctx, wire::AllocateOp::Reader r, AllocateOp& out) {
  out.prompt_rows = r.getPromptRows();
  ctx.at("prefix_hit");
  out.prefix_hit = read_all(r.getPrefixHit());
  return read_epoch(ctx, r.getExpectedEpoch(), out.expected_epoch);
}

void write(wire::AppendOp::Builder b, const AppendOp& v) {
  detail::write(b.initFence(), v.fence);
  // The shared-memory path sends no rows: a null pointer reads as an empty
  // list and saves the hot path a list allocation per append.
  if (!v.rows.empty()) {
    auto rows = b.initRows(detail::list_size(v.rows.size()));
    for (unsigned i = 0; i < rows.size(); ++i) rows.set(i, capnp::Data::Reader(v.rows[i].data(), v.rows[i].size()));
  }
  write_epoch(b.getExpectedEpoch(), v.expected_epoch);
}
Status read(ReadContext& ctx, wire::AppendOp::Reader r, AppendOp& out) {
  ctx.at("fence");
  out.fence = detail::read(r.getFence());
  ctx.at("rows");
  auto rows = r.getRows();
  out.rows.reserve(rows.size());
  for (auto row : rows) out.rows.emplace_back(row.begin(), row.end());
  return read_epoch(ctx, r.getExpectedEpoch(), out.expected_epoch);
}

void write(wire::CommitRowsOp::Builder b, const CommitRowsOp& v) {
  detail::write(b.initFence(), v.fence);
  b.setValidThrough(v.valid_through);
}
Status read(ReadContext& ctx, wire::CommitRowsOp::Reader r, CommitRowsOp& out) {
  ctx.at("fence");
  out.fence = detail::read(r.getFence());
  out.valid_through = r.getValidThrough();
  return Status::success();
}

void write(wire::ForkOp::Builder b, const ForkOp& v) { detail::write(b.initParent(), v.parent); }
Status read(ReadContext& ctx, wire::ForkOp::Reader r, ForkOp& out) {
  ctx.at("parent");
  out.parent = detail::read(r.getParent());
  return Status::success();
}

void write(wire::TruncateOp::Builder b, const TruncateOp& v) {
  detail::write(b.initFence(), v.fence);
  b.setFromToken(v.from_token);
  b.setToToken(v.to_token);
}
Status read(ReadContext& ctx, wire::TruncateOp::Reader r, TruncateOp& out) {
  ctx.at("fence");
  out.fence = detail::read(r.getFence());
  out.from_token = r.getFromToken();
  out.to_token = r.getToToken();
  return Status::success();
}

void write(wire::ReleaseOp::Builder b, const ReleaseOp& v) {
  detail::write(b.initFence(), v.fence);
  b.setReason(static_cast<wire::ReleaseReason>(v.reason));
}
Status read(ReadContext& ctx, wire::ReleaseOp::Reader r, ReleaseOp& out) {
  ctx.at("fence");
  out.fence = detail::read(r.getFence());
  return read_enum(ctx, "reason", r.getReason(), kReleaseReasonMax, out.reason);
}

void write(wire::TouchOp::Builder b, const TouchOp& v) {
  detail::write(b.initFence(), v.fence);
  detail::write_handles(b.initBundles(detail::list_size(v.bundles.size())), v.bundles);
}
Status read(ReadContext& ctx, wire::TouchOp::Reader r, TouchOp& out) {
  ctx.at("fence");
  out.fence = detail::read(r.getFence());
  ctx.at("bundles");
  out.bundles = read_all(r.getBundles());
  return Status::success();
}

void write(wire::AcquireLeaseOp::Builder b, const AcquireLeaseOp& v) { detail::write(b.initHandle(), v.handle); }
Status read(ReadContext& ctx, wire::AcquireLeaseOp::Reader r, AcquireLeaseOp& out) {
  ctx.at("handle");
  out.handle = detail::read(r.getHandle());
  return Status::success();
}

void write(wire::ReleaseLeaseOp::Builder b, const ReleaseLeaseOp& v) { b.setLease(v.lease.value); }
Status read(ReadContext&, wire::ReleaseLeaseOp::Reader r, ReleaseLeaseOp& out) {
  out.lease = LeaseId{r.getLease()};
  return Status::success();
}

void write(wire::ReadTableOp::Builder b, const ReadTableOp& v) { b.setRequest(v.request.value); }
Status read(ReadContext&, wire::ReadTableOp::Reader r, ReadTableOp& out) {
  out.request = RequestId{r.getRequest()};
  return Status::success();
}

// ---- outcome receipts ---------------------------------------------------------

void write(wire::LeaseReceipt::Builder b, const LeaseReceipt& v) {
  b.setLease(v.lease.value);
  detail::write(b.initHandle(), v.handle);
  b.setRefsAfter(v.refs_after);
}
Status read(ReadContext& ctx, wire::LeaseReceipt::Reader r, LeaseReceipt& out) {
  out.lease = LeaseId{r.getLease()};
  ctx.at("handle");
  out.handle = detail::read(r.getHandle());
  out.refs_after = r.getRefsAfter();
  return Status::success();
}

void write(wire::LeaseReleaseReceipt::Builder b, const LeaseReleaseReceipt& v) {
  b.setLease(v.lease.value);
  detail::write(b.initHandle(), v.handle);
  b.setRefsAfter(v.refs_after);
}
Status read(ReadContext& ctx, wire::LeaseReleaseReceipt::Reader r, LeaseReleaseReceipt& out) {
  out.lease = LeaseId{r.getLease()};
  ctx.at("handle");
  out.handle = detail::read(r.getHandle());
  out.refs_after = r.getRefsAfter();
  return Status::success();
}

void write(wire::BlockTableView::Builder b, const BlockTableView& v) {
  detail::write(b.initFence(), v.fence);
  b.setContextTokens(v.context_tokens);
  b.setAllocatorEpoch(v.allocator_epoch.value);
  auto groups = b.initGroups(detail::list_size(v.groups.size()));
  for (unsigned g = 0; g < groups.size(); ++g) {
    const auto& table = v.groups[g];
    auto entries = groups.init(g, detail::list_size(table.size()));
    for (unsigned j = 0; j < entries.size(); ++j) {
      detail::write(entries[j].initHandle(), table[j].handle);
      entries[j].setValidRows(table[j].valid_rows);
      entries[j].setCacheKey(table[j].cache_key);
    }
  }
}
Status read(ReadContext& ctx, wire::BlockTableView::Reader r, BlockTableView& out) {
  ctx.at("fence");
  out.fence = detail::read(r.getFence());
  out.context_tokens = r.getContextTokens();
  out.allocator_epoch = Epoch{r.getAllocatorEpoch()};
  ctx.at("groups");
  auto groups = r.getGroups();
  out.groups.resize(groups.size());
  for (unsigned g = 0; g < groups.size(); ++g) {
    auto entries = groups[g];
    KVRT_TRY(detail::check_element_size(ctx, "groups", entries));
    auto& table = out.groups[g];
    table.reserve(entries.size());
    for (auto e : entries)
      table.push_back(BlockTableEntry{detail::read(e.getHandle()), e.getValidRows(), e.getCacheKey()});
  }
  return Status::success();
}

// ---- unions ------------------------------------------------------------------

// One overload per alternative: std::visit over a variant with an alternative
// missing here does not compile.
void put(wire::AllocatorOp::Builder b, const AllocateOp& v) { write(b.initAllocate(), v); }
void put(wire::AllocatorOp::Builder b, const AppendOp& v) { write(b.initAppend(), v); }
void put(wire::AllocatorOp::Builder b, const CommitRowsOp& v) { write(b.initCommitRows(), v); }
void put(wire::AllocatorOp::Builder b, const ForkOp& v) { write(b.initFork(), v); }
void put(wire::AllocatorOp::Builder b, const TruncateOp& v) { write(b.initTruncate(), v); }
void put(wire::AllocatorOp::Builder b, const ReleaseOp& v) { write(b.initRelease(), v); }
void put(wire::AllocatorOp::Builder b, const TouchOp& v) { write(b.initTouch(), v); }
void put(wire::AllocatorOp::Builder b, const AcquireLeaseOp& v) { write(b.initAcquireLease(), v); }
void put(wire::AllocatorOp::Builder b, const ReleaseLeaseOp& v) { write(b.initReleaseLease(), v); }
void put(wire::AllocatorOp::Builder b, const ReadTableOp& v) { write(b.initReadTable(), v); }

// Reads element `index` of `list` as alternative Op through union member
// `member`, constructing it in place in the variant. Every read() it may call
// is declared above (unqualified lookup happens at this definition).
template <class Op, class Variant, class Get>
Status read_as(const ReadContext& parent, const char* list, uint32_t index, const char* member, Variant& out, Get get) {
  return read_element(parent, list, index, member,
                      [&](ReadContext& ctx) { return read(ctx, get(), out.template emplace<Op>()); });
}

Status read_op(const ReadContext& batch, uint32_t i, wire::AllocatorOp::Reader r, AllocatorOp& out) {
  using W = wire::AllocatorOp;
  switch (r.which()) {
    case W::ALLOCATE:
      return read_as<AllocateOp>(batch, "ops", i, "allocate", out, [&] { return r.getAllocate(); });
    case W::APPEND:
      return read_as<AppendOp>(batch, "ops", i, "append", out, [&] { return r.getAppend(); });
    case W::COMMIT_ROWS:
      return read_as<CommitRowsOp>(batch, "ops", i, "commit_rows", out, [&] { return r.getCommitRows(); });
    case W::FORK:
      return read_as<ForkOp>(batch, "ops", i, "fork", out, [&] { return r.getFork(); });
    case W::TRUNCATE:
      return read_as<TruncateOp>(batch, "ops", i, "truncate", out, [&] { return r.getTruncate(); });
    case W::RELEASE:
      return read_as<ReleaseOp>(batch, "ops", i, "release", out, [&] { return r.getRelease(); });
    case W::TOUCH:
      return read_as<TouchOp>(batch, "ops", i, "touch", out, [&] { return r.getTouch(); });
    case W::ACQUIRE_LEASE:
      return read_as<AcquireLeaseOp>(batch, "ops", i, "acquire_lease", out, [&] { return r.getAcquireLease(); });
    case W::RELEASE_LEASE:
      return read_as<ReleaseLeaseOp>(batch, "ops", i, "release_lease", out, [&] { return r.getReleaseLease(); });
    case W::READ_TABLE:
      return read_as<ReadTableOp>(batch, "ops", i, "read_table", out, [&] { return r.getReadTable(); });
  }
  const ReadContext element(batch, "ops", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown operation kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

void put(wire::AllocatorOutcome::Builder b, const Error& v) { detail::write(b.initError(), v); }
void put(wire::AllocatorOutcome::Builder b, const AllocationReceipt& v) { detail::write(b.initAllocationReceipt(), v); }
void put(wire::AllocatorOutcome::Builder b, const ReleaseResult& v) { detail::write(b.initReleaseResult(), v); }
void put(wire::AllocatorOutcome::Builder b, const LeaseReceipt& v) { write(b.initLeaseReceipt(), v); }
void put(wire::AllocatorOutcome::Builder b, const LeaseReleaseReceipt& v) { write(b.initLeaseReleaseReceipt(), v); }
void put(wire::AllocatorOutcome::Builder b, const BlockTableView& v) { write(b.initBlockTableView(), v); }

Status read_outcome(const ReadContext& receipt, uint32_t i, wire::AllocatorOutcome::Reader r, AllocatorOutcome& out) {
  using W = wire::AllocatorOutcome;
  const char* list = "outcomes";
  switch (r.which()) {
    case W::ERROR:
      return read_as<Error>(receipt, list, i, "error", out, [&] { return r.getError(); });
    case W::ALLOCATION_RECEIPT:
      return read_as<AllocationReceipt>(receipt, list, i, "allocation_receipt", out,
                                        [&] { return r.getAllocationReceipt(); });
    case W::RELEASE_RESULT:
      return read_as<ReleaseResult>(receipt, list, i, "release_result", out, [&] { return r.getReleaseResult(); });
    case W::LEASE_RECEIPT:
      return read_as<LeaseReceipt>(receipt, list, i, "lease_receipt", out, [&] { return r.getLeaseReceipt(); });
    case W::LEASE_RELEASE_RECEIPT:
      return read_as<LeaseReleaseReceipt>(receipt, list, i, "lease_release_receipt", out,
                                          [&] { return r.getLeaseReleaseReceipt(); });
    case W::BLOCK_TABLE_VIEW:
      return read_as<BlockTableView>(receipt, list, i, "block_table_view", out, [&] { return r.getBlockTableView(); });
  }
  const ReadContext element(receipt, list, i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown outcome kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

// ---- batches ------------------------------------------------------------------

void write(wire::AllocatorBatch::Builder b, const AllocatorBatch& v) {
  detail::write_op_batch(b, v, [](auto element, const auto& op) { put(element, op); });
}
Status read(ReadContext& ctx, wire::AllocatorBatch::Reader r, AllocatorBatch& out) {
  return detail::read_op_batch(
      ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& op) { return read_op(c, i, element, op); });
}

void write(wire::AllocatorBatchReceipt::Builder b, const AllocatorBatchReceipt& v) {
  detail::write_outcome_receipt(b, v, [](auto element, const auto& outcome) { put(element, outcome); });
}
Status read(ReadContext& ctx, wire::AllocatorBatchReceipt::Reader r, AllocatorBatchReceipt& out) {
  return detail::read_outcome_receipt(ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& outcome) {
    return read_outcome(c, i, element, outcome);
  });
}

}  // namespace

std::vector<uint8_t> encode(const AllocatorBatch& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initAllocatorBatch(), value); });
}
std::vector<uint8_t> encode(const AllocatorBatchReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initAllocatorBatchReceipt(), value); });
}

template <>
Result<AllocatorBatch> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<AllocatorBatch>(bytes, limits, wire::Envelope::ALLOCATOR_BATCH, "AllocatorBatch",
                                             [](ReadContext& ctx, wire::Envelope::Reader e, AllocatorBatch& out) {
                                               return read(ctx, e.getAllocatorBatch(), out);
                                             });
}
template <>
Result<AllocatorBatchReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<AllocatorBatchReceipt>(
      bytes, limits, wire::Envelope::ALLOCATOR_BATCH_RECEIPT, "AllocatorBatchReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, AllocatorBatchReceipt& out) {
        return read(ctx, e.getAllocatorBatchReceipt(), out);
      });
}

}  // namespace kvrt::codec
