#pragma once
// NamespaceGrant and the AuthorizedLookup capability (spec 0x0CE
// "Authorization Before Lookup", 0x0CD step 1).
//
// The safe order is authenticate -> authorize namespace -> validate namespace
// generation -> construct or expose a candidate lookup. kvrt makes that order
// a property of the types: every index-facing entry point (the reuse
// transaction's step 1, the index actors' lookup handlers) takes an
// AuthorizedLookup, and only NamespaceAuthority can construct one — after it
// authenticated the principal, checked the principal's namespace list and
// read the namespace's current, admitting generation. A NamespaceGrant is the
// plain value form (what crosses the wire); turning one back into a
// capability goes through NamespaceAuthority::verify_claim, which re-checks
// it against the live grant table. So an unauthorised request cannot reach an
// index by construction, and a lookup never happens "first, then rejected",
// which would disclose cache existence through timing or counters.
#include <string>
#include <string_view>

#include "services/authorization/authorization_ids.hpp"
#include "services/common/digest.hpp"

namespace kvrt {

struct NamespaceGrant {
  PrincipalId principal;
  NamespaceId namespace_id;
  std::string namespace_name;      // "deployment/tenant" (isolation_namespace.hpp namespace_name)
  NamespaceGeneration generation;  // the generation the grant admits; current when issued
  Sha256Digest salt_digest;        // cache_salt_digest(salt): lets a gate compare salts without holding one
  GrantId grant_id;

  friend bool operator==(const NamespaceGrant&, const NamespaceGrant&) = default;
};

// Domain-separated SHA-256 of a namespace's cache salt. The salt itself is a
// secret of the namespace owner (0x01A "unguessable cache salt"); grants and
// receipts carry only this digest.
Sha256Digest cache_salt_digest(std::string_view salt);

class NamespaceAuthority;

// Proof that NamespaceAuthority authorized `grant()` at some moment. It can be
// copied but not forged. A holder that acts later must expect the grant may
// have ended since: NamespaceAuthority::check answers whether it still holds.
class AuthorizedLookup {
 public:
  const NamespaceGrant& grant() const { return grant_; }
  PrincipalId principal() const { return grant_.principal; }
  NamespaceId namespace_id() const { return grant_.namespace_id; }
  const std::string& namespace_name() const { return grant_.namespace_name; }
  NamespaceGeneration generation() const { return grant_.generation; }
  const Sha256Digest& salt_digest() const { return grant_.salt_digest; }
  GrantId grant_id() const { return grant_.grant_id; }

  friend bool operator==(const AuthorizedLookup&, const AuthorizedLookup&) = default;

 private:
  friend class NamespaceAuthority;
  explicit AuthorizedLookup(NamespaceGrant grant) : grant_(std::move(grant)) {}
  NamespaceGrant grant_;
};

}  // namespace kvrt
