// Codec for the node protocol (issue 5), part 3: the prefix-index owner's
// PrefixBatch and PrefixBatchReceipt. Match outcomes reuse the
// PrefixMatchReceipt / TypedError codecs (codec_parts.hpp). As in
// codec_node_allocator.cpp, each op and outcome is read under its own
// context ("PrefixBatch.ops[2].match.tokens") and an unknown union
// discriminant is unknown_enum naming the element.
#include <variant>

#include "schema/codec_node.hpp"
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {

// Shared with codec_node_reuse.cpp (a release op's successor; codec_parts.hpp).
namespace detail {
void write(wire::PrefixPublishReceipt::Builder b, const PrefixPublishReceipt& v) {
  b.setRequest(v.request.value);
  b.setPublished(v.published);
  b.setDuplicates(v.duplicates);
  b.setAlready(v.already);
  b.setPublicationGeneration(v.publication_generation);
}
Status read(ReadContext&, wire::PrefixPublishReceipt::Reader r, PrefixPublishReceipt& out) {
  out = PrefixPublishReceipt{RequestId{r.getRequest()}, r.getPublished(), r.getDuplicates(), r.getAlready(),
                             r.getPublicationGeneration()};
  return Status::success();
}
}  // namespace detail

namespace {

using detail::read_element;
using detail::read_enum;
using detail::ReadContext;
using detail::text;
using detail::to_string;

// PrefixMatchOp.logits_path travels as reuse.capnp's LogitsPath
// (codec_reuse.cpp checks every enumerant); re-checked here because this
// file relies on it too.
static_assert(uint16_t(wire::LogitsPath::NO_LOGITS) == uint8_t(LogitsPath::no_logits));
static_assert(kLogitsPathMax == uint8_t(LogitsPath::no_logits));

static_assert(detail::field_count<PrefixMatchOp>() == 5, "update node.capnp PrefixMatchOp and this codec");
static_assert(detail::field_count<PrefixPublishOp>() == 5, "update node.capnp PrefixPublishOp and this codec");
static_assert(detail::field_count<PrefixPublishReceipt>() == 5, "update node.capnp PrefixPublishReceipt");
static_assert(detail::field_count<PrefixBatch>() == 2, "update node.capnp PrefixBatch and this codec");
static_assert(detail::field_count<PrefixBatchReceipt>() == 2, "update node.capnp PrefixBatchReceipt and this codec");
static_assert(std::variant_size_v<PrefixOp> == 2, "update node.capnp PrefixOp and read_op");
static_assert(std::variant_size_v<PrefixOutcome> == 3, "update node.capnp PrefixOutcome and read_outcome");

void write(wire::PrefixMatchOp::Builder b, const PrefixMatchOp& v) {
  b.setNamespaceName(text(v.namespace_name));
  b.setRequest(v.request.value);
  b.setRequestGeneration(v.request_generation.value);
  detail::write_tokens(b.initTokens(detail::list_size(v.tokens.size())), v.tokens);
  b.setLogitsPath(static_cast<wire::LogitsPath>(v.logits_path));
}
Status read(ReadContext& ctx, wire::PrefixMatchOp::Reader r, PrefixMatchOp& out) {
  ctx.at("namespace_name");
  out.namespace_name = to_string(r.getNamespaceName());
  out.request = RequestId{r.getRequest()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  ctx.at("tokens");
  out.tokens = detail::read_tokens(r.getTokens());
  return read_enum(ctx, "logits_path", r.getLogitsPath(), kLogitsPathMax, out.logits_path);
}

void write(wire::PrefixPublishOp::Builder b, const PrefixPublishOp& v) {
  b.setNamespaceName(text(v.namespace_name));
  b.setRequest(v.request.value);
  detail::write_tokens(b.initTokens(detail::list_size(v.tokens.size())), v.tokens);
  b.setFirstBlock(v.first_block);
  b.setEndBlock(v.end_block);
}
Status read(ReadContext& ctx, wire::PrefixPublishOp::Reader r, PrefixPublishOp& out) {
  ctx.at("namespace_name");
  out.namespace_name = to_string(r.getNamespaceName());
  out.request = RequestId{r.getRequest()};
  ctx.at("tokens");
  out.tokens = detail::read_tokens(r.getTokens());
  out.first_block = r.getFirstBlock();
  out.end_block = r.getEndBlock();
  return Status::success();
}

// One overload per alternative: std::visit over a variant with an alternative
// missing here does not compile.
void put(wire::PrefixOp::Builder b, const PrefixMatchOp& v) { write(b.initMatch(), v); }
void put(wire::PrefixOp::Builder b, const PrefixPublishOp& v) { write(b.initPublish(), v); }
void put(wire::PrefixOutcome::Builder b, const Error& v) { detail::write(b.initError(), v); }
void put(wire::PrefixOutcome::Builder b, const PrefixMatchReceipt& v) { detail::write(b.initMatchReceipt(), v); }
void put(wire::PrefixOutcome::Builder b, const PrefixPublishReceipt& v) { detail::write(b.initPublishReceipt(), v); }

// Reads element `index` of `list` as alternative T through union member
// `member`, constructing it in place in the variant.
template <class T, class Variant, class Get>
Status read_as(const ReadContext& parent, const char* list, uint32_t index, const char* member, Variant& out, Get get) {
  return read_element(parent, list, index, member,
                      [&](ReadContext& ctx) { return read(ctx, get(), out.template emplace<T>()); });
}

Status read_op(const ReadContext& batch, uint32_t i, wire::PrefixOp::Reader r, PrefixOp& out) {
  switch (r.which()) {
    case wire::PrefixOp::MATCH:
      return read_as<PrefixMatchOp>(batch, "ops", i, "match", out, [&] { return r.getMatch(); });
    case wire::PrefixOp::PUBLISH:
      return read_as<PrefixPublishOp>(batch, "ops", i, "publish", out, [&] { return r.getPublish(); });
  }
  const ReadContext element(batch, "ops", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown operation kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

Status read_outcome(const ReadContext& receipt, uint32_t i, wire::PrefixOutcome::Reader r, PrefixOutcome& out) {
  switch (r.which()) {
    case wire::PrefixOutcome::ERROR:
      return read_as<Error>(receipt, "outcomes", i, "error", out, [&] { return r.getError(); });
    case wire::PrefixOutcome::MATCH_RECEIPT:
      return read_as<PrefixMatchReceipt>(receipt, "outcomes", i, "match_receipt", out,
                                         [&] { return r.getMatchReceipt(); });
    case wire::PrefixOutcome::PUBLISH_RECEIPT:
      return read_as<PrefixPublishReceipt>(receipt, "outcomes", i, "publish_receipt", out,
                                           [&] { return r.getPublishReceipt(); });
  }
  const ReadContext element(receipt, "outcomes", i);
  return make_error(ErrorCode::unknown_enum,
                    element.path() + ": unknown outcome kind " + std::to_string(static_cast<unsigned>(r.which())),
                    element.path());
}

void write(wire::PrefixBatch::Builder b, const PrefixBatch& v) {
  detail::write_op_batch(b, v, [](auto element, const auto& op) { put(element, op); });
}
Status read(ReadContext& ctx, wire::PrefixBatch::Reader r, PrefixBatch& out) {
  return detail::read_op_batch(
      ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& op) { return read_op(c, i, element, op); });
}

void write(wire::PrefixBatchReceipt::Builder b, const PrefixBatchReceipt& v) {
  detail::write_outcome_receipt(b, v, [](auto element, const auto& outcome) { put(element, outcome); });
}
Status read(ReadContext& ctx, wire::PrefixBatchReceipt::Reader r, PrefixBatchReceipt& out) {
  return detail::read_outcome_receipt(ctx, r, out, [](ReadContext& c, unsigned i, auto element, auto& outcome) {
    return read_outcome(c, i, element, outcome);
  });
}

}  // namespace

std::vector<uint8_t> encode(const PrefixBatch& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initPrefixBatch(), value); });
}
std::vector<uint8_t> encode(const PrefixBatchReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initPrefixBatchReceipt(), value); });
}

template <>
Result<PrefixBatch> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<PrefixBatch>(
      bytes, limits, wire::Envelope::PREFIX_BATCH, "PrefixBatch",
      [](ReadContext& ctx, wire::Envelope::Reader e, PrefixBatch& out) { return read(ctx, e.getPrefixBatch(), out); });
}
template <>
Result<PrefixBatchReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<PrefixBatchReceipt>(
      bytes, limits, wire::Envelope::PREFIX_BATCH_RECEIPT, "PrefixBatchReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, PrefixBatchReceipt& out) {
        return read(ctx, e.getPrefixBatchReceipt(), out);
      });
}

}  // namespace kvrt::codec
