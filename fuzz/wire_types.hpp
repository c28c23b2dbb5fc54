#pragma once
// Every message type the codec decodes (the generated schema/<owner>_codec.hpp
// declare one decode<T> each): the node decodes the requests of its routes
// and the hello, a worker the receipts, the ErrorMessage of a refusal, the
// session receipt and the statistics; the value types travel inside them and
// on their own in the tests of the wire. The `wire` fuzz target picks one by
// the first input byte (its index here, modulo the count), so the list is
// append-only: a type's index is part of every corpus file that names it.
#include <cstddef>

#include "schema/codecs.hpp"

namespace kvrt::fuzz {

template <class T>
struct WireType {
  using type = T;
  const char* name;
};

template <class Fn>
void for_each_wire_type(Fn&& fn) {
  // Values of the owners' cores (tests/schema/codec_fixtures.hpp).
  fn(WireType<ErrorMessage>{"ErrorMessage"});
  fn(WireType<CacheLayoutManifest>{"CacheLayoutManifest"});
  fn(WireType<CacheCompatibilityManifest>{"CacheCompatibilityManifest"});
  fn(WireType<CacheIsolationNamespace>{"CacheIsolationNamespace"});
  fn(WireType<PhysicalBlockHandle>{"PhysicalBlockHandle"});
  fn(WireType<PhysicalRef>{"PhysicalRef"});
  fn(WireType<AllocationTxn>{"AllocationTxn"});
  fn(WireType<AllocationReceipt>{"AllocationReceipt"});
  fn(WireType<ReleaseResult>{"ReleaseResult"});
  fn(WireType<PrefixMatchReceipt>{"PrefixMatchReceipt"});
  fn(WireType<MappedFrontierReceipt>{"MappedFrontierReceipt"});
  fn(WireType<PromptModuleReceipt>{"PromptModuleReceipt"});
  fn(WireType<SessionReuseReceipt>{"SessionReuseReceipt"});
  fn(WireType<ExecutableReuseReceipt>{"ExecutableReuseReceipt"});
  // The node protocol: every route's request and receipt
  // (tests/schema/codec_node_fixtures.hpp, for_each_node_type).
  fn(WireType<AllocatorBatch>{"AllocatorBatch"});
  fn(WireType<AllocatorBatchReceipt>{"AllocatorBatchReceipt"});
  fn(WireType<PrefixBatch>{"PrefixBatch"});
  fn(WireType<PrefixBatchReceipt>{"PrefixBatchReceipt"});
  fn(WireType<HelloRequest>{"HelloRequest"});
  fn(WireType<SessionReceipt>{"SessionReceipt"});
  fn(WireType<AuthorizeRequest>{"AuthorizeRequest"});
  fn(WireType<NamespaceGrantReceipt>{"NamespaceGrantReceipt"});
  fn(WireType<OwnerStats>{"OwnerStats"});
  fn(WireType<MapperBatch>{"MapperBatch"});
  fn(WireType<MapperBatchReceipt>{"MapperBatchReceipt"});
  fn(WireType<ExecuteBatch>{"ExecuteBatch"});
  fn(WireType<ExecuteBatchReceipt>{"ExecuteBatchReceipt"});
  fn(WireType<ReuseBatch>{"ReuseBatch"});
  fn(WireType<ReuseBatchReceipt>{"ReuseBatchReceipt"});
  fn(WireType<FaultArmRequest>{"FaultArmRequest"});
  fn(WireType<FaultArmReceipt>{"FaultArmReceipt"});
  // What `kvrt stats` reads from the gateway.
  fn(WireType<NodeStatsReceipt>{"NodeStatsReceipt"});
  // The authorization owner's admin routes: a namespace's lifecycle.
  fn(WireType<NamespaceInvalidateRequest>{"NamespaceInvalidateRequest"});
  fn(WireType<NamespaceInvalidationReceipt>{"NamespaceInvalidationReceipt"});
  fn(WireType<NamespaceStatusRequest>{"NamespaceStatusRequest"});
  fn(WireType<NamespaceStatusReceipt>{"NamespaceStatusReceipt"});
  fn(WireType<NamespacePurgeRequest>{"NamespacePurgeRequest"});
  fn(WireType<NamespacePurgeReceipt>{"NamespacePurgeReceipt"});
  // Unnamed pool segments: the descriptors a worker session may receive.
  fn(WireType<PoolDescriptorRequest>{"PoolDescriptorRequest"});
  fn(WireType<PoolDescriptorReceipt>{"PoolDescriptorReceipt"});
  // Inactive sessions: the session tier's save and resume (0x0CC).
  fn(WireType<SessionSaveRequest>{"SessionSaveRequest"});
  fn(WireType<SessionSaveReceipt>{"SessionSaveReceipt"});
  fn(WireType<SessionResumeRequest>{"SessionResumeRequest"});
  fn(WireType<SessionResumeReceipt>{"SessionResumeReceipt"});
  // Prompt Cache: schemas, assembly and module publication (0x0CB).
  fn(WireType<PromptSchemaRequest>{"PromptSchemaRequest"});
  fn(WireType<PromptSchemaReceipt>{"PromptSchemaReceipt"});
  fn(WireType<PromptAssembleRequest>{"PromptAssembleRequest"});
  fn(WireType<PromptAssemblyReceipt>{"PromptAssemblyReceipt"});
  fn(WireType<PromptModulePublishRequest>{"PromptModulePublishRequest"});
  fn(WireType<PromptModulePublishReceipt>{"PromptModulePublishReceipt"});
}
inline constexpr size_t kWireTypeCount = 50;

}  // namespace kvrt::fuzz
