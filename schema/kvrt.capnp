@0xd1c95bc3db80f598;
# kvrt wire schema. Every value that crosses an owner boundary (DESIGN.md,
# layer 2). Units are stated on every numeric field.
#
# Every kvrt message is one Envelope: a schema version and exactly one body.
# A reader names the body it expects, so bytes of one message kind can never
# be decoded as another (Cap'n Proto itself carries no type tag).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Common = import "common.capnp";
using Identity = import "identity.capnp";
using Allocator = import "allocator.capnp";
using Mapper = import "mapper.capnp";
using Reuse = import "reuse.capnp";
using Node = import "node.capnp";

# Wire schema version carried by every Envelope; a reader rejects any other
# value (decode_failed, field Envelope.schema_version). Bump it whenever a
# field changes meaning; adding a field at a new ordinal needs no bump.
const wireSchemaVersion :UInt16 = 1;

struct Envelope {
  schemaVersion @0 :UInt16;   # = wireSchemaVersion
  union {
    typedError @1 :Common.TypedError;
    cacheLayoutManifest @2 :Identity.CacheLayoutManifest;
    cacheCompatibilityManifest @3 :Identity.CacheCompatibilityManifest;
    cacheIsolationNamespace @4 :Identity.CacheIsolationNamespace;
    physicalBlockHandle @5 :Common.PhysicalBlockHandle;
    physicalRef @6 :Common.PhysicalRef;
    allocationTxn @7 :Allocator.AllocationTxn;
    allocationReceipt @8 :Allocator.AllocationReceipt;
    releaseResult @9 :Allocator.ReleaseResult;
    prefixMatchReceipt @10 :Reuse.PrefixMatchReceipt;
    radixSchedulerHandoffReceipt @11 :Reuse.RadixSchedulerHandoffReceipt;
    mappedFrontierReceipt @12 :Mapper.MappedFrontierReceipt;
    promptModuleReceipt @13 :Reuse.PromptModuleReceipt;
    sessionReuseReceipt @14 :Reuse.SessionReuseReceipt;
    executableReuseReceipt @15 :Reuse.ExecutableReuseReceipt;
    # The node protocol (node.capnp, issue 5).
    allocatorBatch @16 :Node.AllocatorBatch;
    allocatorBatchReceipt @17 :Node.AllocatorBatchReceipt;
    prefixBatch @18 :Node.PrefixBatch;
    prefixBatchReceipt @19 :Node.PrefixBatchReceipt;
    helloRequest @20 :Node.HelloRequest;
    sessionReceipt @21 :Node.SessionReceipt;
    authorizeRequest @22 :Node.AuthorizeRequest;
    namespaceGrantReceipt @23 :Node.NamespaceGrantReceipt;
    ownerStats @24 :Node.OwnerStats;
    mapperBatch @25 :Node.MapperBatch;
    mapperBatchReceipt @26 :Node.MapperBatchReceipt;
    executeBatch @27 :Node.ExecuteBatch;
    executeBatchReceipt @28 :Node.ExecuteBatchReceipt;
    reuseBatch @29 :Node.ReuseBatch;
    reuseBatchReceipt @30 :Node.ReuseBatchReceipt;
  }
}
