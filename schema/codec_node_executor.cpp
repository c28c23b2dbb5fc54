// Codec for the node protocol, part 5: the kernel executor owner's
// ExecuteBatch and ExecuteBatchReceipt (issue 5). Same error contract as the
// other batches: each element is read under its own context
// ("ExecuteBatch.ops[1].queries"), an unknown outcome kind is unknown_enum.
#include <variant>

#include "schema/codec_node.hpp"
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {
namespace {

using detail::read_element;
using detail::ReadContext;

static_assert(detail::field_count<DecodeAttentionOp>() == 5, "update node.capnp DecodeAttentionOp and this codec");
static_assert(detail::field_count<AttentionOutput>() == 7, "update node.capnp AttentionOutput and this codec");
static_assert(detail::field_count<ExecuteBatch>() == 2, "update node.capnp ExecuteBatch and this codec");
static_assert(detail::field_count<ExecuteBatchReceipt>() == 2, "update node.capnp ExecuteBatchReceipt");
static_assert(std::variant_size_v<ExecuteOutcome> == 2, "update node.capnp ExecuteOutcome and read_outcome");

template <class ListBuilder>
void write_floats(ListBuilder list, const std::vector<float>& values) {
  for (unsigned i = 0; i < values.size(); ++i) list.set(i, values[i]);
}
template <class ListReader>
std::vector<float> read_floats(ListReader list) {
  std::vector<float> out(list.size());
  for (unsigned i = 0; i < list.size(); ++i) out[i] = list[i];
  return out;
}

void write(wire::DecodeAttentionOp::Builder b, const DecodeAttentionOp& v) {
  b.setRequest(v.request.value);
  b.setTableVersion(v.table_version.value);
  b.setLayer(v.layer);
  b.setQHeads(v.q_heads);
  write_floats(b.initQueries(detail::list_size(v.queries.size())), v.queries);
}
Status read(ReadContext& ctx, wire::DecodeAttentionOp::Reader r, DecodeAttentionOp& out) {
  out.request = RequestId{r.getRequest()};
  out.table_version = TableVersion{r.getTableVersion()};
  out.layer = r.getLayer();
  out.q_heads = r.getQHeads();
  ctx.at("queries");
  out.queries = read_floats(r.getQueries());
  return Status::success();
}

void put(wire::ExecuteOutcome::Builder b, const Error& v) { detail::write(b.initError(), v); }
void put(wire::ExecuteOutcome::Builder b, const AttentionOutput& v) {
  auto o = b.initAttentionOutput();
  o.setRequest(v.request.value);
  o.setTableVersion(v.table_version.value);
  o.setLayer(v.layer);
  o.setContextTokens(v.context_tokens);
  write_floats(o.initOutputs(detail::list_size(v.outputs.size())), v.outputs);
  write_floats(o.initLse(detail::list_size(v.lse.size())), v.lse);
  o.setKvRows(v.kv_rows);
}
Status read(ReadContext& ctx, wire::AttentionOutput::Reader r, AttentionOutput& out) {
  out.request = RequestId{r.getRequest()};
  out.table_version = TableVersion{r.getTableVersion()};
  out.layer = r.getLayer();
  out.context_tokens = r.getContextTokens();
  ctx.at("outputs");
  out.outputs = read_floats(r.getOutputs());
  ctx.at("lse");
  out.lse = read_floats(r.getLse());
  out.kv_rows = r.getKvRows();
  return Status::success();
}

Status read_outcome(const ReadContext& receipt, uint32_t i, wire::ExecuteOutcome::Reader r, ExecuteOutcome& out) {
  using W = wire::ExecuteOutcome;
  switch (r.which()) {
    case W::ERROR:
      return read_element(receipt, "outcomes", i, "error",
                          [&](ReadContext& c) { return detail::read(c, r.getError(), out.emplace<Error>()); });
    case W::ATTENTION_OUTPUT:
      return read_element(receipt, "outcomes", i, "attention_output", [&](ReadContext& c) {
        return read(c, r.getAttentionOutput(), out.emplace<AttentionOutput>());
      });
  }
  const ReadContext element(receipt, "outcomes", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown outcome kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

void write(wire::ExecuteBatch::Builder b, const ExecuteBatch& v) {
  detail::write(b.initTrace(), v.trace);
  auto ops = b.initOps(detail::list_size(v.ops.size()));
  for (unsigned i = 0; i < v.ops.size(); ++i) write(ops[i], v.ops[i]);
}
Status read(ReadContext& ctx, wire::ExecuteBatch::Reader r, ExecuteBatch& out) {
  ctx.at("trace");
  out.trace = detail::read(r.getTrace());
  ctx.at("ops");
  auto ops = r.getOps();
  out.ops.resize(ops.size());
  for (unsigned i = 0; i < ops.size(); ++i)
    KVRT_TRY(read_element(ctx, "ops", i, "decode", [&](ReadContext& c) { return read(c, ops[i], out.ops[i]); }));
  return Status::success();
}

void write(wire::ExecuteBatchReceipt::Builder b, const ExecuteBatchReceipt& v) {
  detail::write_outcome_receipt(b, v, [](auto element, const auto& outcome) { put(element, outcome); });
}
Status read(ReadContext& ctx, wire::ExecuteBatchReceipt::Reader r, ExecuteBatchReceipt& out) {
  return detail::read_outcome_receipt(ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& outcome) {
    return read_outcome(c, i, element, outcome);
  });
}

}  // namespace

std::vector<uint8_t> encode(const ExecuteBatch& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initExecuteBatch(), value); });
}
std::vector<uint8_t> encode(const ExecuteBatchReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initExecuteBatchReceipt(), value); });
}

template <>
Result<ExecuteBatch> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ExecuteBatch>(bytes, limits, wire::Envelope::EXECUTE_BATCH, "ExecuteBatch",
                                           [](ReadContext& ctx, wire::Envelope::Reader e, ExecuteBatch& out) {
                                             return read(ctx, e.getExecuteBatch(), out);
                                           });
}
template <>
Result<ExecuteBatchReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ExecuteBatchReceipt>(
      bytes, limits, wire::Envelope::EXECUTE_BATCH_RECEIPT, "ExecuteBatchReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, ExecuteBatchReceipt& out) {
        return read(ctx, e.getExecuteBatchReceipt(), out);
      });
}

}  // namespace kvrt::codec
