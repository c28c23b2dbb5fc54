// Codec for the exact-reuse receipts: PrefixMatchReceipt (0x07G),
// RadixSchedulerHandoffReceipt (0x08G), PromptModuleReceipt (0x0CB),
// SessionReuseReceipt (0x0CC) and ExecutableReuseReceipt (0x0CD).
#include "schema/codec_parts.hpp"
#include "schema/field_count.hpp"

namespace kvrt::codec {
namespace {

using detail::read_all;
using detail::read_digest;
using detail::read_enum;
using detail::ReadContext;
using detail::text;

// Wire enum ordinals must equal the C++ values (both travel as numbers).
static_assert(uint16_t(wire::LogitsPath::LOGITS_REQUIRED) == uint8_t(LogitsPath::logits_required));
static_assert(uint16_t(wire::LogitsPath::NO_LOGITS) == uint8_t(LogitsPath::no_logits));
static_assert(kLogitsPathMax == uint8_t(LogitsPath::no_logits));
static_assert(uint16_t(wire::ReuseSource::PREFIX_INDEX) == uint8_t(ReuseSource::prefix_index));
static_assert(uint16_t(wire::ReuseSource::RADIX_INDEX) == uint8_t(ReuseSource::radix_index));
static_assert(uint16_t(wire::ReuseSource::PROMPT_MODULE) == uint8_t(ReuseSource::prompt_module));
static_assert(uint16_t(wire::ReuseSource::SESSION) == uint8_t(ReuseSource::session));
static_assert(kReuseSourceMax == uint8_t(ReuseSource::session));

// A field added to a core type must be added to the schema and to both
// directions below; these counts make the build say so.
static_assert(detail::field_count<MatchedBlockBundle>() == 2, "update reuse.capnp MatchedBlockBundle");
static_assert(detail::field_count<PrefixMatchReceipt>() == 21, "update reuse.capnp PrefixMatchReceipt");
static_assert(detail::field_count<RadixSchedulerHandoffReceipt>() == 17,
              "update reuse.capnp RadixSchedulerHandoffReceipt");
static_assert(detail::field_count<PhysicalRef>() == 4, "update common.capnp PhysicalRef");
static_assert(detail::field_count<PromptModuleReceipt>() == 11, "update reuse.capnp PromptModuleReceipt");
static_assert(detail::field_count<TokenInterval>() == 2, "update common.capnp TokenInterval");
static_assert(detail::field_count<SessionReuseReceipt>() == 12, "update reuse.capnp SessionReuseReceipt");
static_assert(detail::field_count<PoolGenerationRef>() == 2, "update reuse.capnp PoolGenerationRef");
static_assert(detail::field_count<ExecutableReuseReceipt>() == 19, "update reuse.capnp ExecutableReuseReceipt");

// Lists of 64-bit strong ids (slot ids, node ids, leases).
template <class Id, class ListBuilder>
void write_ids(ListBuilder list, const std::vector<Id>& ids) {
  for (unsigned i = 0; i < list.size(); ++i) list.set(i, ids[i].value);
}
template <class Id, class ListReader>
std::vector<Id> read_ids(ListReader list) {
  std::vector<Id> out;
  out.reserve(list.size());
  for (auto v : list) out.push_back(Id{v});
  return out;
}

}  // namespace

// PrefixMatchReceipt is also an outcome of the node protocol's
// PrefixBatchReceipt (codec_parts.hpp).
namespace detail {

void write(wire::PrefixMatchReceipt::Builder b, const PrefixMatchReceipt& v) {
  b.setRequestId(v.request_id.value);
  b.setRequestGeneration(v.request_generation.value);
  b.setIndexSnapshotId(v.index_snapshot_id.value);
  b.setIndexPublicationGeneration(v.index_publication_generation);
  b.setCompatibilityManifestSha256(detail::data(v.compatibility_manifest_sha256));
  b.setNamespaceId(text(v.namespace_id));
  b.setNamespaceGeneration(v.namespace_generation.value);
  b.setPolicyId(text(v.policy_id));
  b.setAlignmentTokens(v.alignment_tokens);
  b.setLogitsPath(static_cast<wire::LogitsPath>(v.logits_path));
  b.setPromptTokens(v.prompt_tokens);
  b.setSemanticMatchTokens(v.semantic_match_tokens);
  b.setIndexedMatchTokens(v.indexed_match_tokens);
  b.setReuseCapTokens(v.reuse_cap_tokens);
  b.setRuntimeHitTokens(v.runtime_hit_tokens);
  b.setPromptRowsRecomputed(v.prompt_rows_recomputed);
  auto bundles = b.initMatchedGroupHandles(detail::list_size(v.matched_group_handles.size()));
  for (unsigned i = 0; i < bundles.size(); ++i) {
    const auto& m = v.matched_group_handles[i];
    bundles[i].setLogicalBlock(m.logical_block);
    detail::write_handles(bundles[i].initHandles(detail::list_size(m.handles.size())), m.handles);
  }
  b.setNewBlockBundles(v.new_block_bundles);
  b.setCopyValidPartialRows(v.copy_valid_partial_rows);
  b.setLeaseId(v.lease_id.value);
  b.setReceiptSha256(detail::data(v.receipt_sha256));
}

Status read(ReadContext& ctx, wire::PrefixMatchReceipt::Reader r, PrefixMatchReceipt& out) {
  out.request_id = RequestId{r.getRequestId()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  out.index_snapshot_id = IndexSnapshotId{r.getIndexSnapshotId()};
  out.index_publication_generation = r.getIndexPublicationGeneration();
  ctx.at("compatibility_manifest_sha256");
  KVRT_TRY(read_digest(ctx, "compatibility_manifest_sha256", r.getCompatibilityManifestSha256(),
                       out.compatibility_manifest_sha256));
  ctx.at("namespace_id");
  out.namespace_id = detail::to_string(r.getNamespaceId());
  out.namespace_generation = NamespaceGeneration{r.getNamespaceGeneration()};
  ctx.at("policy_id");
  out.policy_id = detail::to_string(r.getPolicyId());
  out.alignment_tokens = r.getAlignmentTokens();
  KVRT_TRY(read_enum(ctx, "logits_path", r.getLogitsPath(), kLogitsPathMax, out.logits_path));
  out.prompt_tokens = r.getPromptTokens();
  out.semantic_match_tokens = r.getSemanticMatchTokens();
  out.indexed_match_tokens = r.getIndexedMatchTokens();
  out.reuse_cap_tokens = r.getReuseCapTokens();
  out.runtime_hit_tokens = r.getRuntimeHitTokens();
  out.prompt_rows_recomputed = r.getPromptRowsRecomputed();
  ctx.at("matched_group_handles");
  auto bundles = r.getMatchedGroupHandles();
  out.matched_group_handles.reserve(bundles.size());
  for (auto m : bundles) {
    ctx.at("matched_group_handles.handles");
    out.matched_group_handles.push_back(MatchedBlockBundle{m.getLogicalBlock(), read_all(m.getHandles())});
  }
  out.new_block_bundles = r.getNewBlockBundles();
  out.copy_valid_partial_rows = r.getCopyValidPartialRows();
  out.lease_id = LeaseId{r.getLeaseId()};
  ctx.at("receipt_sha256");
  return read_digest(ctx, "receipt_sha256", r.getReceiptSha256(), out.receipt_sha256);
}

}  // namespace detail

namespace {

void write(wire::RadixSchedulerHandoffReceipt::Builder b, const RadixSchedulerHandoffReceipt& v) {
  b.setRequestId(v.request_id.value);
  b.setRequestGeneration(v.request_generation.value);
  b.setTreeVersion(v.tree_version.value);
  b.setTreeStateSha256(detail::data(v.tree_state_sha256));
  b.setPromptTokens(v.prompt_tokens);
  b.setMatchedTokens(v.matched_tokens);
  write_ids(b.initPrefixSlotIds(detail::list_size(v.prefix_slot_ids.size())), v.prefix_slot_ids);
  write_ids(b.initPathNodeIds(detail::list_size(v.path_node_ids.size())), v.path_node_ids);
  b.setTerminalNodeId(v.terminal_node_id.value);
  detail::write(b.initSuffixInterval(), v.suffix_interval);
  b.setLockLeaseId(v.lock_lease_id.value);
  b.setLockRequiredUntilSchedulerDisposition(v.lock_required_until_scheduler_disposition);
  b.setFreePrivateTailSlots(v.free_private_tail_slots);
  b.setNewUsefulKvBytes(v.new_useful_kv_bytes);
  b.setNewPhysicalBlocks(v.new_physical_blocks);
  b.setNewPhysicalCapacityBytes(v.new_physical_capacity_bytes);
  b.setReceiptSha256(detail::data(v.receipt_sha256));
}

Status read(ReadContext& ctx, wire::RadixSchedulerHandoffReceipt::Reader r, RadixSchedulerHandoffReceipt& out) {
  out.request_id = RequestId{r.getRequestId()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  out.tree_version = TreeVersion{r.getTreeVersion()};
  ctx.at("tree_state_sha256");
  KVRT_TRY(read_digest(ctx, "tree_state_sha256", r.getTreeStateSha256(), out.tree_state_sha256));
  out.prompt_tokens = r.getPromptTokens();
  out.matched_tokens = r.getMatchedTokens();
  ctx.at("prefix_slot_ids");
  out.prefix_slot_ids = read_ids<TokenSlotId>(r.getPrefixSlotIds());
  ctx.at("path_node_ids");
  out.path_node_ids = read_ids<RadixNodeId>(r.getPathNodeIds());
  out.terminal_node_id = RadixNodeId{r.getTerminalNodeId()};
  ctx.at("suffix_interval");
  out.suffix_interval = detail::read(r.getSuffixInterval());
  out.lock_lease_id = LeaseId{r.getLockLeaseId()};
  out.lock_required_until_scheduler_disposition = r.getLockRequiredUntilSchedulerDisposition();
  out.free_private_tail_slots = r.getFreePrivateTailSlots();
  out.new_useful_kv_bytes = r.getNewUsefulKvBytes();
  out.new_physical_blocks = r.getNewPhysicalBlocks();
  out.new_physical_capacity_bytes = r.getNewPhysicalCapacityBytes();
  ctx.at("receipt_sha256");
  return read_digest(ctx, "receipt_sha256", r.getReceiptSha256(), out.receipt_sha256);
}

void write(wire::PromptModuleReceipt::Builder b, const PromptModuleReceipt& v) {
  b.setSchemaId(text(v.schema_id));
  b.setSchemaGeneration(v.schema_generation);
  b.setModuleId(text(v.module_id));
  b.setModuleParametersDigest(detail::data(v.module_parameters_digest));
  auto tokens = b.initTokenIds(detail::list_size(v.token_ids.size()));
  for (unsigned i = 0; i < tokens.size(); ++i) tokens.set(i, v.token_ids[i]);
  auto positions = b.initPositionIds(detail::list_size(v.position_ids.size()));
  for (unsigned i = 0; i < positions.size(); ++i) positions.set(i, v.position_ids[i]);
  b.setSemanticManifestDigest(detail::data(v.semantic_manifest_digest));
  b.setLayoutManifestDigest(detail::data(v.layout_manifest_digest));
  b.setNamespaceId(text(v.namespace_id));
  b.setNamespaceGeneration(v.namespace_generation.value);
  detail::write_handles(b.initPhysicalRefs(detail::list_size(v.physical_refs.size())), v.physical_refs);
}

Status read(ReadContext& ctx, wire::PromptModuleReceipt::Reader r, PromptModuleReceipt& out) {
  ctx.at("schema_id");
  out.schema_id = detail::to_string(r.getSchemaId());
  out.schema_generation = r.getSchemaGeneration();
  ctx.at("module_id");
  out.module_id = detail::to_string(r.getModuleId());
  ctx.at("module_parameters_digest");
  KVRT_TRY(read_digest(ctx, "module_parameters_digest", r.getModuleParametersDigest(), out.module_parameters_digest));
  ctx.at("token_ids");
  auto tokens = r.getTokenIds();
  out.token_ids = detail::read_u32s(tokens);
  ctx.at("position_ids");
  auto positions = r.getPositionIds();
  out.position_ids = detail::read_u32s(positions);
  ctx.at("semantic_manifest_digest");
  KVRT_TRY(read_digest(ctx, "semantic_manifest_digest", r.getSemanticManifestDigest(), out.semantic_manifest_digest));
  ctx.at("layout_manifest_digest");
  KVRT_TRY(read_digest(ctx, "layout_manifest_digest", r.getLayoutManifestDigest(), out.layout_manifest_digest));
  ctx.at("namespace_id");
  out.namespace_id = detail::to_string(r.getNamespaceId());
  out.namespace_generation = NamespaceGeneration{r.getNamespaceGeneration()};
  ctx.at("physical_refs");
  out.physical_refs = read_all(r.getPhysicalRefs());
  return Status::success();
}

void write(wire::SessionReuseReceipt::Builder b, const SessionReuseReceipt& v) {
  b.setSessionId(text(v.session_id));
  b.setTenantId(text(v.tenant_id));
  b.setNamespaceId(text(v.namespace_id));
  b.setNamespaceGeneration(v.namespace_generation.value);
  b.setSemanticDigest(detail::data(v.semantic_digest));
  b.setLayoutDigest(detail::data(v.layout_digest));
  detail::write(b.initCoveredInterval(), v.covered_interval);
  b.setCoveredTokensDigest(detail::data(v.covered_tokens_digest));
  b.setPositionTruncationContract(text(v.position_truncation_contract));
  b.setPublicationGeneration(v.publication_generation);
  b.setSourceTierObjectId(text(v.source_tier_object_id));
  b.setResumePrefillTokens(v.resume_prefill_tokens);
}

Status read(ReadContext& ctx, wire::SessionReuseReceipt::Reader r, SessionReuseReceipt& out) {
  ctx.at("session_id");
  out.session_id = detail::to_string(r.getSessionId());
  ctx.at("tenant_id");
  out.tenant_id = detail::to_string(r.getTenantId());
  ctx.at("namespace_id");
  out.namespace_id = detail::to_string(r.getNamespaceId());
  out.namespace_generation = NamespaceGeneration{r.getNamespaceGeneration()};
  ctx.at("semantic_digest");
  KVRT_TRY(read_digest(ctx, "semantic_digest", r.getSemanticDigest(), out.semantic_digest));
  ctx.at("layout_digest");
  KVRT_TRY(read_digest(ctx, "layout_digest", r.getLayoutDigest(), out.layout_digest));
  ctx.at("covered_interval");
  out.covered_interval = detail::read(r.getCoveredInterval());
  ctx.at("covered_tokens_digest");
  KVRT_TRY(read_digest(ctx, "covered_tokens_digest", r.getCoveredTokensDigest(), out.covered_tokens_digest));
  ctx.at("position_truncation_contract");
  out.position_truncation_contract = detail::to_string(r.getPositionTruncationContract());
  out.publication_generation = r.getPublicationGeneration();
  ctx.at("source_tier_object_id");
  out.source_tier_object_id = detail::to_string(r.getSourceTierObjectId());
  out.resume_prefill_tokens = r.getResumePrefillTokens();
  return Status::success();
}

}  // namespace

// ExecutableReuseReceipt is also an outcome of the node protocol's
// ReuseBatchReceipt (codec_parts.hpp).
namespace detail {

void write(wire::ExecutableReuseReceipt::Builder b, const ExecutableReuseReceipt& v) {
  b.setRequestId(v.request_id.value);
  b.setRequestGeneration(v.request_generation.value);
  b.setSource(static_cast<wire::ReuseSource>(v.source));
  b.setNamespaceId(text(v.namespace_id));
  b.setNamespaceGeneration(v.namespace_generation.value);
  b.setSemanticDigest(detail::data(v.semantic_digest));
  b.setLayoutDigest(detail::data(v.layout_digest));
  b.setIndexVersion(v.index_version);
  b.setTreeVersion(v.tree_version.value);
  auto pools = b.initPoolGenerations(detail::list_size(v.pool_generations.size()));
  for (unsigned i = 0; i < pools.size(); ++i) {
    pools[i].setPool(v.pool_generations[i].pool.value);
    pools[i].setGeneration(v.pool_generations[i].generation.value);
  }
  detail::write(b.initCoveredInterval(), v.covered_interval);
  detail::write_handles(b.initPhysicalHandles(detail::list_size(v.physical_handles.size())), v.physical_handles);
  write_ids(b.initPathNodeIds(detail::list_size(v.path_node_ids.size())), v.path_node_ids);
  write_ids(b.initLeases(detail::list_size(v.leases.size())), v.leases);
  b.setCollisionWitnessVerified(v.collision_witness_verified);
  b.setRequiredFrontierTokens(v.required_frontier_tokens);
  b.setReadyFrontierTokens(v.ready_frontier_tokens);
  b.setExecutionSnapshotVersion(v.execution_snapshot_version.value);
  b.setKernelAbiId(text(v.kernel_abi_id));
}

Status read(ReadContext& ctx, wire::ExecutableReuseReceipt::Reader r, ExecutableReuseReceipt& out) {
  out.request_id = RequestId{r.getRequestId()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  KVRT_TRY(read_enum(ctx, "source", r.getSource(), kReuseSourceMax, out.source));
  ctx.at("namespace_id");
  out.namespace_id = detail::to_string(r.getNamespaceId());
  out.namespace_generation = NamespaceGeneration{r.getNamespaceGeneration()};
  ctx.at("semantic_digest");
  KVRT_TRY(read_digest(ctx, "semantic_digest", r.getSemanticDigest(), out.semantic_digest));
  ctx.at("layout_digest");
  KVRT_TRY(read_digest(ctx, "layout_digest", r.getLayoutDigest(), out.layout_digest));
  out.index_version = r.getIndexVersion();
  out.tree_version = TreeVersion{r.getTreeVersion()};
  ctx.at("pool_generations");
  auto pools = r.getPoolGenerations();
  out.pool_generations.reserve(pools.size());
  for (auto p : pools)
    out.pool_generations.push_back(PoolGenerationRef{PoolId{p.getPool()}, PoolGeneration{p.getGeneration()}});
  ctx.at("covered_interval");
  out.covered_interval = detail::read(r.getCoveredInterval());
  ctx.at("physical_handles");
  out.physical_handles = read_all(r.getPhysicalHandles());
  ctx.at("path_node_ids");
  out.path_node_ids = read_ids<RadixNodeId>(r.getPathNodeIds());
  ctx.at("leases");
  out.leases = read_ids<LeaseId>(r.getLeases());
  out.collision_witness_verified = r.getCollisionWitnessVerified();
  out.required_frontier_tokens = r.getRequiredFrontierTokens();
  out.ready_frontier_tokens = r.getReadyFrontierTokens();
  out.execution_snapshot_version = ExecutionSnapshotVersion{r.getExecutionSnapshotVersion()};
  ctx.at("kernel_abi_id");
  out.kernel_abi_id = detail::to_string(r.getKernelAbiId());
  return Status::success();
}

}  // namespace detail

std::vector<uint8_t> encode(const PrefixMatchReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { detail::write(e.initPrefixMatchReceipt(), value); });
}
std::vector<uint8_t> encode(const RadixSchedulerHandoffReceipt& value) {
  return detail::encode_envelope(
      [&](wire::Envelope::Builder e) { write(e.initRadixSchedulerHandoffReceipt(), value); });
}
std::vector<uint8_t> encode(const PromptModuleReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initPromptModuleReceipt(), value); });
}
std::vector<uint8_t> encode(const SessionReuseReceipt& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initSessionReuseReceipt(), value); });
}
std::vector<uint8_t> encode(const ExecutableReuseReceipt& value) {
  return detail::encode_envelope(
      [&](wire::Envelope::Builder e) { detail::write(e.initExecutableReuseReceipt(), value); });
}

template <>
Result<PrefixMatchReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<PrefixMatchReceipt>(
      bytes, limits, wire::Envelope::PREFIX_MATCH_RECEIPT, "PrefixMatchReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, PrefixMatchReceipt& out) {
        return detail::read(ctx, e.getPrefixMatchReceipt(), out);
      });
}
template <>
Result<RadixSchedulerHandoffReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<RadixSchedulerHandoffReceipt>(
      bytes, limits, wire::Envelope::RADIX_SCHEDULER_HANDOFF_RECEIPT, "RadixSchedulerHandoffReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, RadixSchedulerHandoffReceipt& out) {
        return read(ctx, e.getRadixSchedulerHandoffReceipt(), out);
      });
}
template <>
Result<PromptModuleReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<PromptModuleReceipt>(
      bytes, limits, wire::Envelope::PROMPT_MODULE_RECEIPT, "PromptModuleReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, PromptModuleReceipt& out) {
        return read(ctx, e.getPromptModuleReceipt(), out);
      });
}
template <>
Result<SessionReuseReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<SessionReuseReceipt>(
      bytes, limits, wire::Envelope::SESSION_REUSE_RECEIPT, "SessionReuseReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, SessionReuseReceipt& out) {
        return read(ctx, e.getSessionReuseReceipt(), out);
      });
}
template <>
Result<ExecutableReuseReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ExecutableReuseReceipt>(
      bytes, limits, wire::Envelope::EXECUTABLE_REUSE_RECEIPT, "ExecutableReuseReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, ExecutableReuseReceipt& out) {
        return detail::read(ctx, e.getExecutableReuseReceipt(), out);
      });
}

}  // namespace kvrt::codec
