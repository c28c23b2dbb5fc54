@0x9a8b7c6d5e4f3021;
# The namespace / authorization owner's messages (services/authorization/;
# spec 0x0CE): a worker asks for a namespace grant by name; the grant holds
# until the namespace's generation moves on (revocation, invalidation).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
$Kvrt.include(["services/common/digest.hpp"]);

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
}
