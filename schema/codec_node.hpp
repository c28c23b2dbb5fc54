#pragma once
// Codec for the node protocol (issue 5): the batched owner operations a worker
// sends and the batch receipts the owners answer, the session set-up
// messages, and owner statistics. Same rules as codec.hpp: core value types
// in, bytes out, no Cap'n Proto in this header; every message is one
// Envelope; decoding untrusted bytes never throws and answers a typed Error
// naming the field.
#include <cstdint>
#include <span>
#include <vector>

#include "schema/codec.hpp"
#include "services/allocator/allocator_ops.hpp"
#include "services/executor/executor_ops.hpp"
#include "services/mapper/mapper_ops.hpp"
#include "services/session/owner_stats.hpp"
#include "services/prefix/prefix_ops.hpp"
#include "services/reuse/reuse_ops.hpp"
#include "services/session/session_ops.hpp"

namespace kvrt::codec {

std::vector<uint8_t> encode(const AllocatorBatch& value);
std::vector<uint8_t> encode(const AllocatorBatchReceipt& value);
std::vector<uint8_t> encode(const PrefixBatch& value);
std::vector<uint8_t> encode(const PrefixBatchReceipt& value);
std::vector<uint8_t> encode(const ReuseBatch& value);
std::vector<uint8_t> encode(const ReuseBatchReceipt& value);
std::vector<uint8_t> encode(const HelloRequest& value);
std::vector<uint8_t> encode(const SessionReceipt& value);
std::vector<uint8_t> encode(const AuthorizeRequest& value);
std::vector<uint8_t> encode(const NamespaceGrantReceipt& value);
std::vector<uint8_t> encode(const OwnerStats& value);
std::vector<uint8_t> encode(const MapperBatch& value);
std::vector<uint8_t> encode(const MapperBatchReceipt& value);
std::vector<uint8_t> encode(const ExecuteBatch& value);
std::vector<uint8_t> encode(const ExecuteBatchReceipt& value);

template <>
Result<AllocatorBatch> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<MapperBatch> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<MapperBatchReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<ExecuteBatch> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<ExecuteBatchReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<AllocatorBatchReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<PrefixBatch> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<PrefixBatchReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<ReuseBatch> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<ReuseBatchReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<HelloRequest> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<SessionReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<AuthorizeRequest> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<NamespaceGrantReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<OwnerStats> decode(std::span<const uint8_t>, const DecodeLimits&);

}  // namespace kvrt::codec
