#pragma once
// Fully populated values of every type the codec carries: every field is set
// to a value different from its default (numbers distinct and non-zero, enums
// not their first enumerant, strings non-empty and awkward, lists non-empty),
// so that a round trip compared with operator== proves each field travels.
// filled<T>(seed) varies the numbers with the seed. Also: the list of codec
// types and the safety contract every malformed input must meet.
#include <catch2/catch.hpp>
#include <cstdint>
#include <span>
#include <string>

#include "schema/codecs.hpp"
#include "services/mapper/mapped_frontier_receipt.hpp"
#include "services/prefix/prefix_match_receipt.hpp"
#include "tests/spec_lab/radix_handoff_receipt.hpp"

namespace kvrt::test {

// Hands out distinct non-zero numbers so that two fields swapped by a codec
// bug never compare equal by accident.
class Numbers {
 public:
  explicit Numbers(uint64_t seed) : next_(seed * 1000 + 1) {}
  uint32_t u32() { return static_cast<uint32_t>(next_++); }
  uint64_t u64() { return (uint64_t{1} << 40) + next_++; }  // above 32 bits: catches truncation
  Sha256Digest digest() {
    Sha256Digest d;
    const uint64_t base = next_++;
    for (size_t i = 0; i < d.bytes.size(); ++i) d.bytes[i] = static_cast<uint8_t>(base * 31 + i * 7 + 1);
    return d;
  }
  StateDigest state_digest() { return StateDigest{u64(), u64()}; }
  std::string text(const char* stem) {
    // Embedded NUL, UTF-8 and a number: text is bytes with a length, not a C string.
    return std::string(stem) + std::string("\0\xce\xbb-", 4) + std::to_string(next_++);
  }
  PhysicalBlockHandle handle() {
    return {PoolId{u32()}, CacheGroupId{u32()}, PhysicalBlockId{u32()}, BlockGeneration{u32()}};
  }
  PhysicalRef ref() { return {CacheGroupId{u32()}, PoolId{u32()}, PoolGeneration{u32()}, PhysicalBlockId{u32()}}; }

 private:
  uint64_t next_;
};

template <class T>
T filled(uint64_t seed = 1);

template <>
inline ErrorMessage filled(uint64_t seed) {
  Numbers n(seed);
  return ErrorMessage{Error{ErrorCode::stale_table_version, n.text("reason"), n.text("field")}};
}

template <>
inline CacheLayoutManifest filled(uint64_t seed) {
  Numbers n(seed);
  CacheLayoutManifest m;
  m.schema_version = n.u32();
  m.manifest_id = n.text("manifest");
  m.logical_cache_abi_sha256 = n.text("abi");
  m.model_generation = n.u64();
  for (int g = 0; g < 2; ++g) {
    CacheGroupLayout group;
    group.group_id = CacheGroupId{n.u32()};
    group.layer_start = n.u32();
    group.layer_end = n.u32();
    group.kv_heads_local = n.u32();
    group.head_dim = n.u32();
    group.k_dtype = g == 0 ? ScalarType::bf16 : ScalarType::int8;
    group.v_dtype = g == 0 ? ScalarType::fp8_e4m3 : ScalarType::fp32;
    group.axis_order = {TensorAxis::head_dim, TensorAxis::kv_head, TensorAxis::token_offset, TensorAxis::physical_slot,
                        TensorAxis::layer_local};
    group.stride_identity = n.text("stride");
    m.cache_groups.push_back(group);
  }
  m.physical_mode = PhysicalMode::virtual_pages;
  m.allocator_block_size = n.u32();
  m.kernel_block_size = n.u32();
  m.hash_block_size = n.u32();
  m.scheduler_block_size = n.u32();
  m.physical_page_bytes = n.u64();
  m.tp_world_size = n.u32();
  m.tp_rank = n.u32();
  m.quantization_schema = n.text("quant");
  m.position_contract_id = n.text("rope");
  m.allocator_revision = n.u32();
  m.hash_family = HashFamily::xxh3_bits128;
  return m;
}

template <>
inline CacheIsolationNamespace filled(uint64_t seed) {
  Numbers n(seed);
  return CacheIsolationNamespace{n.text("deployment"), n.text("tenant"), NamespaceGeneration{n.u64()},
                                 n.text("salt"),       n.u64(),          PublicationPolicy::deployment_shared};
}

template <>
inline CacheCompatibilityManifest filled(uint64_t seed) {
  Numbers n(seed);
  CacheCompatibilityManifest m;
  m.cache_abi_sha256 = n.text("abi");
  m.cache_layout_sha256 = n.digest();
  m.model_generation = n.u64();
  m.adapter_identity = n.text("lora");
  m.weight_transform_identity = n.text("transform");
  m.position_contract_sha256 = n.text("positions");
  m.covered_token_ids = {n.u32(), n.u32(), 0xffffffffu, n.u32()};
  m.input_side_data = {SideInputIdentity{SideInputKind::prompt_embedding, n.text("embedding"), n.u32(), n.u32()},
                       SideInputIdentity{SideInputKind::multimodal_feature, n.text("image"), n.u32(), n.u32()}};
  m.cache_isolation_namespace = n.text("namespace");
  m.namespace_generation = NamespaceGeneration{n.u64()};
  m.cache_salt = n.text("salt");
  m.publication_generation = n.u64();
  m.tokenizer_revision = n.text("tokenizer");
  m.chat_template_revision = n.text("template");
  m.request_id = n.text("request");
  m.sampling_policy = n.text("sampling");
  return m;
}

template <>
inline PhysicalBlockHandle filled(uint64_t seed) {
  Numbers n(seed);
  return n.handle();
}

template <>
inline PhysicalRef filled(uint64_t seed) {
  Numbers n(seed);
  return n.ref();
}

template <>
inline AllocationTxn filled(uint64_t seed) {
  Numbers n(seed);
  AllocationTxn t;
  t.transaction_id = TransactionId{n.u64()};
  t.expected_allocator_epoch = Epoch{n.u64()};
  t.request_id = RequestId{n.u64()};
  t.expected_request_generation = RequestGeneration{n.u32()};
  t.expected_table_version = TableVersion{n.u64()};
  t.operation = AllocationOperation::copy_on_write;
  t.fork_child = RequestId{n.u64()};
  t.requested_rows = n.u32();
  t.touched_handles = {n.handle(), n.handle()};
  t.reserved_handles = {n.handle(), n.handle(), n.handle()};
  t.publication_state = TransactionPhase::ready_to_publish;
  return t;
}

template <>
inline AllocationReceipt filled(uint64_t seed) {
  Numbers n(seed);
  AllocationReceipt r;
  r.transaction_id = TransactionId{n.u64()};
  r.operation = AllocationOperation::append;
  r.request_id = RequestId{n.u64()};
  r.request_generation = RequestGeneration{n.u32()};
  r.table_version_after = TableVersion{n.u64()};
  r.context_tokens_after = n.u32();
  r.predecessor_digest = n.state_digest();
  r.successor_digest = n.state_digest();
  r.useful_new_rows = n.u32();
  r.new_physical_blocks = n.u32();
  r.copied_rows = n.u32();
  r.copy_payload_bytes = n.u64();
  r.refcount_deltas = {RefcountDelta{n.handle(), n.u32(), n.u32()}, RefcountDelta{n.handle(), n.u32(), n.u32()}};
  r.published_entries = {TableEntryUpdate{n.u32(), n.handle(), n.u32()},
                         TableEntryUpdate{n.u32(), n.handle(), n.u32()}};
  r.evicted_handles = {n.handle()};
  r.allocator_epoch_after = Epoch{n.u64()};
  r.append_path = AppendPath::copy_on_write;
  r.outcome = AllocationOutcome::rolled_back;
  r.rollback_reason = n.text("after_reserve_group_0");
  return r;
}

template <>
inline ReleaseResult filled(uint64_t seed) {
  Numbers n(seed);
  ReleaseResult r;
  r.transaction_id = TransactionId{n.u64()};
  r.request_id = RequestId{n.u64()};
  r.request_generation = RequestGeneration{n.u32()};
  r.reason = ReleaseReason::preempted;
  r.predecessor_digest = n.state_digest();
  r.successor_digest = n.state_digest();
  r.context_tokens_before = n.u32();
  r.context_tokens_after = n.u32();
  r.table_version_after = TableVersion{n.u64()};
  r.refcount_deltas = {RefcountDelta{n.handle(), n.u32(), n.u32()}};
  r.freed_handles = {n.handle(), n.handle()};
  r.evictable_handles = {n.handle(), n.handle(), n.handle()};
  r.allocator_epoch_after = Epoch{n.u64()};
  return r;
}

template <>
inline PrefixMatchReceipt filled(uint64_t seed) {
  Numbers n(seed);
  PrefixMatchReceipt r;
  r.request_id = RequestId{n.u64()};
  r.request_generation = RequestGeneration{n.u32()};
  r.index_snapshot_id = IndexSnapshotId{n.u64()};
  r.index_publication_generation = n.u64();
  r.compatibility_manifest_sha256 = n.digest();
  r.namespace_id = n.text("namespace");
  r.namespace_generation = NamespaceGeneration{n.u64()};
  r.policy_id = n.text("full_block");
  r.alignment_tokens = n.u32();
  r.logits_path = LogitsPath::no_logits;
  r.prompt_tokens = n.u32();
  r.semantic_match_tokens = n.u32();
  r.indexed_match_tokens = n.u32();
  r.reuse_cap_tokens = n.u32();
  r.runtime_hit_tokens = n.u32();
  r.prompt_rows_recomputed = n.u32();
  r.matched_group_handles = {MatchedBlockBundle{n.u32(), {n.handle(), n.handle()}},
                             MatchedBlockBundle{n.u32(), {n.handle(), n.handle()}}};
  r.new_block_bundles = n.u32();
  r.copy_valid_partial_rows = n.u32();
  r.lease_id = LeaseId{n.u64()};
  r.receipt_sha256 = n.digest();
  return r;
}

template <>
inline RadixHandoffLabReceipt filled(uint64_t seed) {
  Numbers n(seed);
  RadixHandoffLabReceipt r;
  r.request_id = RequestId{n.u64()};
  r.request_generation = RequestGeneration{n.u32()};
  r.tree_version = TreeVersion{n.u64()};
  r.tree_state_sha256 = n.digest();
  r.prompt_tokens = n.u32();
  r.matched_tokens = n.u32();
  r.prefix_slot_ids = {TokenSlotId{n.u64()}, TokenSlotId{n.u64()}, TokenSlotId{n.u64()}};
  r.path_node_ids = {RadixNodeId{n.u64()}, RadixNodeId{n.u64()}};
  r.terminal_node_id = RadixNodeId{n.u64()};
  r.suffix_interval = TokenInterval{n.u32(), n.u32()};
  r.lock_lease_id = LeaseId{n.u64()};
  r.lock_required_until_scheduler_disposition = false;  // default is true
  r.free_private_tail_slots = n.u32();
  r.new_useful_kv_bytes = n.u64();
  r.new_physical_blocks = n.u32();
  r.new_physical_capacity_bytes = n.u64();
  r.receipt_sha256 = n.digest();
  return r;
}

template <>
inline MappedFrontierReceipt filled(uint64_t seed) {
  Numbers n(seed);
  MappedFrontierReceipt r;
  r.request_id = RequestId{n.u64()};
  r.request_generation = RequestGeneration{n.u32()};
  r.request_slot = RequestSlot{n.u32()};
  r.slot_generation = SlotGeneration{n.u64()};
  r.mapper_epoch = Epoch{n.u64()};
  r.local_layers = n.u32();
  r.page_group_bytes = n.u64();
  r.tokens_per_page = n.u32();
  r.target_tokens = n.u32();
  r.mapped_pages = n.u32();
  r.valid_tokens = n.u32();
  r.retained_mapping_reused = true;
  r.old_kv_semantically_valid = true;  // never true in a real receipt; here it proves the bit travels
  r.new_mappings = {
      PageMapping{n.u32(), KvTensorKind::value, n.u32(), PageHandleId{n.u64()}, BlockGeneration{n.u32()}},
      PageMapping{n.u32(), KvTensorKind::value, n.u32(), PageHandleId{n.u64()}, BlockGeneration{n.u32()}}};
  r.reclaimed_bundles = {ReclaimedPageBundle{RequestSlot{n.u32()}, SlotGeneration{n.u64()}, n.u32(), n.u32()}};
  r.mapping_path = MappingPath::asynchronous;
  r.ready_before_use = true;
  r.ledger = MappingLedger{n.u64(), n.u64(), n.u64(), n.u64(), n.u64(), n.u64(), n.u64()};
  return r;
}

template <>
inline PromptModuleReceipt filled(uint64_t seed) {
  Numbers n(seed);
  PromptModuleReceipt r;
  r.schema_id = n.text("schema");
  r.schema_generation = n.u64();
  r.module_id = n.text("system-prompt");
  r.module_parameters_digest = n.digest();
  r.token_ids = {n.u32(), n.u32(), n.u32()};
  r.position_ids = {n.u32(), n.u32(), n.u32()};
  r.semantic_manifest_digest = n.digest();
  r.layout_manifest_digest = n.digest();
  r.namespace_id = n.text("namespace");
  r.namespace_generation = NamespaceGeneration{n.u64()};
  r.physical_refs = {n.ref(), n.ref()};
  return r;
}

template <>
inline SessionReuseReceipt filled(uint64_t seed) {
  Numbers n(seed);
  SessionReuseReceipt r;
  r.session_id = n.text("session");
  r.tenant_id = n.text("tenant");
  r.namespace_id = n.text("namespace");
  r.namespace_generation = NamespaceGeneration{n.u64()};
  r.semantic_digest = n.digest();
  r.layout_digest = n.digest();
  r.covered_interval = TokenInterval{n.u32(), n.u32()};
  r.covered_tokens_digest = n.digest();
  r.position_truncation_contract = n.text("truncate-left");
  r.publication_generation = n.u64();
  r.source_tier_object_id = n.text("tier-object");
  r.resume_prefill_tokens = n.u32();
  return r;
}

template <>
inline ExecutableReuseReceipt filled(uint64_t seed) {
  Numbers n(seed);
  ExecutableReuseReceipt r;
  r.request_id = RequestId{n.u64()};
  r.request_generation = RequestGeneration{n.u32()};
  r.source = ReuseSource::session;
  r.namespace_id = n.text("namespace");
  r.namespace_generation = NamespaceGeneration{n.u64()};
  r.semantic_digest = n.digest();
  r.layout_digest = n.digest();
  r.index_version = n.u64();
  r.tree_version = TreeVersion{n.u64()};
  r.pool_generations = {PoolGenerationRef{PoolId{n.u32()}, PoolGeneration{n.u32()}},
                        PoolGenerationRef{PoolId{n.u32()}, PoolGeneration{n.u32()}}};
  r.covered_interval = TokenInterval{n.u32(), n.u32()};
  r.physical_handles = {n.handle(), n.handle()};
  r.path_node_ids = {RadixNodeId{n.u64()}};
  r.leases = {LeaseId{n.u64()}, LeaseId{n.u64()}};
  r.collision_witness_verified = true;
  r.required_frontier_tokens = n.u32();
  r.ready_frontier_tokens = n.u32();
  r.execution_snapshot_version = ExecutionSnapshotVersion{n.u64()};
  r.kernel_abi_id = n.text("paged-v1");
  return r;
}

// ---- shared by codec_test.cpp and codec_fuzz_test.cpp ----------------------

// Every type the codec carries, with its name for failure messages.
template <class T>
struct Named {
  using type = T;
  const char* name;
};

template <class Fn>
void for_each_codec_type(Fn&& fn) {
  fn(Named<ErrorMessage>{"ErrorMessage"});
  fn(Named<CacheLayoutManifest>{"CacheLayoutManifest"});
  fn(Named<CacheCompatibilityManifest>{"CacheCompatibilityManifest"});
  fn(Named<CacheIsolationNamespace>{"CacheIsolationNamespace"});
  fn(Named<PhysicalBlockHandle>{"PhysicalBlockHandle"});
  fn(Named<PhysicalRef>{"PhysicalRef"});
  fn(Named<AllocationTxn>{"AllocationTxn"});
  fn(Named<AllocationReceipt>{"AllocationReceipt"});
  fn(Named<ReleaseResult>{"ReleaseResult"});
  fn(Named<PrefixMatchReceipt>{"PrefixMatchReceipt"});
  fn(Named<MappedFrontierReceipt>{"MappedFrontierReceipt"});
  fn(Named<PromptModuleReceipt>{"PromptModuleReceipt"});
  fn(Named<SessionReuseReceipt>{"SessionReuseReceipt"});
  fn(Named<ExecutableReuseReceipt>{"ExecutableReuseReceipt"});
}
inline constexpr int kCodecTypeCount = 14;

inline bool is_decode_error(ErrorCode c) {
  return c == ErrorCode::decode_failed || c == ErrorCode::message_too_large || c == ErrorCode::unknown_enum;
}

// Decodes untrusted bytes as T. The contract under test: the answer is a
// typed decode error naming a field, or a value whose own encoding decodes
// back to it. Returns whether a value came back.
template <class T>
bool decode_is_safe(std::span<const uint8_t> bytes, const codec::DecodeLimits& limits = {}) {
  auto r = codec::decode<T>(bytes, limits);
  if (!r.ok()) {
    INFO(r.error().describe());
    CHECK(is_decode_error(r.error().code));
    CHECK_FALSE(r.error().reason.empty());
    CHECK_FALSE(r.error().field.empty());
    return false;
  }
  auto again = codec::decode<T>(codec::encode(*r));
  REQUIRE(again.ok());
  CHECK(*again == *r);
  return true;
}

// Encodes filled<T>(seed) for three seeds and T{}, decodes each and
// compares: every field travels (the filler moves each off its default),
// defaults travel too, and the encoding is a function of the value.
template <class T>
void check_round_trip() {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const T value = filled<T>(seed);
    CHECK_FALSE(value == T{});
    const auto bytes = codec::encode(value);
    CHECK(bytes.size() % 8 == 0);
    auto decoded = codec::decode<T>(bytes);
    INFO((decoded.ok() ? std::string("ok") : decoded.error().describe()));
    REQUIRE(decoded.ok());
    CHECK(*decoded == value);
    CHECK(codec::encode(*decoded) == bytes);
  }
  auto zero = codec::decode<T>(codec::encode(T{}));
  REQUIRE(zero.ok());
  CHECK(*zero == T{});
}

// `mutations` copies of a valid encoding of T, each with 1-8 bytes
// overwritten at random: all must decode safely.
template <class T, class Rng>
void check_random_overwrites(Rng& rng, int mutations) {
  const auto bytes = codec::encode(filled<T>());
  for (int i = 0; i < mutations; ++i) {
    INFO("mutation " << i);
    auto corrupt = bytes;
    const int writes = 1 + static_cast<int>(rng() % 8);
    for (int w = 0; w < writes; ++w) corrupt[rng() % corrupt.size()] = static_cast<uint8_t>(rng());
    decode_is_safe<T>(corrupt);
  }
}

// Flips every bit of a valid encoding of T, one at a time, and decodes each:
// all must decode safely. A flip in a data field still forms a valid
// message, a flip in the segment table or a pointer does not: both outcomes
// must occur.
template <class T>
void check_every_bit_flip(const std::vector<uint8_t>& bytes) {
  size_t values = 0, errors = 0;
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    INFO("flipped bit " << bit);
    auto corrupt = bytes;
    corrupt[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    (decode_is_safe<T>(corrupt) ? values : errors)++;
  }
  CHECK(values > 0);
  CHECK(errors > 0);
}

}  // namespace kvrt::test
