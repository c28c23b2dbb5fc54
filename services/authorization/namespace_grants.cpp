#include "services/authorization/namespace_grants.hpp"

namespace kvrt {

void NamespaceGrants::grant(SessionId session, SessionNamespaceGrant g) {
  auto& current = current_generation_[g.namespace_name];
  if (current.value < g.generation.value) current = g.generation;
  grants_[session.value][g.namespace_name] = std::move(g);
}

void NamespaceGrants::advance_generation(const std::string& name, NamespaceGeneration generation) {
  // The older grants stay, refused by current() as stale: a worker told
  // authorization_stale_generation knows to authorize again, where "no
  // grant" would read as a worker that never authorized. A session's next
  // grant of the namespace replaces its stale one.
  auto& current = current_generation_[name];
  if (current.value < generation.value) current = generation;
}

void NamespaceGrants::end_session(SessionId session) { grants_.erase(session.value); }

Result<SessionNamespaceGrant> NamespaceGrants::current(SessionId session, const std::string& name) const {
  const auto s = grants_.find(session.value);
  const SessionNamespaceGrant* g = nullptr;
  if (s != grants_.end())
    if (const auto it = s->second.find(name); it != s->second.end()) g = &it->second;
  if (g == nullptr)
    return make_error(ErrorCode::authorization_namespace_denied,
                      "this session holds no grant for namespace '" + name + "' (authorize first, 0x0CE)",
                      "namespace_name");
  const auto cur = current_generation_.find(name);
  if (cur != current_generation_.end() && cur->second != g->generation)
    return make_error(ErrorCode::authorization_stale_generation,
                      "the grant for '" + name + "' is generation " + std::to_string(g->generation.value) +
                          "; the namespace is at " + std::to_string(cur->second.value),
                      "namespace_name");
  return *g;
}

Result<SessionNamespaceGrant> NamespaceGrants::for_publication(SessionId session, const std::string& name,
                                                               NamespaceGeneration computed_under) const {
  Result<SessionNamespaceGrant> g = current(session, name);
  if (!g.ok() || computed_under.value == 0 || computed_under == g->generation) return g;
  return make_error(ErrorCode::authorization_stale_generation,
                    "rows computed under generation " + std::to_string(computed_under.value) + " of '" + name +
                        "' cannot be published into generation " + std::to_string(g->generation.value),
                    "computed_generation");
}

}  // namespace kvrt
