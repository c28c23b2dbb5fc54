#pragma once
// Internal to schema/*.cpp (never included by cores or tests): the per-type
// writers and readers one codec translation unit shares with another. The
// node protocol's batch receipts carry AllocationReceipt, ReleaseResult,
// PrefixMatchReceipt, ExecutableReuseReceipt and TypedError as outcomes, so their codecs are reused
// here, never duplicated. Same contract as codec_support.hpp: read() fills
// `out` and names a failing field through ctx; a Cap'n Proto exception is
// left to the caller's boundary (decode_envelope or read_element).
#include "schema/allocator.capnp.h"
#include "schema/codec_support.hpp"
#include "schema/mapper.capnp.h"
#include "schema/node.capnp.h"
#include "schema/reuse.capnp.h"
#include "services/allocator/block_allocator.hpp"
#include "services/prefix/prefix_ops.hpp"
#include "services/common/trace_context.hpp"
#include "services/mapper/mapped_frontier_receipt.hpp"

namespace kvrt::codec::detail {

// codec_common.cpp
void write(wire::TypedError::Builder b, const Error& v);
Status read(ReadContext& ctx, wire::TypedError::Reader r, Error& out);

// codec_allocator.cpp
void write(wire::AllocationReceipt::Builder b, const AllocationReceipt& v);
Status read(ReadContext& ctx, wire::AllocationReceipt::Reader r, AllocationReceipt& out);
void write(wire::ReleaseResult::Builder b, const ReleaseResult& v);
Status read(ReadContext& ctx, wire::ReleaseResult::Reader r, ReleaseResult& out);

// codec_reuse.cpp
void write(wire::PrefixMatchReceipt::Builder b, const PrefixMatchReceipt& v);
Status read(ReadContext& ctx, wire::PrefixMatchReceipt::Reader r, PrefixMatchReceipt& out);
void write(wire::ExecutableReuseReceipt::Builder b, const ExecutableReuseReceipt& v);
Status read(ReadContext& ctx, wire::ExecutableReuseReceipt::Reader r, ExecutableReuseReceipt& out);

// codec_node_prefix.cpp
void write(wire::PrefixPublishReceipt::Builder b, const PrefixPublishReceipt& v);
Status read(ReadContext& ctx, wire::PrefixPublishReceipt::Reader r, PrefixPublishReceipt& out);

// codec_mapper.cpp
void write(wire::MappedFrontierReceipt::Builder b, const MappedFrontierReceipt& v);
Status read(ReadContext& ctx, wire::MappedFrontierReceipt::Reader r, MappedFrontierReceipt& out);

// codec_node.cpp: values every node-protocol message shares.
void write(wire::TraceContext::Builder b, const TraceContext& v);
TraceContext read(wire::TraceContext::Reader r);
void write(wire::RequestFence::Builder b, const RequestFence& v);
RequestFence read(wire::RequestFence::Reader r);

// Token ids (TokenId = int32_t) travel as List(Int32).
void write_tokens(capnp::List<int32_t>::Builder list, const std::vector<TokenId>& tokens);
std::vector<TokenId> read_tokens(capnp::List<int32_t>::Reader list);

// Every node batch is its trace and then its ops, and every batch receipt is
// its trace and then one outcome per op, each element a union: `put` writes
// one alternative, `read_one(ctx, index, element, out)` reads one element.
template <class Builder, class Batch, class Put>
void write_op_batch(Builder b, const Batch& v, Put&& put) {
  write(b.initTrace(), v.trace);
  write_variant_list(b.initOps(list_size(v.ops.size())), v.ops, put);
}
template <class Reader, class Batch, class ReadOne>
Status read_op_batch(ReadContext& ctx, Reader r, Batch& out, ReadOne&& read_one) {
  ctx.at("trace");
  out.trace = read(r.getTrace());
  ctx.at("ops");
  return read_variant_list(ctx, "ops", r.getOps(), out.ops, read_one);
}
template <class Builder, class Receipt, class Put>
void write_outcome_receipt(Builder b, const Receipt& v, Put&& put) {
  write(b.initTrace(), v.trace);
  write_variant_list(b.initOutcomes(list_size(v.outcomes.size())), v.outcomes, put);
}
template <class Reader, class Receipt, class ReadOne>
Status read_outcome_receipt(ReadContext& ctx, Reader r, Receipt& out, ReadOne&& read_one) {
  ctx.at("trace");
  out.trace = read(r.getTrace());
  ctx.at("outcomes");
  return read_variant_list(ctx, "outcomes", r.getOutcomes(), out.outcomes, read_one);
}

}  // namespace kvrt::codec::detail
