@0xb15223a0d501270d;
# Identity records of spec 0x01A: how cached bytes are laid out, when they may
# be reused, and who may see them. Their C++ types carry behaviour (loading,
# validation, canonical digests) and live in services/identity/; the
# generator checks that both sides keep the same members and enumerant values.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
$Kvrt.include(["services/identity/cache_layout_manifest.hpp", "services/identity/cache_compatibility_manifest.hpp"]);

enum ScalarType $Kvrt.existing("ScalarType") {
  fp32 @0;      # 4 bytes / scalar
  fp16 @1;      # 2 bytes / scalar
  bf16 @2;      # 2 bytes / scalar
  fp8E4m3 @3;   # 1 byte / scalar
  int8 @4;      # 1 byte / scalar
}

enum PhysicalMode $Kvrt.existing("PhysicalMode") {
  rectangular @0;
  pagedBlocks @1;
  virtualPages @2;
}

enum TensorAxis $Kvrt.existing("TensorAxis") {
  # The five axes of one K or V tensor (spec 0x03E, 0x03I).
  layerLocal @0;
  physicalSlot @1;
  tokenOffset @2;
  kvHead @3;
  headDim @4;
}

enum HashFamily $Kvrt.existing("HashFamily") {
  # Hash family of the prefix index chain (spec 0x07B).
  sha256 @0;
  xxh3Bits128 @1;   # XXH3, 128-bit output
}

struct CacheGroupLayout $Kvrt.existing("CacheGroupLayout") {
  groupId @0 :UInt32 $Kvrt.type("CacheGroupId");
  layerStart @1 :UInt32;       # first model layer of the group [layers]
  layerEnd @2 :UInt32;         # one past the last model layer [layers]
  kvHeadsLocal @3 :UInt32;     # K/V heads owned by this TP rank [heads]
  headDim @4 :UInt32;          # lanes per head [scalars]
  kDtype @5 :ScalarType;       # stored K representation
  vDtype @6 :ScalarType;       # stored V representation
  axisOrder @7 :List(TensorAxis);  # outermost first; a permutation of the five axes
  strideIdentity @8 :Text;     # stride/layout identity, e.g. "row_major"
}

struct CacheLayoutManifest $Kvrt.existing("CacheLayoutManifest") $Kvrt.message {
  # CacheLayoutManifest (spec 0x01A): freezes how every later block-table or
  # page-map entry is interpreted.
  schemaVersion @0 :UInt32;          # layout record schema version [count]
  manifestId @1 :Text;
  logicalCacheAbiSha256 @2 :Text;    # M5.1 cache ABI digest, 64 lowercase hex chars
  modelGeneration @3 :UInt64;        # [generation]
  cacheGroups @4 :List(CacheGroupLayout);
  physicalMode @5 :PhysicalMode;
  allocatorBlockSize @6 :UInt32;     # P_a [tokens / allocator block]
  kernelBlockSize @7 :UInt32;        # P_k [tokens / kernel block]; divides P_a (0x0AC)
  hashBlockSize @8 :UInt32;          # [tokens / hash block] (0x07B)
  schedulerBlockSize @9 :UInt32;     # [tokens]
  physicalPageBytes @10 :UInt64;     # G [bytes / page group]; virtual_pages mode only
  tpWorldSize @11 :UInt32;           # tensor-parallel ranks [ranks]
  tpRank @12 :UInt32;                # this shard's rank, < tpWorldSize
  quantizationSchema @13 :Text;      # "none" or the schema id
  positionContractId @14 :Text;
  allocatorRevision @15 :UInt32;     # [revision]
  hashFamily @16 :HashFamily;
}

enum PublicationPolicy $Kvrt.existing("PublicationPolicy") {
  # Who may see a cache entry (spec 0x01A).
  privateToRequest @0;
  tenantShared @1;
  deploymentShared @2;
}

struct CacheIsolationNamespace $Kvrt.existing("CacheIsolationNamespace") $Kvrt.message {
  # CacheIsolationNamespace (spec 0x01A): reuse is an authorization decision.
  deploymentNamespace @0 :Text;     # deployment or cluster cache namespace
  tenantId @1 :Text;                # tenant / isolation-domain identity
  generation @2 :UInt64 $Kvrt.type("NamespaceGeneration");  # advanced by every invalidation
  cacheSalt @3 :Text;               # unguessable salt issued by the deployment
  modelCacheGeneration @4 :UInt64;  # [generation]
  publicationPolicy @5 :PublicationPolicy;
}

enum SideInputKind $Kvrt.existing("SideInputKind") {
  # Side inputs that change hidden states without changing placeholder tokens:
  # equality-bearing (spec 0x01A).
  multimodalFeature @0;
  promptEmbedding @1;
}

struct SideInputIdentity $Kvrt.existing("SideInputIdentity") {
  kind @0 :SideInputKind;
  identity @1 :Text;        # feature id or SHA-256 of the embedding tensor
  tokenOffset @2 :UInt32;   # first covered token position [tokens]
  tokenCount @3 :UInt32;    # covered positions [tokens]
}

struct CacheCompatibilityManifest $Kvrt.existing("CacheCompatibilityManifest") $Kvrt.message {
  # CacheCompatibilityManifest (spec 0x01A): the semantic reuse gate. Fields
  # @0-@11 are equality-bearing, in compatible()'s comparison order; @12-@15
  # are provenance, recorded but never equality-bearing.
  cacheAbiSha256 @0 :Text;              # M5.1 logical cache ABI digest (hex)
  cacheLayoutSha256 @1 :Data $Kvrt.type("Sha256Digest");  # CacheLayoutManifest digest [32 bytes]
  modelGeneration @2 :UInt64;           # [generation]
  adapterIdentity @3 :Text;             # empty = no adapter
  weightTransformIdentity @4 :Text;     # empty = none
  positionContractSha256 @5 :Text;
  coveredTokenIds @6 :List(UInt32);     # exact token ids of the covered interval [token ids]
  inputSideData @7 :List(SideInputIdentity);
  cacheIsolationNamespace @8 :Text;     # deployment/tenant namespace name
  namespaceGeneration @9 :UInt64 $Kvrt.type("NamespaceGeneration");
  cacheSalt @10 :Text;
  publicationGeneration @11 :UInt64;    # [generation]
  tokenizerRevision @12 :Text;          # provenance
  chatTemplateRevision @13 :Text;       # provenance
  requestId @14 :Text;                  # provenance
  samplingPolicy @15 :Text;             # provenance: sampling and stopping policy
}
