#pragma once
// Fully populated node-protocol messages, in the manner of
// codec_fixtures.hpp: every field differs from its default, and every batch
// holds every alternative of its op or outcome union at least once, so that a
// round trip compared with operator== proves each field and each alternative
// travels. Also: the list of node-protocol types.
#include <cstdint>
#include <limits>

// Before codec_fixtures.hpp: its decode_is_safe<T> calls codec::encode by
// qualified name, which sees only the overloads declared before it.
#include "schema/codecs.hpp"
// (keep this order)
#include "tests/schema/codec_fixtures.hpp"

namespace kvrt::test {

inline RequestFence fence(Numbers& n) {
  return RequestFence{RequestId{n.u64()}, RequestGeneration{n.u32()}, TableVersion{n.u64()}};
}
inline TraceContext trace(Numbers& n) { return TraceContext{n.u64(), n.u64(), n.u64()}; }

// Row bytes distinct per row and per seed; sizes not multiples of 8 so that
// Data lengths are not rounded.
inline std::vector<uint8_t> row_bytes(Numbers& n, size_t size) {
  std::vector<uint8_t> row(size);
  const uint32_t base = n.u32();
  for (size_t i = 0; i < size; ++i) row[i] = static_cast<uint8_t>(base * 131 + i * 17 + 3);
  return row;
}

template <>
inline AllocatorBatch filled(uint64_t seed) {
  Numbers n(seed);
  AllocatorBatch b;
  b.trace = trace(n);
  b.ops.push_back(AllocateOp{n.u32(), {n.handle(), n.handle()}, Epoch{n.u64()}, n.text("prod-eu1/tenant"), n.u32()});
  b.ops.push_back(AppendOp{fence(n), {row_bytes(n, 13), row_bytes(n, 5)}, Epoch{n.u64()}});
  b.ops.push_back(AppendOp{fence(n), {}, std::nullopt});  // the shared-memory path
  b.ops.push_back(CommitRowsOp{fence(n), n.u32()});
  b.ops.push_back(ForkOp{fence(n)});
  b.ops.push_back(TruncateOp{fence(n), n.u32(), n.u32()});
  b.ops.push_back(ReleaseOp{fence(n), ReleaseReason::preempted});
  b.ops.push_back(TouchOp{fence(n), {n.handle(), n.handle(), n.handle()}});
  b.ops.push_back(AcquireLeaseOp{n.handle()});
  b.ops.push_back(ReleaseLeaseOp{LeaseId{n.u64()}});
  b.ops.push_back(ReadTableOp{RequestId{n.u64()}});
  return b;
}

inline BlockTableView filled_table_view(Numbers& n) {
  BlockTableView v;
  v.fence = fence(n);
  v.context_tokens = n.u32();
  v.allocator_epoch = Epoch{n.u64()};
  v.groups = {
      {BlockTableEntry{n.handle(), n.u32(), CacheKey{n.u64()}},
       BlockTableEntry{n.handle(), n.u32(), CacheKey{n.u64()}}},
      {BlockTableEntry{n.handle(), n.u32(), CacheKey{n.u64()}}, BlockTableEntry{n.handle(), n.u32(), CacheKey{n.u64()}},
       BlockTableEntry{n.handle(), n.u32(), CacheKey{n.u64()}}}};
  return v;
}

template <>
inline AllocatorBatchReceipt filled(uint64_t seed) {
  Numbers n(seed);
  AllocatorBatchReceipt r;
  r.trace = trace(n);
  r.outcomes.push_back(filled<ErrorMessage>(seed).error);
  r.outcomes.push_back(filled<AllocationReceipt>(seed + 100));
  r.outcomes.push_back(filled<ReleaseResult>(seed + 200));
  r.outcomes.push_back(LeaseReceipt{LeaseId{n.u64()}, n.handle(), n.u32()});
  r.outcomes.push_back(LeaseReleaseReceipt{LeaseId{n.u64()}, n.handle(), n.u32()});
  r.outcomes.push_back(filled_table_view(n));
  return r;
}

// Every identity field set: what a multimodal LoRA request with prompt
// embeddings and its own salt sends.
inline RequestIdentity identity_filled(Numbers& n) {
  return RequestIdentity{n.text("lora"),
                         n.text("v"),
                         {{n.text("image-sha"), n.u32(), n.u32()}, {n.text("audio-sha"), n.u32(), n.u32()}},
                         {std::string(64, 'a'), std::string(64, '0')},
                         n.text("salt")};
}

// Every field of a handoff set, its match filled as the codec fixtures fill one.
inline RadixSchedulerHandoffReceipt filled_handoff(Numbers& n, uint64_t seed) {
  RadixSchedulerHandoffReceipt h;
  h.match = filled<PrefixMatchReceipt>(seed + 300);
  h.tree_version = TreeVersion{n.u64()};
  h.path_node_ids = {RadixNodeId{n.u64()}, RadixNodeId{n.u64()}};
  h.terminal_node_id = RadixNodeId{n.u64()};
  h.suffix_interval = TokenInterval{n.u32(), n.u32()};
  h.lock_lease_id = LeaseId{n.u64()};
  h.lock_required_until_scheduler_disposition = true;
  h.free_private_tail_slots = n.u32();
  h.new_useful_kv_bytes = n.u64();
  h.new_physical_blocks = n.u32();
  h.new_physical_capacity_bytes = n.u64();
  h.receipt_sha256 = n.digest();
  return h;
}

template <>
inline PrefixBatch filled(uint64_t seed) {
  Numbers n(seed);
  PrefixBatch b;
  b.trace = trace(n);
  // Token ids are signed 32-bit: the extremes and a negative id travel.
  b.ops.push_back(PrefixMatchOp{
      n.text("namespace"),
      RequestId{n.u64()},
      RequestGeneration{n.u32()},
      {static_cast<TokenId>(n.u32()), std::numeric_limits<TokenId>::max(), -7, std::numeric_limits<TokenId>::min()},
      LogitsPath::no_logits,
      identity_filled(n)});
  b.ops.push_back(PrefixPublishOp{n.text("namespace"),
                                  RequestId{n.u64()},
                                  {static_cast<TokenId>(n.u32()), static_cast<TokenId>(n.u32()), -1},
                                  n.u32(),
                                  n.u32(),
                                  identity_filled(n),
                                  NamespaceGeneration{n.u64()},
                                  n.u32()});
  b.ops.push_back(PrefixPeekOp{PrefixMatchOp{n.text("namespace"),
                                             RequestId{n.u64()},
                                             RequestGeneration{n.u32()},
                                             {static_cast<TokenId>(n.u32()), 0},
                                             LogitsPath::logits_required,
                                             identity_filled(n)}});
  b.ops.push_back(PrefixHandoffOp{PrefixMatchOp{n.text("namespace"),
                                                RequestId{n.u64()},
                                                RequestGeneration{n.u32()},
                                                {static_cast<TokenId>(n.u32()), 3},
                                                LogitsPath::logits_required,
                                                identity_filled(n)},
                                  n.u32()});
  b.ops.push_back(PrefixHandoffDispositionOp{filled_handoff(n, seed), HandoffDisposition::release});
  return b;
}

template <>
inline PrefixBatchReceipt filled(uint64_t seed) {
  Numbers n(seed);
  PrefixBatchReceipt r;
  r.trace = trace(n);
  r.outcomes.push_back(filled<ErrorMessage>(seed).error);
  r.outcomes.push_back(filled<PrefixMatchReceipt>(seed + 100));
  r.outcomes.push_back(PrefixPublishReceipt{RequestId{n.u64()}, n.u32(), n.u32(), n.u32(), n.u64()});
  r.outcomes.push_back(filled_handoff(n, seed));
  r.outcomes.push_back(HandoffDispositionReceipt{
      RequestId{n.u64()}, LeaseId{n.u64()}, HandoffDisposition::admit, TreeVersion{n.u64()}, {RadixNodeId{n.u64()}}});
  return r;
}

template <>
inline HelloRequest filled(uint64_t seed) {
  Numbers n(seed);
  return HelloRequest{n.text("token"), n.text("worker"), n.u32()};
}

template <>
inline SessionReceipt filled(uint64_t seed) {
  Numbers n(seed);
  SessionReceipt r;
  r.session = SessionId{n.u64()};
  r.principal = n.text("principal");
  r.allowed_namespaces = {n.text("tenant-a"), n.text("tenant-b")};
  r.layout_sha256 = n.digest();
  r.block_tokens = n.u32();
  for (const char* segment : {"/kvrt-g0", "/kvrt-g1"})
    r.pools.push_back(
        PoolAttachment{CacheGroupId{n.u32()}, PoolId{n.u32()}, PoolGeneration{n.u32()}, n.text(segment), n.u64()});
  // A GPU pool: no segment name, a CUDA IPC handle and a device.
  PoolAttachment gpu{CacheGroupId{n.u32()}, PoolId{n.u32()}, PoolGeneration{n.u32()}, "", n.u64()};
  gpu.cuda_ipc_handle = n.text("cuda-ipc");
  gpu.cuda_device = n.u32();
  r.pools.push_back(std::move(gpu));
  // An unnamed segment: no name, its descriptor comes over the channel.
  PoolAttachment unnamed{CacheGroupId{n.u32()}, PoolId{n.u32()}, PoolGeneration{n.u32()}, "", n.u64()};
  unnamed.by_descriptor = true;
  r.pools.push_back(std::move(unnamed));
  r.channel_socket = n.text("/tmp/kvrt-node.json.tokens/session.sock");
  r.channel_ticket = n.text("0123456789abcdef0123456789abcdef");
  r.reuse_policy_id = n.text("kvrt.immutable_partial_tail.v1");
  return r;
}

template <>
inline AuthorizeRequest filled(uint64_t seed) {
  Numbers n(seed);
  AuthorizeRequest r;
  r.trace = trace(n);
  r.namespace_name = n.text("namespace");
  return r;
}

template <>
inline NamespaceGrantReceipt filled(uint64_t seed) {
  Numbers n(seed);
  return NamespaceGrantReceipt{n.u64(), n.text("namespace"), NamespaceGeneration{n.u64()}, n.digest(),
                               n.u64(), n.text("adapter")};
}

template <>
inline OwnerStats filled(uint64_t seed) {
  Numbers n(seed);
  OwnerStats s;
  s.owner = n.text("allocator");
  s.validate_ok = true;
  s.validate_error = n.text("never set when ok; here it proves the text travels");
  s.values = {StatValue{n.text("pool0_free_blocks"), static_cast<int64_t>(n.u64())},
              StatValue{n.text("delta_bytes"), -static_cast<int64_t>(n.u64())},
              StatValue{n.text("floor"), std::numeric_limits<int64_t>::min()}};
  return s;
}

// Every node-protocol type, with its name for failure messages.
template <>
inline MapperBatch filled(uint64_t seed) {
  Numbers n(seed);
  MapperBatch b;
  b.trace = trace(n);
  b.ops.push_back(MapperAllocOp{RequestId{n.u64()}, RequestGeneration{n.u32()}, n.u32()});
  b.ops.push_back(MapperStepOp{{StepRequest{RequestId{n.u64()}, n.u32()}, StepRequest{RequestId{n.u64()}, n.u32()}},
                               MappingPath::asynchronous});
  b.ops.push_back(MapperAppendOp{RequestId{n.u64()}, SlotGeneration{n.u64()}, n.u32()});
  b.ops.push_back(MapperFreeOp{RequestId{n.u64()}, SlotGeneration{n.u64()}, ReleaseMode::unmap_now});
  return b;
}

template <>
inline MapperBatchReceipt filled(uint64_t seed) {
  Numbers n(seed);
  MapperBatchReceipt r;
  r.trace = trace(n);
  r.outcomes.push_back(filled<ErrorMessage>(seed).error);
  r.outcomes.push_back(SlotBinding{
      RequestSlot{n.u32()},
      SlotGeneration{n.u64()},
      n.u32(),
      true,
      {PageMapping{n.u32(), KvTensorKind::key, n.u32(), PageHandleId{n.u64()}, BlockGeneration{n.u32()}},
       PageMapping{n.u32(), KvTensorKind::value, n.u32(), PageHandleId{n.u64()}, BlockGeneration{n.u32()}}}});
  r.outcomes.push_back(
      StepResult{MappingFeasibility::insufficient_handles,
                 n.u32(),
                 n.u32(),
                 {filled<MappedFrontierReceipt>(seed + 300), filled<MappedFrontierReceipt>(seed + 400)}});
  r.outcomes.push_back(MapperDone{});
  return r;
}

template <>
inline ExecuteBatch filled(uint64_t seed) {
  Numbers n(seed);
  ExecuteBatch b;
  b.trace = trace(n);
  for (int k = 0; k < 2; ++k) {
    DecodeAttentionOp op{RequestId{n.u64()}, TableVersion{n.u64()}, n.u32(), n.u32(), {}, n.u32()};
    for (int i = 0; i < 5 + k; ++i) op.queries.push_back(static_cast<float>(n.u32() % 1000) / 7.0f - 60.0f);
    b.ops.push_back(std::move(op));
  }
  SharedPrefixDecodeOp shared;
  for (int k = 0; k < 3; ++k)
    shared.members.push_back(SharedDecodeRequest{RequestId{n.u64()}, TableVersion{n.u64()}, n.u32()});
  shared.layer = n.u32();
  shared.q_heads = n.u32();
  for (int i = 0; i < 4; ++i) shared.queries.push_back(static_cast<float>(n.u32() % 1000) / 9.0f - 50.0f);
  shared.design = static_cast<SharedPrefixDesign>(n.u32() % 4);
  shared.shared_threshold = n.u32();
  b.shared.push_back(std::move(shared));
  return b;
}

template <>
inline ExecuteBatchReceipt filled(uint64_t seed) {
  Numbers n(seed);
  ExecuteBatchReceipt r;
  r.trace = trace(n);
  // Each outcome is built in place in its alternative (see the ReuseBatch
  // fixture below).
  r.outcomes.reserve(2);
  r.outcomes.emplace_back(std::in_place_type<Error>, filled<ErrorMessage>(seed).error);
  AttentionOutput o{
      RequestId{n.u64()}, TableVersion{n.u64()}, n.u32(), n.u32(), {}, {}, n.u64(), n.u32(), n.u64(), n.u64()};
  for (int i = 0; i < 6; ++i) o.outputs.push_back(static_cast<float>(n.u32() % 1000) / 3.0f);
  for (int i = 0; i < 2; ++i) o.lse.push_back(static_cast<float>(n.u32() % 100) / 9.0f);
  SharedPrefixOutput shared;
  shared.design = static_cast<SharedPrefixDesign>(n.u32() % 4);
  shared.fallback_reason = n.text("reason");
  shared.levels = n.u32();
  shared.chunks = n.u32();
  shared.shared_chunks = n.u32();
  shared.rows_read = n.u64();
  shared.rows_per_request = n.u64();
  for (size_t i = 0; i < shared.snapshot_sha256.bytes.size(); ++i) {
    shared.snapshot_sha256.bytes[i] = static_cast<uint8_t>(n.u32());
    shared.kernel_abi_sha256.bytes[i] = static_cast<uint8_t>(n.u32());
  }
  shared.outputs.push_back(o);
  r.outcomes.emplace_back(std::in_place_type<AttentionOutput>, std::move(o));
  r.shared_outcomes.reserve(2);
  r.shared_outcomes.emplace_back(std::in_place_type<SharedPrefixOutput>, std::move(shared));
  r.shared_outcomes.emplace_back(std::in_place_type<Error>, filled<ErrorMessage>(seed + 1).error);
  return r;
}

template <>
inline ReuseBatch filled(uint64_t seed) {
  Numbers n(seed);
  ReuseBatch b;
  b.trace = trace(n);
  // Each op is built in place in its alternative: moving a temporary variant
  // into the vector draws a false -Wmaybe-uninitialized from GCC 12 at -O3.
  b.ops.reserve(4);
  // Token ids are signed 32-bit: the extremes and a negative id travel.
  b.ops.emplace_back(std::in_place_type<ReuseAcquireOp>,
                     ReuseAcquireOp{n.text("namespace"),
                                    RequestId{n.u64()},
                                    RequestGeneration{n.u32()},
                                    {static_cast<TokenId>(n.u32()), std::numeric_limits<TokenId>::max(), -3,
                                     std::numeric_limits<TokenId>::min()},
                                    LogitsPath::no_logits,
                                    true,
                                    identity_filled(n),
                                    // Rows landing in a request slot (0x0CD step 7).
                                    true,
                                    RequestId{n.u64()}});
  b.ops.emplace_back(std::in_place_type<ReuseAcquireOp>,
                     ReuseAcquireOp{n.text("other-namespace"),
                                    RequestId{n.u64()},
                                    RequestGeneration{n.u32()},
                                    {static_cast<TokenId>(n.u32()), static_cast<TokenId>(n.u32())},
                                    LogitsPath::logits_required,
                                    false});
  // Steps 9-10 for two attempts: one whose work did not run (executed at
  // neither its C++ nor its wire default) and one whose work ran.
  b.ops.emplace_back(std::in_place_type<ReuseReleaseOp>, ReuseReleaseOp{ExecutionSnapshotVersion{41}, false});
  b.ops.emplace_back(std::in_place_type<ReuseReleaseOp>, ReuseReleaseOp{ExecutionSnapshotVersion{42}, true});
  // Step 10's other ending: a named successor, every field non-default.
  b.ops.emplace_back(std::in_place_type<ReuseReleaseOp>,
                     ReuseReleaseOp{ExecutionSnapshotVersion{n.u64()}, true,
                                    ReuseSuccessor{RequestId{n.u64()},
                                                   {static_cast<TokenId>(n.u32()), std::numeric_limits<TokenId>::max(),
                                                    std::numeric_limits<TokenId>::min()},
                                                   n.u32()}});
  return b;
}

template <>
inline ReuseBatchReceipt filled(uint64_t seed) {
  Numbers n(seed);
  ReuseBatchReceipt r;
  r.trace = trace(n);
  r.outcomes.push_back(filled<ErrorMessage>(seed).error);
  r.outcomes.push_back(filled<ExecutableReuseReceipt>(seed + 100));  // every list non-empty
  // Neither step nor reason at its default (authorize, no_candidate).
  r.outcomes.push_back(ReuseRejectionReceipt{ReuseStep::acquire_leases,
                                             RejectionReason::lease_incomplete,
                                             n.text("leases cover 3 of 4 handles"),
                                             {LeaseId{n.u64()}, LeaseId{n.u64()}}});
  // Every field non-default: both lists filled, a radix path lease (bit 63
  // set) in each, a full-width snapshot and completed.
  r.outcomes.push_back(
      ReuseReleaseReceipt{ExecutionSnapshotVersion{(uint64_t{1} << 63) | n.u64()},
                          {OwnerLeaseId::path_lease(5).id(), OwnerLeaseId::allocator_lease(n.u32(), n.u32()).id()},
                          {OwnerLeaseId::path_lease(n.u64()).id(), LeaseId{n.u64()}, LeaseId{0}},
                          true});
  // A published successor, and a refused one (both optional parts present in turn).
  ReuseReleaseReceipt published{ExecutionSnapshotVersion{n.u64()}, {LeaseId{n.u64()}}, {}, true};
  published.successor = PrefixPublishReceipt{RequestId{n.u64()}, n.u32(), n.u32(), n.u32(), n.u64()};
  published.published_successor = true;
  r.outcomes.push_back(published);
  ReuseReleaseReceipt refused{ExecutionSnapshotVersion{n.u64()}, {LeaseId{n.u64()}}, {}, true};
  refused.successor_refused = filled<ErrorMessage>(seed + 7).error;
  r.outcomes.push_back(refused);
  return r;
}

template <>
inline FaultArmRequest filled(uint64_t seed) {
  Numbers n(seed);
  return FaultArmRequest{trace(n), true, {{n.text("after_reserve_group_"), n.u32()}, {n.text("point"), n.u32()}}};
}

template <>
inline FaultArmReceipt filled(uint64_t seed) {
  Numbers n(seed);
  return FaultArmReceipt{trace(n),
                         {{n.text("after_reserve_group_"), n.u32()}},
                         {n.text("after_reserve_group_"), n.text("point")},
                         {{n.text("after_reserve_group_"), n.u64()}}};
}

template <>
inline NamespaceInvalidateRequest filled(uint64_t seed) {
  Numbers n(seed);
  return NamespaceInvalidateRequest{trace(n), n.text("namespace"), InvalidationCause::positions, n.text("identity")};
}

template <>
inline NamespaceInvalidationReceipt filled(uint64_t seed) {
  Numbers n(seed);
  NamespaceInvalidationReceipt r;
  r.trace = trace(n);
  r.namespace_name = n.text("namespace");
  r.cause = InvalidationCause::adapter;
  r.old_generation = NamespaceGeneration{n.u64()};
  r.new_generation = NamespaceGeneration{n.u64()};
  r.old_model_generation = n.u64();
  r.new_model_generation = n.u64();
  r.changed_facts = {n.text("adapter_identity"), n.text("model_generation")};
  r.ended_grants = n.u32();
  r.old_live_admissions = n.u64();
  r.old_reclaimed = true;
  r.old_namespace_sha256 = n.digest();
  r.new_namespace_sha256 = n.digest();
  return r;
}

template <>
inline NamespaceStatusRequest filled(uint64_t seed) {
  Numbers n(seed);
  return NamespaceStatusRequest{trace(n), n.text("namespace")};
}

template <>
inline NamespaceStatusReceipt filled(uint64_t seed) {
  Numbers n(seed);
  NamespaceStatusReceipt r;
  r.trace = trace(n);
  for (int i = 0; i < 2; ++i) {
    NamespaceStatus s;
    s.namespace_name = n.text("namespace");
    s.generation = NamespaceGeneration{n.u64()};
    s.model_generation = n.u64();
    s.admitting = i == 0;
    s.open_purge = n.u64();
    s.live_grants = n.u32();
    s.frozen_generations = {n.u64(), n.u64()};
    s.live_lease_holds = n.u64();
    s.live_receipt_holds = n.u64();
    s.invalidations = n.u32();
    s.last_cause = n.text("weights");
    r.namespaces.push_back(std::move(s));
  }
  return r;
}

template <>
inline NamespacePurgeRequest filled(uint64_t seed) {
  Numbers n(seed);
  return NamespacePurgeRequest{trace(n), n.text("namespace"), InvalidationCause::adapter, n.text("identity"), n.u32(),
                               true};
}

template <>
inline NamespacePurgeReceipt filled(uint64_t seed) {
  Numbers n(seed);
  NamespacePurgeReceipt r;
  r.trace = trace(n);
  r.namespace_name = n.text("namespace");
  r.purge_id = n.u64();
  r.cause = InvalidationCause::transform;
  r.purged_generation = NamespaceGeneration{n.u64()};
  r.successor_generation = NamespaceGeneration{n.u64()};
  r.ended_grants = n.u32();
  r.dropped_index_pages = n.u64();
  r.receipts_drained = n.u64();
  r.receipts_revoked = n.u64();
  r.blocks_marked_for_overwrite = n.u64();
  r.external_copies = n.u64();
  r.duration_us = n.u64();
  for (int i = 0; i < 2; ++i)
    r.steps.push_back(PurgeStepRecord{n.text("step"), n.u64(), n.u32(), n.u64(), n.u64(), n.text("detail")});
  r.resumed_after = n.text("drain_leases");
  return r;
}

// Two groups of rows (one of them empty) and every identity extra.
template <>
inline SessionSaveRequest filled(uint64_t seed) {
  Numbers n(seed);
  return SessionSaveRequest{trace(n),
                            n.text("namespace"),
                            n.text("chat"),
                            {static_cast<TokenId>(n.u32()), -5, std::numeric_limits<TokenId>::max()},
                            {{1, 2, 3, static_cast<uint8_t>(n.u32())}, {}},
                            identity_filled(n),
                            n.text("absolute")};
}

template <>
inline SessionSaveReceipt filled(uint64_t seed) {
  Numbers n(seed);
  return SessionSaveReceipt{trace(n), filled<SessionReuseReceipt>(seed + 1)};
}

template <>
inline SessionResumeRequest filled(uint64_t seed) {
  Numbers n(seed);
  return SessionResumeRequest{
      trace(n),           n.text("namespace"),
      n.text("chat"),     {static_cast<TokenId>(n.u32()), 0, std::numeric_limits<TokenId>::min()},
      identity_filled(n), n.text("window")};
}

// A resume that answers rows; the refusal alternative travels in
// session_resume_refused below.
template <>
inline SessionResumeReceipt filled(uint64_t seed) {
  Numbers n(seed);
  SessionResumeReceipt r;
  r.trace = trace(n);
  r.outcome = SessionResumed{filled<SessionReuseReceipt>(seed + 2), {{9, 8, 7}, {static_cast<uint8_t>(n.u32())}}};
  return r;
}

inline SessionResumeReceipt session_resume_refused(uint64_t seed) {
  Numbers n(seed);
  SessionResumeReceipt r;
  r.trace = trace(n);
  r.outcome = SessionResumeRefusal{SessionTierRefusal::incomplete_save, RejectionReason::session_interval_mismatch,
                                   n.text("detail")};
  return r;
}

template <>
inline PoolDescriptorRequest filled(uint64_t seed) {
  Numbers n(seed);
  return PoolDescriptorRequest{trace(n)};
}

template <>
inline PoolDescriptorReceipt filled(uint64_t seed) {
  Numbers n(seed);
  PoolDescriptorReceipt r;
  for (int i = 0; i < 2; ++i) {
    PoolAttachment a{CacheGroupId{n.u32()}, PoolId{n.u32()}, PoolGeneration{n.u32()}, "", n.u64()};
    a.by_descriptor = true;
    r.pools.push_back(std::move(a));
  }
  return r;
}

// Prompt Cache's routes (0x0CB).
inline std::vector<PromptParameter> prompt_parameters(Numbers& n) {
  return {PromptParameter{n.text("doc_id"), n.text("value")}, PromptParameter{n.text("lang"), ""}};
}

template <>
inline PromptSchemaRequest filled(uint64_t seed) {
  Numbers n(seed);
  return PromptSchemaRequest{trace(n), n.text("namespace"), n.text("schema_id = \"s\"")};
}

template <>
inline PromptSchemaReceipt filled(uint64_t seed) {
  Numbers n(seed);
  return PromptSchemaReceipt{trace(n), n.text("namespace"), n.text("schema"), n.u64(), n.digest(), n.u32(), n.u32()};
}

template <>
inline PromptAssembleRequest filled(uint64_t seed) {
  Numbers n(seed);
  PromptAssembleRequest r{trace(n), n.text("namespace"), n.text("schema"), n.u64(), {}};
  r.items.push_back(
      PromptItemSpec{n.text("system"), prompt_parameters(n), {static_cast<TokenId>(n.u32()), -3}, 0, true});
  r.items.push_back(PromptItemSpec{"", {}, {std::numeric_limits<TokenId>::max()}, n.u32(), false});
  return r;
}

// All three outcomes of a segment.
template <>
inline PromptAssemblyReceipt filled(uint64_t seed) {
  Numbers n(seed);
  PromptAssemblyReceipt r{trace(n), n.text("schema"), n.u64(), NamespaceGeneration{n.u64()}, {}, n.u64(), n.u64()};
  r.segments.push_back(PromptSegment{
      n.u32(), n.text("system"), n.u32(), n.u32(),
      PromptModuleUse{filled<PromptModuleReceipt>(seed + 1), {n.handle(), n.handle()}, {n.u64(), n.u64()}}});
  r.segments.push_back(PromptSegment{n.u32(), "", n.u32(), n.u32(), PromptComputed{}});
  r.segments.push_back(PromptSegment{n.u32(), n.text("doc"), n.u32(), n.u32(),
                                     PromptModuleMiss{RejectionReason::module_position_mismatch, n.text("Pi")}});
  return r;
}

template <>
inline PromptModulePublishRequest filled(uint64_t seed) {
  Numbers n(seed);
  return PromptModulePublishRequest{trace(n),
                                    n.text("namespace"),
                                    n.text("schema"),
                                    n.u64(),
                                    n.text("doc"),
                                    prompt_parameters(n),
                                    {static_cast<TokenId>(n.u32()), 0, -1},
                                    RequestId{n.u64()}};
}

template <>
inline PromptModulePublishReceipt filled(uint64_t seed) {
  Numbers n(seed);
  return PromptModulePublishReceipt{trace(n), filled<PromptModuleReceipt>(seed + 1), true};
}

// Every message of the node protocol; every route's request and receipt
// must be among them (codec_node_test.cpp checks against the route table).
template <class Fn>
void for_each_node_type(Fn&& fn) {
  fn(Named<AllocatorBatch>{"AllocatorBatch"});
  fn(Named<AllocatorBatchReceipt>{"AllocatorBatchReceipt"});
  fn(Named<PrefixBatch>{"PrefixBatch"});
  fn(Named<PrefixBatchReceipt>{"PrefixBatchReceipt"});
  fn(Named<HelloRequest>{"HelloRequest"});
  fn(Named<SessionReceipt>{"SessionReceipt"});
  fn(Named<AuthorizeRequest>{"AuthorizeRequest"});
  fn(Named<NamespaceGrantReceipt>{"NamespaceGrantReceipt"});
  fn(Named<OwnerStats>{"OwnerStats"});
  fn(Named<MapperBatch>{"MapperBatch"});
  fn(Named<MapperBatchReceipt>{"MapperBatchReceipt"});
  fn(Named<ExecuteBatch>{"ExecuteBatch"});
  fn(Named<ExecuteBatchReceipt>{"ExecuteBatchReceipt"});
  fn(Named<ReuseBatch>{"ReuseBatch"});
  fn(Named<ReuseBatchReceipt>{"ReuseBatchReceipt"});
  fn(Named<FaultArmRequest>{"FaultArmRequest"});
  fn(Named<FaultArmReceipt>{"FaultArmReceipt"});
  fn(Named<NamespaceInvalidateRequest>{"NamespaceInvalidateRequest"});
  fn(Named<NamespaceInvalidationReceipt>{"NamespaceInvalidationReceipt"});
  fn(Named<NamespaceStatusRequest>{"NamespaceStatusRequest"});
  fn(Named<NamespaceStatusReceipt>{"NamespaceStatusReceipt"});
  fn(Named<NamespacePurgeRequest>{"NamespacePurgeRequest"});
  fn(Named<NamespacePurgeReceipt>{"NamespacePurgeReceipt"});
  fn(Named<PoolDescriptorRequest>{"PoolDescriptorRequest"});
  fn(Named<PoolDescriptorReceipt>{"PoolDescriptorReceipt"});
  fn(Named<SessionSaveRequest>{"SessionSaveRequest"});
  fn(Named<SessionSaveReceipt>{"SessionSaveReceipt"});
  fn(Named<SessionResumeRequest>{"SessionResumeRequest"});
  fn(Named<SessionResumeReceipt>{"SessionResumeReceipt"});
  fn(Named<PromptSchemaRequest>{"PromptSchemaRequest"});
  fn(Named<PromptSchemaReceipt>{"PromptSchemaReceipt"});
  fn(Named<PromptAssembleRequest>{"PromptAssembleRequest"});
  fn(Named<PromptAssemblyReceipt>{"PromptAssemblyReceipt"});
  fn(Named<PromptModulePublishRequest>{"PromptModulePublishRequest"});
  fn(Named<PromptModulePublishReceipt>{"PromptModulePublishReceipt"});
}
inline constexpr int kNodeTypeCount = 35;

}  // namespace kvrt::test
