@0x9a8b7c6d5e4f3021;
# The namespace / authorization owner's messages (services/authorization/;
# spec 0x0CE): a worker asks for a namespace grant by name; the grant holds
# until the namespace's generation moves on (revocation, invalidation).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
using Session = import "session.capnp";
$Kvrt.include(["services/common/digest.hpp", "services/identity/invalidation.hpp"]);

struct AuthorizeRequest $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
}

struct NamespaceGrantReceipt $Kvrt.message {
  # A namespace grant: the principal may look up and publish in this namespace
  # at this generation; a later generation (revocation, invalidation) voids it.
  grantId @0 :UInt64;                      # unique per node
  namespaceName @1 :Text;
  generation @2 :UInt64 $Kvrt.type("NamespaceGeneration");
  grantSha256 @3 :Data $Kvrt.type("Sha256Digest");
  # Canonical SHA-256 of (grant id, principal, namespace, generation): what an
  # audit log records to name this grant without the salt or the token.
  modelGeneration @4 :UInt64;
  # The generation's model weights generation and active adapter set (empty:
  # none): what an engine must compute with for K/V it reads or publishes
  # under this grant, so that after a weights or adapter invalidation (0x01A)
  # it can tell which weights a request admitted under the grant runs on.
  adapterIdentity @5 :Text;
}

enum InvalidationCause $Kvrt.existing("InvalidationCause") {
  # What changed, so that a namespace's K/V of the old generation no longer
  # describes what a request would compute (0x01A "Invalidation Produces A
  # Successor Namespace"). Each cause owns the facts it must change.
  weights @0;          # base weights: the model generation advances
  adapter @1;          # the active adapter set: the adapter identity changes
  transform @2;        # a weight transform: its identity changes
  positions @3;        # the position contract: its digest changes
  representation @4;   # dtype, quantization, strides or block sizes
  shard @5;            # TP world/rank, cache grouping or local heads
}

struct NamespaceInvalidateRequest $Kvrt.message {
  # The invalidate route (admin sessions only): the namespace's successor
  # generation g+1 becomes current. Every grant of g ends, so a session that
  # held one is refused with authorization_stale_generation on its next
  # lookup, publication or reuse and must authorize again; what g published
  # never matches a lookup of g+1 (its keys hash g). Requests already running
  # keep the blocks they hold.
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  cause @2 :InvalidationCause;
  # The new value of the fact the cause owns: the adapter or transform
  # identity (adapter, transform), the position contract's digest, 64
  # lowercase hex (positions); empty for weights, whose successor is the
  # current model generation + 1.
  successorIdentity @3 :Text;
}

struct NamespaceInvalidationReceipt $Kvrt.message {
  # What an invalidation did, with its counts (0x01A, the registry's receipt).
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  cause @2 :InvalidationCause;
  oldGeneration @3 :UInt64 $Kvrt.type("NamespaceGeneration");
  newGeneration @4 :UInt64 $Kvrt.type("NamespaceGeneration");
  oldModelGeneration @5 :UInt64;
  newModelGeneration @6 :UInt64;
  changedFacts @7 :List(Text);              # every fact of the generation that differs
  endedGrants @8 :UInt32;                   # grants of g that ended [grants]
  oldLiveAdmissions @9 :UInt64;             # holds still on g (leases, receipts) [holds]
  oldReclaimed @10 :Bool;                   # no hold on g: its state is reclaimable now
  oldNamespaceSha256 @11 :Data $Kvrt.type("Sha256Digest");
  newNamespaceSha256 @12 :Data $Kvrt.type("Sha256Digest");
}

struct NamespaceStatusRequest $Kvrt.message {
  # The namespace_status route (admin sessions only).
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;                   # empty: every namespace
}

struct NamespaceStatus {
  namespaceName @0 :Text;
  generation @1 :UInt64 $Kvrt.type("NamespaceGeneration");   # the current one
  modelGeneration @2 :UInt64;
  admitting @3 :Bool;                       # false while a purge stops admission
  openPurge @4 :UInt64;                     # the open purge's id; 0: none
  liveGrants @5 :UInt32;                    # grants of the current generation [grants]
  frozenGenerations @6 :List(UInt64);       # older generations still held by someone
  liveLeaseHolds @7 :UInt64;                # lease holds, every generation [holds]
  liveReceiptHolds @8 :UInt64;              # executable-receipt holds, every generation [holds]
  invalidations @9 :UInt32;                 # since the node started
  lastCause @10 :Text;                      # the latest invalidation's cause; empty: none
}

struct NamespaceStatusReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaces @1 :List(NamespaceStatus);     # by name
}

struct NamespacePurgeRequest $Kvrt.message {
  # The purge route (admin sessions only): the seven steps of 0x0CE on a
  # live node, carried out by the owners. The namespace's generation g stops
  # admitting, its successor g+1 becomes current (the same successor facts
  # as the invalidate route's), the index owner drops every candidate of g,
  # g's open executable-reuse receipts are waited for up to the deadline and
  # then revoked (their holders' release answers reuse_receipt_revoked), g's
  # blocks are released (and, with overwrite, zeroed before any new owner
  # is handed them), and the purge completes when no receipt of g remains.
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  cause @2 :InvalidationCause;
  successorIdentity @3 :Text;               # as NamespaceInvalidateRequest's
  deadlineMs @4 :UInt32;                    # step 4's wait for g's receipts; 0: revoke at once [ms]
  overwrite @5 :Bool;                       # step 5: zero the blocks g may have written before their next owner
}

struct PurgeStepRecord {
  # One performed step of a purge, as the authorization owner recorded it.
  step @0 :Text;                            # stop_admitting, advance_generation, ... complete
  atUs @1 :UInt64;                          # when the step finished, from the purge's start [us]
  workItems @2 :UInt32;                     # work items the step issued to other owners
  liveReceipts @3 :UInt64;                  # g's open executable-reuse receipts when the step ran
  count @4 :UInt64;                         # what the step's owner did: see detail
  detail @5 :Text;                          # what count counts ("index pages dropped", ...)
}

struct NamespacePurgeReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  purgeId @2 :UInt64;
  cause @3 :InvalidationCause;
  purgedGeneration @4 :UInt64 $Kvrt.type("NamespaceGeneration");     # g
  successorGeneration @5 :UInt64 $Kvrt.type("NamespaceGeneration");  # g+1
  endedGrants @6 :UInt32;                   # grants of g that ended at step 2 [grants]
  droppedIndexPages @7 :UInt64;             # pages of g the index owner gave back (radix; 0 for the hash chain)
  receiptsDrained @8 :UInt64;               # g's receipts released by their holders within the deadline
  receiptsRevoked @9 :UInt64;               # g's receipts revoked at the deadline
  blocksMarkedForOverwrite @10 :UInt64;     # step 5 with overwrite: blocks zeroed before their next owner
  externalCopies @11 :UInt64;               # step 6: saves of g the session tier deleted (0 without a [tier])
  durationUs @12 :UInt64;                   # begin to completion [us]
  steps @13 :List(PurgeStepRecord);         # the steps this call performed, in order
  resumedAfter @14 :Text;
  # Empty for a new purge. A purge that stopped open (a fault point fired,
  # an owner was unreachable) is resumed by the next purge call for its
  # namespace: this names the last step it had performed, and steps lists
  # only the ones performed now.
}

struct PoolDescriptorRequest $Kvrt.message {
  # A worker session asks for the descriptors of the unnamed pool segments
  # its principal may use (PoolAttachment.byDescriptor). Served over the
  # session channel only: the reply frame carries the descriptors as
  # SCM_RIGHTS, one per pool of the receipt, in its order.
  trace @0 :Common.TraceContext;
}

struct PoolDescriptorReceipt $Kvrt.message {
  pools @0 :List(Session.PoolAttachment);
  # The pools whose descriptors travel with this receipt, in order: those
  # serving the namespaces the session's principal is allowed.
}
