// Codec for the identity records of spec 0x01A: CacheLayoutManifest,
// CacheCompatibilityManifest and CacheIsolationNamespace.
#include "schema/codec_support.hpp"
#include "schema/field_count.hpp"
#include "schema/identity.capnp.h"

namespace kvrt::codec {
namespace {

using detail::read_enum;
using detail::ReadContext;
using detail::text;

// Wire enum ordinals must equal the C++ values (both travel as numbers).
static_assert(uint16_t(wire::ScalarType::FP32) == uint8_t(ScalarType::fp32));
static_assert(uint16_t(wire::ScalarType::FP16) == uint8_t(ScalarType::fp16));
static_assert(uint16_t(wire::ScalarType::BF16) == uint8_t(ScalarType::bf16));
static_assert(uint16_t(wire::ScalarType::FP8_E4M3) == uint8_t(ScalarType::fp8_e4m3));
static_assert(uint16_t(wire::ScalarType::INT8) == uint8_t(ScalarType::int8));
constexpr uint8_t kScalarTypeMax = uint8_t(ScalarType::int8);
static_assert(uint16_t(wire::PhysicalMode::RECTANGULAR) == uint8_t(PhysicalMode::rectangular));
static_assert(uint16_t(wire::PhysicalMode::PAGED_BLOCKS) == uint8_t(PhysicalMode::paged_blocks));
static_assert(uint16_t(wire::PhysicalMode::VIRTUAL_PAGES) == uint8_t(PhysicalMode::virtual_pages));
constexpr uint8_t kPhysicalModeMax = uint8_t(PhysicalMode::virtual_pages);
static_assert(uint16_t(wire::TensorAxis::LAYER_LOCAL) == uint8_t(TensorAxis::layer_local));
static_assert(uint16_t(wire::TensorAxis::PHYSICAL_SLOT) == uint8_t(TensorAxis::physical_slot));
static_assert(uint16_t(wire::TensorAxis::TOKEN_OFFSET) == uint8_t(TensorAxis::token_offset));
static_assert(uint16_t(wire::TensorAxis::KV_HEAD) == uint8_t(TensorAxis::kv_head));
static_assert(uint16_t(wire::TensorAxis::HEAD_DIM) == uint8_t(TensorAxis::head_dim));
constexpr uint8_t kTensorAxisMax = uint8_t(TensorAxis::head_dim);
static_assert(kTensorAxisMax + 1 == kTensorAxisCount);
static_assert(uint16_t(wire::HashFamily::SHA256) == uint8_t(HashFamily::sha256));
static_assert(uint16_t(wire::HashFamily::XXH3_BITS128) == uint8_t(HashFamily::xxh3_128));
constexpr uint8_t kHashFamilyMax = uint8_t(HashFamily::xxh3_128);
static_assert(uint16_t(wire::PublicationPolicy::PRIVATE_TO_REQUEST) == uint8_t(PublicationPolicy::private_to_request));
static_assert(uint16_t(wire::PublicationPolicy::TENANT_SHARED) == uint8_t(PublicationPolicy::tenant_shared));
static_assert(uint16_t(wire::PublicationPolicy::DEPLOYMENT_SHARED) == uint8_t(PublicationPolicy::deployment_shared));
constexpr uint8_t kPublicationPolicyMax = uint8_t(PublicationPolicy::deployment_shared);
static_assert(uint16_t(wire::SideInputKind::MULTIMODAL_FEATURE) == uint8_t(SideInputKind::multimodal_feature));
static_assert(uint16_t(wire::SideInputKind::PROMPT_EMBEDDING) == uint8_t(SideInputKind::prompt_embedding));
constexpr uint8_t kSideInputKindMax = uint8_t(SideInputKind::prompt_embedding);

// A field added to a core type must be added to the schema and to both
// directions below; these counts make the build say so.
static_assert(detail::field_count<CacheGroupLayout>() == 9, "update identity.capnp CacheGroupLayout and this codec");
static_assert(detail::field_count<CacheLayoutManifest>() == 17,
              "update identity.capnp CacheLayoutManifest and this codec");
static_assert(detail::field_count<CacheIsolationNamespace>() == 6,
              "update identity.capnp CacheIsolationNamespace and this codec");
static_assert(detail::field_count<SideInputIdentity>() == 4, "update identity.capnp SideInputIdentity and this codec");
static_assert(detail::field_count<CacheCompatibilityManifest>() == 16,
              "update identity.capnp CacheCompatibilityManifest and this codec");

void write(wire::CacheGroupLayout::Builder b, const CacheGroupLayout& v) {
  b.setGroupId(v.group_id.value);
  b.setLayerStart(v.layer_start);
  b.setLayerEnd(v.layer_end);
  b.setKvHeadsLocal(v.kv_heads_local);
  b.setHeadDim(v.head_dim);
  b.setKDtype(static_cast<wire::ScalarType>(v.k_dtype));
  b.setVDtype(static_cast<wire::ScalarType>(v.v_dtype));
  auto axes = b.initAxisOrder(detail::list_size(v.axis_order.size()));
  for (unsigned i = 0; i < axes.size(); ++i) axes.set(i, static_cast<wire::TensorAxis>(v.axis_order[i]));
  b.setStrideIdentity(text(v.stride_identity));
}

Status read(ReadContext& ctx, wire::CacheGroupLayout::Reader r, CacheGroupLayout& out) {
  out.group_id = CacheGroupId{r.getGroupId()};
  out.layer_start = r.getLayerStart();
  out.layer_end = r.getLayerEnd();
  out.kv_heads_local = r.getKvHeadsLocal();
  out.head_dim = r.getHeadDim();
  KVRT_TRY(read_enum(ctx, "cache_groups.k_dtype", r.getKDtype(), kScalarTypeMax, out.k_dtype));
  KVRT_TRY(read_enum(ctx, "cache_groups.v_dtype", r.getVDtype(), kScalarTypeMax, out.v_dtype));
  ctx.at("cache_groups.axis_order");
  auto axes = r.getAxisOrder();
  out.axis_order.resize(axes.size());
  for (unsigned i = 0; i < axes.size(); ++i)
    KVRT_TRY(read_enum(ctx, "cache_groups.axis_order", axes[i], kTensorAxisMax, out.axis_order[i]));
  ctx.at("cache_groups.stride_identity");
  out.stride_identity = detail::to_string(r.getStrideIdentity());
  return Status::success();
}

void write(wire::CacheLayoutManifest::Builder b, const CacheLayoutManifest& v) {
  b.setSchemaVersion(v.schema_version);
  b.setManifestId(text(v.manifest_id));
  b.setLogicalCacheAbiSha256(text(v.logical_cache_abi_sha256));
  b.setModelGeneration(v.model_generation);
  auto groups = b.initCacheGroups(detail::list_size(v.cache_groups.size()));
  for (unsigned i = 0; i < groups.size(); ++i) write(groups[i], v.cache_groups[i]);
  b.setPhysicalMode(static_cast<wire::PhysicalMode>(v.physical_mode));
  b.setAllocatorBlockSize(v.allocator_block_size);
  b.setKernelBlockSize(v.kernel_block_size);
  b.setHashBlockSize(v.hash_block_size);
  b.setSchedulerBlockSize(v.scheduler_block_size);
  b.setPhysicalPageBytes(v.physical_page_bytes);
  b.setTpWorldSize(v.tp_world_size);
  b.setTpRank(v.tp_rank);
  b.setQuantizationSchema(text(v.quantization_schema));
  b.setPositionContractId(text(v.position_contract_id));
  b.setAllocatorRevision(v.allocator_revision);
  b.setHashFamily(static_cast<wire::HashFamily>(v.hash_family));
}

Status read(ReadContext& ctx, wire::CacheLayoutManifest::Reader r, CacheLayoutManifest& out) {
  out.schema_version = r.getSchemaVersion();
  ctx.at("manifest_id");
  out.manifest_id = detail::to_string(r.getManifestId());
  ctx.at("logical_cache_abi_sha256");
  out.logical_cache_abi_sha256 = detail::to_string(r.getLogicalCacheAbiSha256());
  out.model_generation = r.getModelGeneration();
  ctx.at("cache_groups");
  auto groups = r.getCacheGroups();
  out.cache_groups.resize(groups.size());
  for (unsigned i = 0; i < groups.size(); ++i) KVRT_TRY(read(ctx, groups[i], out.cache_groups[i]));
  KVRT_TRY(read_enum(ctx, "physical_mode", r.getPhysicalMode(), kPhysicalModeMax, out.physical_mode));
  out.allocator_block_size = r.getAllocatorBlockSize();
  out.kernel_block_size = r.getKernelBlockSize();
  out.hash_block_size = r.getHashBlockSize();
  out.scheduler_block_size = r.getSchedulerBlockSize();
  out.physical_page_bytes = r.getPhysicalPageBytes();
  out.tp_world_size = r.getTpWorldSize();
  out.tp_rank = r.getTpRank();
  ctx.at("quantization_schema");
  out.quantization_schema = detail::to_string(r.getQuantizationSchema());
  ctx.at("position_contract_id");
  out.position_contract_id = detail::to_string(r.getPositionContractId());
  out.allocator_revision = r.getAllocatorRevision();
  KVRT_TRY(read_enum(ctx, "hash_family", r.getHashFamily(), kHashFamilyMax, out.hash_family));
  return Status::success();
}

void write(wire::CacheIsolationNamespace::Builder b, const CacheIsolationNamespace& v) {
  b.setDeploymentNamespace(text(v.deployment_namespace));
  b.setTenantId(text(v.tenant_id));
  b.setGeneration(v.generation.value);
  b.setCacheSalt(text(v.cache_salt));
  b.setModelCacheGeneration(v.model_cache_generation);
  b.setPublicationPolicy(static_cast<wire::PublicationPolicy>(v.publication_policy));
}

Status read(ReadContext& ctx, wire::CacheIsolationNamespace::Reader r, CacheIsolationNamespace& out) {
  ctx.at("deployment_namespace");
  out.deployment_namespace = detail::to_string(r.getDeploymentNamespace());
  ctx.at("tenant_id");
  out.tenant_id = detail::to_string(r.getTenantId());
  out.generation = NamespaceGeneration{r.getGeneration()};
  ctx.at("cache_salt");
  out.cache_salt = detail::to_string(r.getCacheSalt());
  out.model_cache_generation = r.getModelCacheGeneration();
  return read_enum(ctx, "publication_policy", r.getPublicationPolicy(), kPublicationPolicyMax, out.publication_policy);
}

void write(wire::CacheCompatibilityManifest::Builder b, const CacheCompatibilityManifest& v) {
  b.setCacheAbiSha256(text(v.cache_abi_sha256));
  b.setCacheLayoutSha256(detail::data(v.cache_layout_sha256));
  b.setModelGeneration(v.model_generation);
  b.setAdapterIdentity(text(v.adapter_identity));
  b.setWeightTransformIdentity(text(v.weight_transform_identity));
  b.setPositionContractSha256(text(v.position_contract_sha256));
  auto tokens = b.initCoveredTokenIds(detail::list_size(v.covered_token_ids.size()));
  for (unsigned i = 0; i < tokens.size(); ++i) tokens.set(i, v.covered_token_ids[i]);
  auto side = b.initInputSideData(detail::list_size(v.input_side_data.size()));
  for (unsigned i = 0; i < side.size(); ++i) {
    const auto& s = v.input_side_data[i];
    side[i].setKind(static_cast<wire::SideInputKind>(s.kind));
    side[i].setIdentity(text(s.identity));
    side[i].setTokenOffset(s.token_offset);
    side[i].setTokenCount(s.token_count);
  }
  b.setCacheIsolationNamespace(text(v.cache_isolation_namespace));
  b.setNamespaceGeneration(v.namespace_generation.value);
  b.setCacheSalt(text(v.cache_salt));
  b.setPublicationGeneration(v.publication_generation);
  b.setTokenizerRevision(text(v.tokenizer_revision));
  b.setChatTemplateRevision(text(v.chat_template_revision));
  b.setRequestId(text(v.request_id));
  b.setSamplingPolicy(text(v.sampling_policy));
}

Status read(ReadContext& ctx, wire::CacheCompatibilityManifest::Reader r, CacheCompatibilityManifest& out) {
  ctx.at("cache_abi_sha256");
  out.cache_abi_sha256 = detail::to_string(r.getCacheAbiSha256());
  ctx.at("cache_layout_sha256");
  KVRT_TRY(detail::read_digest(ctx, "cache_layout_sha256", r.getCacheLayoutSha256(), out.cache_layout_sha256));
  out.model_generation = r.getModelGeneration();
  ctx.at("adapter_identity");
  out.adapter_identity = detail::to_string(r.getAdapterIdentity());
  ctx.at("weight_transform_identity");
  out.weight_transform_identity = detail::to_string(r.getWeightTransformIdentity());
  ctx.at("position_contract_sha256");
  out.position_contract_sha256 = detail::to_string(r.getPositionContractSha256());
  ctx.at("covered_token_ids");
  auto tokens = r.getCoveredTokenIds();
  out.covered_token_ids = detail::read_u32s(tokens);
  ctx.at("input_side_data");
  auto side = r.getInputSideData();
  out.input_side_data.resize(side.size());
  for (unsigned i = 0; i < side.size(); ++i) {
    auto& s = out.input_side_data[i];
    KVRT_TRY(read_enum(ctx, "input_side_data.kind", side[i].getKind(), kSideInputKindMax, s.kind));
    ctx.at("input_side_data.identity");
    s.identity = detail::to_string(side[i].getIdentity());
    s.token_offset = side[i].getTokenOffset();
    s.token_count = side[i].getTokenCount();
  }
  ctx.at("cache_isolation_namespace");
  out.cache_isolation_namespace = detail::to_string(r.getCacheIsolationNamespace());
  out.namespace_generation = NamespaceGeneration{r.getNamespaceGeneration()};
  ctx.at("cache_salt");
  out.cache_salt = detail::to_string(r.getCacheSalt());
  out.publication_generation = r.getPublicationGeneration();
  ctx.at("tokenizer_revision");
  out.tokenizer_revision = detail::to_string(r.getTokenizerRevision());
  ctx.at("chat_template_revision");
  out.chat_template_revision = detail::to_string(r.getChatTemplateRevision());
  ctx.at("request_id");
  out.request_id = detail::to_string(r.getRequestId());
  ctx.at("sampling_policy");
  out.sampling_policy = detail::to_string(r.getSamplingPolicy());
  return Status::success();
}

}  // namespace

std::vector<uint8_t> encode(const CacheLayoutManifest& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initCacheLayoutManifest(), value); });
}
std::vector<uint8_t> encode(const CacheCompatibilityManifest& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initCacheCompatibilityManifest(), value); });
}
std::vector<uint8_t> encode(const CacheIsolationNamespace& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder e) { write(e.initCacheIsolationNamespace(), value); });
}

template <>
Result<CacheLayoutManifest> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<CacheLayoutManifest>(
      bytes, limits, wire::Envelope::CACHE_LAYOUT_MANIFEST, "CacheLayoutManifest",
      [](ReadContext& ctx, wire::Envelope::Reader e, CacheLayoutManifest& out) {
        return read(ctx, e.getCacheLayoutManifest(), out);
      });
}
template <>
Result<CacheCompatibilityManifest> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<CacheCompatibilityManifest>(
      bytes, limits, wire::Envelope::CACHE_COMPATIBILITY_MANIFEST, "CacheCompatibilityManifest",
      [](ReadContext& ctx, wire::Envelope::Reader e, CacheCompatibilityManifest& out) {
        return read(ctx, e.getCacheCompatibilityManifest(), out);
      });
}
template <>
Result<CacheIsolationNamespace> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<CacheIsolationNamespace>(
      bytes, limits, wire::Envelope::CACHE_ISOLATION_NAMESPACE, "CacheIsolationNamespace",
      [](ReadContext& ctx, wire::Envelope::Reader e, CacheIsolationNamespace& out) {
        return read(ctx, e.getCacheIsolationNamespace(), out);
      });
}

}  // namespace kvrt::codec
