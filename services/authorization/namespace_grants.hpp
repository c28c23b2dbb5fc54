#pragma once
// NamespaceGrants: what the authorization owner told an index owner about
// each session's namespace grants (0x0CE "Authorization Before Lookup"). Both
// index owners of the node (the hash-chain PrefixService and the radix
// RadixBlockService) check a lookup or publication here before their index
// sees it: the session must hold a grant for the namespace at the
// namespace's current generation.
#include <cstdint>
#include <map>
#include <string>

#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// What the authorization owner told an index about one session's grant.
struct SessionNamespaceGrant {
  std::string namespace_name;
  NamespaceGeneration generation;
  std::string salt;  // the namespace's cache salt (never leaves the node)
  // The generation's reuse digests (reuse_evidence.hpp): an index records
  // them with what it publishes under this grant, so a reuse candidate names
  // the d_sem / d_layout of its producer (0x0CD step 3).
  Sha256Digest semantic_digest;
  Sha256Digest layout_digest;
};

class NamespaceGrants {
 public:
  void grant(SessionId session, SessionNamespaceGrant g);
  // A namespace moved to a new generation: every grant of an older one is
  // refused from now on (authorization_stale_generation).
  void advance_generation(const std::string& namespace_name, NamespaceGeneration generation);
  void end_session(SessionId session);
  // The session's current grant for the namespace. Errors:
  // authorization_namespace_denied (no grant), authorization_stale_generation
  // (a grant of an older generation).
  Result<SessionNamespaceGrant> current(SessionId session, const std::string& namespace_name) const;
  // current(), for publishing rows computed under `computed_under` (0: the
  // caller did not say): rows of generation g are never published into g+1,
  // even by a session that has authorized g+1 since (0x0CE: nothing of g is
  // published after g+1 became current). authorization_stale_generation.
  Result<SessionNamespaceGrant> for_publication(SessionId session, const std::string& namespace_name,
                                                NamespaceGeneration computed_under) const;
  size_t sessions() const { return grants_.size(); }  // sessions holding a grant

 private:
  std::map<uint64_t, std::map<std::string, SessionNamespaceGrant>> grants_;  // session -> namespace -> grant
  std::map<std::string, NamespaceGeneration> current_generation_;
};

}  // namespace kvrt
