// Codec for the node protocol, part 4: the mapper owner's MapperBatch and
// MapperBatchReceipt (issue 6 with issue 5). Step receipts reuse the
// MappedFrontierReceipt codec (codec_parts.hpp). Same error contract as the
// allocator batches: each element is read under its own context, so a
// failure names "MapperBatch.ops[2].step.requests", and an unknown union
// discriminant is unknown_enum naming the element.
#include <variant>

#include "schema/codec_node.hpp"
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {
namespace {

using detail::read_element;
using detail::read_enum;
using detail::ReadContext;

constexpr uint8_t kReleaseModeMax = uint8_t(ReleaseMode::unmap_now);
constexpr uint8_t kFeasibilityMax = uint8_t(MappingFeasibility::insufficient_handles);
static_assert(uint16_t(wire::ReleaseMode::RETAIN) == uint8_t(ReleaseMode::retain));
static_assert(uint16_t(wire::ReleaseMode::UNMAP_NOW) == uint8_t(ReleaseMode::unmap_now));
static_assert(uint16_t(wire::MappingFeasibility::READY) == uint8_t(MappingFeasibility::ready));
static_assert(uint16_t(wire::MappingFeasibility::INSUFFICIENT_HANDLES) ==
              uint8_t(MappingFeasibility::insufficient_handles));

static_assert(detail::field_count<StepRequest>() == 2, "update node.capnp StepRequest and this codec");
static_assert(detail::field_count<MapperAllocOp>() == 3, "update node.capnp MapperAllocOp and this codec");
static_assert(detail::field_count<MapperStepOp>() == 2, "update node.capnp MapperStepOp and this codec");
static_assert(detail::field_count<MapperAppendOp>() == 3, "update node.capnp MapperAppendOp and this codec");
static_assert(detail::field_count<MapperFreeOp>() == 3, "update node.capnp MapperFreeOp and this codec");
static_assert(detail::field_count<SlotBinding>() == 4, "update node.capnp SlotBinding and this codec");
static_assert(detail::field_count<StepResult>() == 4, "update node.capnp StepResult and this codec");
static_assert(detail::field_count<MapperBatch>() == 2, "update node.capnp MapperBatch and this codec");
static_assert(detail::field_count<MapperBatchReceipt>() == 2, "update node.capnp MapperBatchReceipt");
static_assert(std::variant_size_v<MapperOp> == 4, "update node.capnp MapperOp and read_op");
static_assert(std::variant_size_v<MapperOutcome> == 4, "update node.capnp MapperOutcome and read_outcome");

// ---- operations -------------------------------------------------------------

void put(wire::MapperOp::Builder b, const MapperAllocOp& v) {
  auto o = b.initAlloc();
  o.setRequest(v.request.value);
  o.setGeneration(v.generation.value);
  o.setExpectedTokens(v.expected_tokens);
}
void put(wire::MapperOp::Builder b, const MapperStepOp& v) {
  auto o = b.initStep();
  auto list = o.initRequests(detail::list_size(v.requests.size()));
  for (unsigned i = 0; i < v.requests.size(); ++i) {
    list[i].setRequest(v.requests[i].request.value);
    list[i].setTargetTokens(v.requests[i].target_tokens);
  }
  o.setPath(static_cast<wire::MappingPath>(v.path));
}
void put(wire::MapperOp::Builder b, const MapperAppendOp& v) {
  auto o = b.initAppend();
  o.setRequest(v.request.value);
  o.setGeneration(v.generation.value);
  o.setValidTokens(v.valid_tokens);
}
void put(wire::MapperOp::Builder b, const MapperFreeOp& v) {
  auto o = b.initFree();
  o.setRequest(v.request.value);
  o.setGeneration(v.generation.value);
  o.setMode(static_cast<wire::ReleaseMode>(v.mode));
}

Status read(ReadContext&, wire::MapperAllocOp::Reader r, MapperAllocOp& out) {
  out = MapperAllocOp{RequestId{r.getRequest()}, RequestGeneration{r.getGeneration()}, r.getExpectedTokens()};
  return Status::success();
}
Status read(ReadContext& ctx, wire::MapperStepOp::Reader r, MapperStepOp& out) {
  ctx.at("requests");
  for (auto q : r.getRequests()) out.requests.push_back(StepRequest{RequestId{q.getRequest()}, q.getTargetTokens()});
  return read_enum(ctx, "path", r.getPath(), kMappingPathMax, out.path);
}
Status read(ReadContext&, wire::MapperAppendOp::Reader r, MapperAppendOp& out) {
  out = MapperAppendOp{RequestId{r.getRequest()}, SlotGeneration{r.getGeneration()}, r.getValidTokens()};
  return Status::success();
}
Status read(ReadContext& ctx, wire::MapperFreeOp::Reader r, MapperFreeOp& out) {
  out.request = RequestId{r.getRequest()};
  out.generation = SlotGeneration{r.getGeneration()};
  return read_enum(ctx, "mode", r.getMode(), kReleaseModeMax, out.mode);
}

// ---- outcomes ---------------------------------------------------------------

void put(wire::MapperOutcome::Builder b, const Error& v) { detail::write(b.initError(), v); }
void put(wire::MapperOutcome::Builder b, const SlotBinding& v) {
  auto o = b.initSlotBinding();
  o.setSlot(v.slot.value);
  o.setGeneration(v.generation.value);
  o.setRetainedPages(v.retained_pages);
  o.setRetainedMappingReused(v.retained_mapping_reused);
}
void put(wire::MapperOutcome::Builder b, const StepResult& v) {
  auto o = b.initStepResult();
  o.setFeasibility(static_cast<wire::MappingFeasibility>(v.feasibility));
  o.setBundlesNeeded(v.bundles_needed);
  o.setBundlesAvailable(v.bundles_available);
  auto list = o.initReceipts(detail::list_size(v.receipts.size()));
  for (unsigned i = 0; i < v.receipts.size(); ++i) detail::write(list[i], v.receipts[i]);
}
void put(wire::MapperOutcome::Builder b, const MapperDone&) { b.setDone(); }

Status read(ReadContext&, wire::SlotBinding::Reader r, SlotBinding& out) {
  out = SlotBinding{RequestSlot{r.getSlot()}, SlotGeneration{r.getGeneration()}, r.getRetainedPages(),
                    r.getRetainedMappingReused()};
  return Status::success();
}
Status read(ReadContext& ctx, wire::StepResult::Reader r, StepResult& out) {
  KVRT_TRY(read_enum(ctx, "feasibility", r.getFeasibility(), kFeasibilityMax, out.feasibility));
  out.bundles_needed = r.getBundlesNeeded();
  out.bundles_available = r.getBundlesAvailable();
  auto list = r.getReceipts();
  out.receipts.resize(list.size());
  for (unsigned i = 0; i < list.size(); ++i)
    KVRT_TRY(read_element(ctx, "receipts", i, "receipt",
                          [&](ReadContext& c) { return detail::read(c, list[i], out.receipts[i]); }));
  return Status::success();
}

template <class Alternative, class Variant, class Get>
Status read_as(const ReadContext& parent, const char* list, uint32_t index, const char* member, Variant& out, Get get) {
  return read_element(parent, list, index, member,
                      [&](ReadContext& ctx) { return read(ctx, get(), out.template emplace<Alternative>()); });
}

Status read_op(const ReadContext& batch, uint32_t i, wire::MapperOp::Reader r, MapperOp& out) {
  using W = wire::MapperOp;
  switch (r.which()) {
    case W::ALLOC:
      return read_as<MapperAllocOp>(batch, "ops", i, "alloc", out, [&] { return r.getAlloc(); });
    case W::STEP:
      return read_as<MapperStepOp>(batch, "ops", i, "step", out, [&] { return r.getStep(); });
    case W::APPEND:
      return read_as<MapperAppendOp>(batch, "ops", i, "append", out, [&] { return r.getAppend(); });
    case W::FREE:
      return read_as<MapperFreeOp>(batch, "ops", i, "free", out, [&] { return r.getFree(); });
  }
  const ReadContext element(batch, "ops", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown operation kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

Status read_outcome(const ReadContext& receipt, uint32_t i, wire::MapperOutcome::Reader r, MapperOutcome& out) {
  using W = wire::MapperOutcome;
  switch (r.which()) {
    case W::ERROR:
      return read_element(receipt, "outcomes", i, "error",
                          [&](ReadContext& c) { return detail::read(c, r.getError(), out.emplace<Error>()); });
    case W::SLOT_BINDING:
      return read_as<SlotBinding>(receipt, "outcomes", i, "slot_binding", out, [&] { return r.getSlotBinding(); });
    case W::STEP_RESULT:
      return read_as<StepResult>(receipt, "outcomes", i, "step_result", out, [&] { return r.getStepResult(); });
    case W::DONE:
      out.emplace<MapperDone>();
      return Status::success();
  }
  const ReadContext element(receipt, "outcomes", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown outcome kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

// ---- batches ----------------------------------------------------------------

void write(wire::MapperBatch::Builder b, const MapperBatch& v) {
  detail::write_op_batch(b, v, [](auto element, const auto& op) { put(element, op); });
}
Status read(ReadContext& ctx, wire::MapperBatch::Reader r, MapperBatch& out) {
  return detail::read_op_batch(
      ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& op) { return read_op(c, i, element, op); });
}

void write(wire::MapperBatchReceipt::Builder b, const MapperBatchReceipt& v) {
  detail::write_outcome_receipt(b, v, [](auto element, const auto& outcome) { put(element, outcome); });
}
Status read(ReadContext& ctx, wire::MapperBatchReceipt::Reader r, MapperBatchReceipt& out) {
  return detail::read_outcome_receipt(ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& outcome) {
    return read_outcome(c, i, element, outcome);
  });
}

}  // namespace

std::vector<uint8_t> encode(const MapperBatch& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initMapperBatch(), value); });
}
std::vector<uint8_t> encode(const MapperBatchReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initMapperBatchReceipt(), value); });
}

template <>
Result<MapperBatch> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<MapperBatch>(
      bytes, limits, wire::Envelope::MAPPER_BATCH, "MapperBatch",
      [](ReadContext& ctx, wire::Envelope::Reader e, MapperBatch& out) { return read(ctx, e.getMapperBatch(), out); });
}
template <>
Result<MapperBatchReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<MapperBatchReceipt>(
      bytes, limits, wire::Envelope::MAPPER_BATCH_RECEIPT, "MapperBatchReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, MapperBatchReceipt& out) {
        return read(ctx, e.getMapperBatchReceipt(), out);
      });
}

}  // namespace kvrt::codec
