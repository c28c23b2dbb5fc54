// Codec for the node protocol (issue 5), part 6: the executable-reuse
// transaction's ReuseBatch and ReuseBatchReceipt (0x0CD,
// services/reuse/reuse_ops.hpp): acquire and release ops, answered by an
// error, an executable-reuse receipt, a rejection receipt or a release
// receipt. Outcomes reuse the ExecutableReuseReceipt and TypedError codecs
// (codec_parts.hpp). As in codec_node_prefix.cpp, each op and outcome is read
// under its own context ("ReuseBatchReceipt.outcomes[2].rejection_receipt.reason",
// "ReuseBatchReceipt.outcomes[3].release_receipt.refused") and an unknown union discriminant or
// enum value is unknown_enum naming the element.
#include <variant>

#include "schema/codec_node.hpp"
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {
namespace {

using detail::read_element;
using detail::read_enum;
using detail::ReadContext;
using detail::text;
using detail::to_string;

// ReuseAcquireOp.logits_path travels as reuse.capnp's LogitsPath
// (codec_reuse.cpp checks every enumerant); re-checked here because this
// file relies on it too.
static_assert(uint16_t(wire::LogitsPath::NO_LOGITS) == uint8_t(LogitsPath::no_logits));
static_assert(kLogitsPathMax == uint8_t(LogitsPath::no_logits));

// Wire enum ordinals must equal the C++ values (both travel as numbers).
// ReuseStep counts from 1: wire ordinal 0 (UNSPECIFIED) is no step and is
// refused on read like a value past the last one.
constexpr uint8_t kReuseStepMax = uint8_t(ReuseStep::finish);
static_assert(kReuseStepMax == kReuseStepCount, "a ReuseStep was added: update node.capnp ReuseStep");
static_assert(uint16_t(wire::ReuseStep::UNSPECIFIED) == 0);
static_assert(uint16_t(wire::ReuseStep::AUTHORIZE) == uint8_t(ReuseStep::authorize));
static_assert(uint16_t(wire::ReuseStep::BUILD_KEY) == uint8_t(ReuseStep::build_key));
static_assert(uint16_t(wire::ReuseStep::LOOKUP_CANDIDATE) == uint8_t(ReuseStep::lookup_candidate));
static_assert(uint16_t(wire::ReuseStep::ACQUIRE_LEASES) == uint8_t(ReuseStep::acquire_leases));
static_assert(uint16_t(wire::ReuseStep::VALIDATE_VERSIONS) == uint8_t(ReuseStep::validate_versions));
static_assert(uint16_t(wire::ReuseStep::VALIDATE_POSITIONS) == uint8_t(ReuseStep::validate_positions));
static_assert(uint16_t(wire::ReuseStep::AWAIT_MAPPING) == uint8_t(ReuseStep::await_mapping));
static_assert(uint16_t(wire::ReuseStep::FREEZE_SNAPSHOT) == uint8_t(ReuseStep::freeze_snapshot));
static_assert(uint16_t(wire::ReuseStep::EXECUTE) == uint8_t(ReuseStep::execute));
static_assert(uint16_t(wire::ReuseStep::FINISH) == uint8_t(ReuseStep::finish));

constexpr uint8_t kRejectionReasonMax = uint8_t(RejectionReason::execution_failed);
static_assert(kRejectionReasonMax + 1 == kRejectionReasonCount,
              "a RejectionReason was added: update node.capnp RejectionReason");
#define KVRT_SAME_REASON(WIRE, CXX) \
  static_assert(uint16_t(wire::RejectionReason::WIRE) == uint8_t(RejectionReason::CXX))
KVRT_SAME_REASON(UNAUTHENTICATED, unauthenticated);
KVRT_SAME_REASON(PRINCIPAL_REVOKED, principal_revoked);
KVRT_SAME_REASON(NAMESPACE_DENIED, namespace_denied);
KVRT_SAME_REASON(NAMESPACE_CLOSED, namespace_closed);
KVRT_SAME_REASON(STALE_NAMESPACE_GENERATION, stale_namespace_generation);
KVRT_SAME_REASON(CROSS_NAMESPACE_KEY, cross_namespace_key);
KVRT_SAME_REASON(NO_CANDIDATE, no_candidate);
KVRT_SAME_REASON(SEMANTIC_MISMATCH, semantic_mismatch);
KVRT_SAME_REASON(LAYOUT_MISMATCH, layout_mismatch);
KVRT_SAME_REASON(ISOLATION_MISMATCH, isolation_mismatch);
KVRT_SAME_REASON(COLLISION_WITNESS_MISSING, collision_witness_missing);
KVRT_SAME_REASON(COLLISION_WITNESS_MISMATCH, collision_witness_mismatch);
KVRT_SAME_REASON(MODULE_POSITION_MISMATCH, module_position_mismatch);
KVRT_SAME_REASON(SESSION_INTERVAL_MISMATCH, session_interval_mismatch);
KVRT_SAME_REASON(STALE_CANDIDATE_GENERATION, stale_candidate_generation);
KVRT_SAME_REASON(STALE_INDEX_VERSION, stale_index_version);
KVRT_SAME_REASON(STALE_TREE_VERSION, stale_tree_version);
KVRT_SAME_REASON(STALE_POOL_GENERATION, stale_pool_generation);
KVRT_SAME_REASON(FRONTIER_NOT_VALID, frontier_not_valid);
KVRT_SAME_REASON(LEASE_UNAVAILABLE, lease_unavailable);
KVRT_SAME_REASON(LEASE_INCOMPLETE, lease_incomplete);
KVRT_SAME_REASON(MAPPING_FRONTIER_LAG, mapping_frontier_lag);
KVRT_SAME_REASON(STALE_SNAPSHOT_VERSION, stale_snapshot_version);
KVRT_SAME_REASON(SNAPSHOT_EVIDENCE_DRIFT, snapshot_evidence_drift);
KVRT_SAME_REASON(EXECUTION_FAILED, execution_failed);
#undef KVRT_SAME_REASON

// A field added to a core type must be added to node.capnp and to both
// directions below; these counts make the build say so.
static_assert(detail::field_count<ReuseAcquireOp>() == 6, "update node.capnp ReuseAcquireOp and this codec");
static_assert(detail::field_count<ReuseRejectionReceipt>() == 4, "update node.capnp ReuseRejectionReceipt");
static_assert(detail::field_count<ReuseSuccessor>() == 3, "update node.capnp ReuseSuccessor and this codec");
static_assert(detail::field_count<ReuseReleaseOp>() == 3, "update node.capnp ReuseReleaseOp and this codec");
static_assert(detail::field_count<ReuseReleaseReceipt>() == 7, "update node.capnp ReuseReleaseReceipt and this codec");
static_assert(detail::field_count<ReuseBatch>() == 2, "update node.capnp ReuseBatch and this codec");
static_assert(detail::field_count<ReuseBatchReceipt>() == 2, "update node.capnp ReuseBatchReceipt and this codec");
static_assert(std::variant_size_v<ReuseOp> == 2, "update node.capnp ReuseOp and read_op");
static_assert(std::variant_size_v<ReuseOutcome> == 4, "update node.capnp ReuseOutcome and read_outcome");

void write(wire::ReuseAcquireOp::Builder b, const ReuseAcquireOp& v) {
  b.setNamespaceName(text(v.namespace_name));
  b.setRequest(v.request.value);
  b.setRequestGeneration(v.request_generation.value);
  detail::write_tokens(b.initTokens(detail::list_size(v.tokens.size())), v.tokens);
  b.setLogitsPath(static_cast<wire::LogitsPath>(v.logits_path));
  b.setRequireCollisionWitness(v.require_collision_witness);
}
Status read(ReadContext& ctx, wire::ReuseAcquireOp::Reader r, ReuseAcquireOp& out) {
  ctx.at("namespace_name");
  out.namespace_name = to_string(r.getNamespaceName());
  out.request = RequestId{r.getRequest()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  ctx.at("tokens");
  out.tokens = detail::read_tokens(r.getTokens());
  KVRT_TRY(read_enum(ctx, "logits_path", r.getLogitsPath(), kLogitsPathMax, out.logits_path));
  out.require_collision_witness = r.getRequireCollisionWitness();
  return Status::success();
}

// read_enum for ReuseStep, whose first value is 1.
Status read_step(ReadContext& ctx, wire::ReuseStep raw, ReuseStep& out) {
  const auto value = static_cast<uint16_t>(raw);
  if (value == 0 || value > kReuseStepMax)
    return make_error(ErrorCode::unknown_enum,
                      ctx.field_path("step") + ": value " + std::to_string(value) + " is not one of 1.." +
                          std::to_string(kReuseStepMax),
                      ctx.field_path("step"));
  out = static_cast<ReuseStep>(value);
  return Status::success();
}

// LeaseId lists travel as List(UInt64), every bit kept (bit 63 marks a radix
// path lease).
void write_leases(capnp::List<uint64_t>::Builder b, const std::vector<LeaseId>& v) {
  for (unsigned i = 0; i < b.size(); ++i) b.set(i, v[i].value);
}
std::vector<LeaseId> read_leases(capnp::List<uint64_t>::Reader r) {
  std::vector<LeaseId> out;
  out.reserve(r.size());
  for (uint64_t lease : r) out.push_back(LeaseId{lease});
  return out;
}

void write(wire::ReuseRejectionReceipt::Builder b, const ReuseRejectionReceipt& v) {
  b.setStep(static_cast<wire::ReuseStep>(v.step));
  b.setReason(static_cast<wire::RejectionReason>(v.reason));
  b.setDetail(text(v.detail));
  write_leases(b.initLeasesReleased(detail::list_size(v.leases_released.size())), v.leases_released);
}
Status read(ReadContext& ctx, wire::ReuseRejectionReceipt::Reader r, ReuseRejectionReceipt& out) {
  KVRT_TRY(read_step(ctx, r.getStep(), out.step));
  KVRT_TRY(read_enum(ctx, "reason", r.getReason(), kRejectionReasonMax, out.reason));
  ctx.at("detail");
  out.detail = to_string(r.getDetail());
  ctx.at("leases_released");
  out.leases_released = read_leases(r.getLeasesReleased());
  return Status::success();
}

void write(wire::ReuseReleaseOp::Builder b, const ReuseReleaseOp& v) {
  b.setSnapshot(v.snapshot.value);
  b.setExecuted(v.executed);
  if (v.successor) {
    auto s = b.initSuccessor();
    s.setRequest(v.successor->request.value);
    detail::write_tokens(s.initTokens(detail::list_size(v.successor->tokens.size())), v.successor->tokens);
    s.setEndBlock(v.successor->end_block);
  }
}
Status read(ReadContext& ctx, wire::ReuseReleaseOp::Reader r, ReuseReleaseOp& out) {
  out.snapshot = ExecutionSnapshotVersion{r.getSnapshot()};
  out.executed = r.getExecuted();
  if (r.hasSuccessor()) {
    ctx.at("successor");
    auto s = r.getSuccessor();
    ReuseSuccessor successor;
    successor.request = RequestId{s.getRequest()};
    ctx.at("successor.tokens");
    successor.tokens = detail::read_tokens(s.getTokens());
    successor.end_block = s.getEndBlock();
    out.successor = std::move(successor);
  }
  return Status::success();
}

void write(wire::ReuseReleaseReceipt::Builder b, const ReuseReleaseReceipt& v) {
  b.setSnapshot(v.snapshot.value);
  write_leases(b.initReleased(detail::list_size(v.released.size())), v.released);
  write_leases(b.initRefused(detail::list_size(v.refused.size())), v.refused);
  b.setCompleted(v.completed);
  if (v.successor) detail::write(b.initSuccessor(), *v.successor);
  if (v.successor_refused) detail::write(b.initSuccessorRefused(), *v.successor_refused);
  b.setPublishedSuccessor(v.published_successor);
}
Status read(ReadContext& ctx, wire::ReuseReleaseReceipt::Reader r, ReuseReleaseReceipt& out) {
  out.snapshot = ExecutionSnapshotVersion{r.getSnapshot()};
  out.completed = r.getCompleted();
  ctx.at("released");
  out.released = read_leases(r.getReleased());
  ctx.at("refused");
  out.refused = read_leases(r.getRefused());
  if (r.hasSuccessor()) {
    ctx.at("successor");
    PrefixPublishReceipt p;
    KVRT_TRY(detail::read(ctx, r.getSuccessor(), p));
    out.successor = p;
  }
  if (r.hasSuccessorRefused()) {
    ctx.at("successor_refused");
    Error e;
    KVRT_TRY(detail::read(ctx, r.getSuccessorRefused(), e));
    out.successor_refused = std::move(e);
  }
  out.published_successor = r.getPublishedSuccessor();
  return Status::success();
}

// One overload per alternative: std::visit over a variant with an alternative
// missing here does not compile.
void put(wire::ReuseOp::Builder b, const ReuseAcquireOp& v) { write(b.initAcquire(), v); }
void put(wire::ReuseOp::Builder b, const ReuseReleaseOp& v) { write(b.initRelease(), v); }
void put(wire::ReuseOutcome::Builder b, const Error& v) { detail::write(b.initError(), v); }
void put(wire::ReuseOutcome::Builder b, const ExecutableReuseReceipt& v) {
  detail::write(b.initExecutableReuseReceipt(), v);
}
void put(wire::ReuseOutcome::Builder b, const ReuseRejectionReceipt& v) { write(b.initRejectionReceipt(), v); }
void put(wire::ReuseOutcome::Builder b, const ReuseReleaseReceipt& v) { write(b.initReleaseReceipt(), v); }

// Reads element `index` of `list` as alternative T through union member
// `member`, constructing it in place in the variant.
template <class T, class Variant, class Get>
Status read_as(const ReadContext& parent, const char* list, uint32_t index, const char* member, Variant& out, Get get) {
  return read_element(parent, list, index, member,
                      [&](ReadContext& ctx) { return read(ctx, get(), out.template emplace<T>()); });
}

Status read_op(const ReadContext& batch, uint32_t i, wire::ReuseOp::Reader r, ReuseOp& out) {
  switch (r.which()) {
    case wire::ReuseOp::ACQUIRE:
      return read_as<ReuseAcquireOp>(batch, "ops", i, "acquire", out, [&] { return r.getAcquire(); });
    case wire::ReuseOp::RELEASE:
      return read_as<ReuseReleaseOp>(batch, "ops", i, "release", out, [&] { return r.getRelease(); });
  }
  const ReadContext element(batch, "ops", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown operation kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

Status read_outcome(const ReadContext& receipt, uint32_t i, wire::ReuseOutcome::Reader r, ReuseOutcome& out) {
  switch (r.which()) {
    case wire::ReuseOutcome::ERROR:
      return read_as<Error>(receipt, "outcomes", i, "error", out, [&] { return r.getError(); });
    case wire::ReuseOutcome::EXECUTABLE_REUSE_RECEIPT:
      return read_as<ExecutableReuseReceipt>(receipt, "outcomes", i, "executable_reuse_receipt", out,
                                             [&] { return r.getExecutableReuseReceipt(); });
    case wire::ReuseOutcome::REJECTION_RECEIPT:
      return read_as<ReuseRejectionReceipt>(receipt, "outcomes", i, "rejection_receipt", out,
                                            [&] { return r.getRejectionReceipt(); });
    case wire::ReuseOutcome::RELEASE_RECEIPT:
      return read_as<ReuseReleaseReceipt>(receipt, "outcomes", i, "release_receipt", out,
                                          [&] { return r.getReleaseReceipt(); });
  }
  const ReadContext element(receipt, "outcomes", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown outcome kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

void write(wire::ReuseBatch::Builder b, const ReuseBatch& v) {
  detail::write_op_batch(b, v, [](auto element, const auto& op) { put(element, op); });
}
Status read(ReadContext& ctx, wire::ReuseBatch::Reader r, ReuseBatch& out) {
  return detail::read_op_batch(
      ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& op) { return read_op(c, i, element, op); });
}

void write(wire::ReuseBatchReceipt::Builder b, const ReuseBatchReceipt& v) {
  detail::write_outcome_receipt(b, v, [](auto element, const auto& outcome) { put(element, outcome); });
}
Status read(ReadContext& ctx, wire::ReuseBatchReceipt::Reader r, ReuseBatchReceipt& out) {
  return detail::read_outcome_receipt(ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& outcome) {
    return read_outcome(c, i, element, outcome);
  });
}

}  // namespace

std::vector<uint8_t> encode(const ReuseBatch& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initReuseBatch(), value); });
}
std::vector<uint8_t> encode(const ReuseBatchReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initReuseBatchReceipt(), value); });
}

template <>
Result<ReuseBatch> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ReuseBatch>(
      bytes, limits, wire::Envelope::REUSE_BATCH, "ReuseBatch",
      [](ReadContext& ctx, wire::Envelope::Reader e, ReuseBatch& out) { return read(ctx, e.getReuseBatch(), out); });
}
template <>
Result<ReuseBatchReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ReuseBatchReceipt>(bytes, limits, wire::Envelope::REUSE_BATCH_RECEIPT, "ReuseBatchReceipt",
                                                [](ReadContext& ctx, wire::Envelope::Reader e, ReuseBatchReceipt& out) {
                                                  return read(ctx, e.getReuseBatchReceipt(), out);
                                                });
}

}  // namespace kvrt::codec
