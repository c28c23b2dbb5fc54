// Codec for the node protocol (issue 5), part 1: the values every node
// message shares (TraceContext, RequestFence, token lists), session set-up
// (HelloRequest, SessionReceipt, AuthorizeRequest, NamespaceGrantReceipt) and
// OwnerStats. The batches live in codec_node_allocator.cpp and
// codec_node_prefix.cpp.
#include "schema/codec_node.hpp"

#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {

// A field added to a core type must be added to node.capnp and to both
// directions below; these counts make the build say so.
static_assert(detail::field_count<TraceContext>() == 3, "update node.capnp TraceContext and this codec");
static_assert(detail::field_count<RequestFence>() == 3, "update node.capnp RequestFence and this codec");
static_assert(detail::field_count<HelloRequest>() == 3, "update node.capnp HelloRequest and this codec");
static_assert(detail::field_count<PoolAttachment>() == 7, "update node.capnp PoolAttachment and this codec");
static_assert(detail::field_count<SessionReceipt>() == 8, "update node.capnp SessionReceipt and this codec");
static_assert(detail::field_count<AuthorizeRequest>() == 2, "update node.capnp AuthorizeRequest and this codec");
static_assert(detail::field_count<NamespaceGrantReceipt>() == 4, "update node.capnp NamespaceGrantReceipt");
static_assert(detail::field_count<StatValue>() == 2, "update node.capnp StatValue and this codec");
static_assert(detail::field_count<OwnerStats>() == 4, "update node.capnp OwnerStats and this codec");

namespace detail {

void write(wire::TraceContext::Builder b, const TraceContext& v) {
  b.setTraceId(v.trace_id);
  b.setSpanId(v.span_id);
  b.setParentSpanId(v.parent_span_id);
}
TraceContext read(wire::TraceContext::Reader r) {
  return TraceContext{r.getTraceId(), r.getSpanId(), r.getParentSpanId()};
}

void write(wire::RequestFence::Builder b, const RequestFence& v) {
  b.setRequest(v.request.value);
  b.setGeneration(v.generation.value);
  b.setTableVersion(v.table_version.value);
}
RequestFence read(wire::RequestFence::Reader r) {
  return RequestFence{RequestId{r.getRequest()}, RequestGeneration{r.getGeneration()},
                      TableVersion{r.getTableVersion()}};
}

void write_tokens(capnp::List<int32_t>::Builder list, const std::vector<TokenId>& tokens) {
  for (unsigned i = 0; i < list.size(); ++i) list.set(i, tokens[i]);
}
std::vector<TokenId> read_tokens(capnp::List<int32_t>::Reader list) {
  std::vector<TokenId> out;
  out.reserve(list.size());
  for (int32_t t : list) out.push_back(t);
  return out;
}

}  // namespace detail

namespace {

using detail::ReadContext;
using detail::text;
using detail::to_string;

void write(wire::HelloRequest::Builder b, const HelloRequest& v) {
  b.setToken(text(v.token));
  b.setWorkerName(text(v.worker_name));
  b.setProcessId(v.process_id);
}

Status read(ReadContext& ctx, wire::HelloRequest::Reader r, HelloRequest& out) {
  ctx.at("token");
  out.token = to_string(r.getToken());
  ctx.at("worker_name");
  out.worker_name = to_string(r.getWorkerName());
  out.process_id = r.getProcessId();
  return Status::success();
}

void write(wire::SessionReceipt::Builder b, const SessionReceipt& v) {
  b.setSession(v.session.value);
  b.setPrincipal(text(v.principal));
  auto names = b.initAllowedNamespaces(detail::list_size(v.allowed_namespaces.size()));
  for (unsigned i = 0; i < names.size(); ++i) names.set(i, text(v.allowed_namespaces[i]));
  b.setLayoutSha256(detail::data(v.layout_sha256));
  b.setBlockTokens(v.block_tokens);
  auto pools = b.initPools(detail::list_size(v.pools.size()));
  for (unsigned i = 0; i < pools.size(); ++i) {
    const PoolAttachment& p = v.pools[i];
    pools[i].setGroup(p.group.value);
    pools[i].setPool(p.pool.value);
    pools[i].setGeneration(p.generation.value);
    pools[i].setSegmentName(text(p.segment_name));
    pools[i].setSegmentBytes(p.segment_bytes);
    pools[i].setCudaIpcHandle(text(p.cuda_ipc_handle));
    pools[i].setCudaDevice(p.cuda_device);
  }
  b.setChannelSocket(text(v.channel_socket));
  b.setChannelTicket(text(v.channel_ticket));
}

Status read(ReadContext& ctx, wire::SessionReceipt::Reader r, SessionReceipt& out) {
  out.session = SessionId{r.getSession()};
  ctx.at("principal");
  out.principal = to_string(r.getPrincipal());
  ctx.at("allowed_namespaces");
  auto names = r.getAllowedNamespaces();
  out.allowed_namespaces.reserve(names.size());
  for (auto name : names) out.allowed_namespaces.push_back(to_string(name));
  ctx.at("layout_sha256");
  KVRT_TRY(detail::read_digest(ctx, "layout_sha256", r.getLayoutSha256(), out.layout_sha256));
  out.block_tokens = r.getBlockTokens();
  ctx.at("pools");
  auto pools = r.getPools();
  out.pools.reserve(pools.size());
  for (auto p : pools) {
    ctx.at("pools.segment_name");
    PoolAttachment a{CacheGroupId{p.getGroup()}, PoolId{p.getPool()}, PoolGeneration{p.getGeneration()},
                     to_string(p.getSegmentName()), p.getSegmentBytes()};
    ctx.at("pools.cuda_ipc_handle");
    a.cuda_ipc_handle = to_string(p.getCudaIpcHandle());
    a.cuda_device = p.getCudaDevice();
    out.pools.push_back(std::move(a));
  }
  ctx.at("channel_socket");
  out.channel_socket = to_string(r.getChannelSocket());
  ctx.at("channel_ticket");
  out.channel_ticket = to_string(r.getChannelTicket());
  return Status::success();
}

void write(wire::AuthorizeRequest::Builder b, const AuthorizeRequest& v) {
  detail::write(b.initTrace(), v.trace);
  b.setNamespaceName(text(v.namespace_name));
}

Status read(ReadContext& ctx, wire::AuthorizeRequest::Reader r, AuthorizeRequest& out) {
  ctx.at("trace");
  out.trace = detail::read(r.getTrace());
  ctx.at("namespace_name");
  out.namespace_name = to_string(r.getNamespaceName());
  return Status::success();
}

void write(wire::NamespaceGrantReceipt::Builder b, const NamespaceGrantReceipt& v) {
  b.setGrantId(v.grant_id);
  b.setNamespaceName(text(v.namespace_name));
  b.setGeneration(v.generation.value);
  b.setGrantSha256(detail::data(v.grant_sha256));
}

Status read(ReadContext& ctx, wire::NamespaceGrantReceipt::Reader r, NamespaceGrantReceipt& out) {
  out.grant_id = r.getGrantId();
  ctx.at("namespace_name");
  out.namespace_name = to_string(r.getNamespaceName());
  out.generation = NamespaceGeneration{r.getGeneration()};
  ctx.at("grant_sha256");
  return detail::read_digest(ctx, "grant_sha256", r.getGrantSha256(), out.grant_sha256);
}

void write(wire::OwnerStats::Builder b, const OwnerStats& v) {
  b.setOwner(text(v.owner));
  b.setValidateOk(v.validate_ok);
  b.setValidateError(text(v.validate_error));
  auto values = b.initValues(detail::list_size(v.values.size()));
  for (unsigned i = 0; i < values.size(); ++i) {
    values[i].setName(text(v.values[i].name));
    values[i].setValue(v.values[i].value);
  }
}

Status read(ReadContext& ctx, wire::OwnerStats::Reader r, OwnerStats& out) {
  ctx.at("owner");
  out.owner = to_string(r.getOwner());
  out.validate_ok = r.getValidateOk();
  ctx.at("validate_error");
  out.validate_error = to_string(r.getValidateError());
  ctx.at("values");
  auto values = r.getValues();
  out.values.reserve(values.size());
  for (auto s : values) {
    ctx.at("values.name");
    out.values.push_back(StatValue{to_string(s.getName()), s.getValue()});
  }
  return Status::success();
}

}  // namespace

std::vector<uint8_t> encode(const HelloRequest& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initHelloRequest(), value); });
}
std::vector<uint8_t> encode(const SessionReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initSessionReceipt(), value); });
}
std::vector<uint8_t> encode(const AuthorizeRequest& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initAuthorizeRequest(), value); });
}
std::vector<uint8_t> encode(const NamespaceGrantReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initNamespaceGrantReceipt(), value); });
}
std::vector<uint8_t> encode(const OwnerStats& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initOwnerStats(), value); });
}

template <>
Result<HelloRequest> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<HelloRequest>(bytes, limits, wire::Envelope::HELLO_REQUEST, "HelloRequest",
                                           [](ReadContext& ctx, wire::Envelope::Reader e, HelloRequest& out) {
                                             return read(ctx, e.getHelloRequest(), out);
                                           });
}
template <>
Result<SessionReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<SessionReceipt>(bytes, limits, wire::Envelope::SESSION_RECEIPT, "SessionReceipt",
                                             [](ReadContext& ctx, wire::Envelope::Reader e, SessionReceipt& out) {
                                               return read(ctx, e.getSessionReceipt(), out);
                                             });
}
template <>
Result<AuthorizeRequest> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<AuthorizeRequest>(bytes, limits, wire::Envelope::AUTHORIZE_REQUEST, "AuthorizeRequest",
                                               [](ReadContext& ctx, wire::Envelope::Reader e, AuthorizeRequest& out) {
                                                 return read(ctx, e.getAuthorizeRequest(), out);
                                               });
}
template <>
Result<NamespaceGrantReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<NamespaceGrantReceipt>(
      bytes, limits, wire::Envelope::NAMESPACE_GRANT_RECEIPT, "NamespaceGrantReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, NamespaceGrantReceipt& out) {
        return read(ctx, e.getNamespaceGrantReceipt(), out);
      });
}
template <>
Result<OwnerStats> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<OwnerStats>(
      bytes, limits, wire::Envelope::OWNER_STATS, "OwnerStats",
      [](ReadContext& ctx, wire::Envelope::Reader e, OwnerStats& out) { return read(ctx, e.getOwnerStats(), out); });
}

}  // namespace kvrt::codec
