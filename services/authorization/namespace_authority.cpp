#include "services/authorization/namespace_authority.hpp"

#include <algorithm>

#include "services/identity/isolation_namespace.hpp"

namespace kvrt {
namespace {

std::string principal_text(PrincipalId p) { return "principal " + std::to_string(p.value); }

Error unauthenticated(std::string reason) {
  return make_error(ErrorCode::authorization_unauthenticated, std::move(reason), "principal");
}

}  // namespace

std::string_view to_string(HoldKind k) {
  switch (k) {
    case HoldKind::lease:
      return "lease";
    case HoldKind::executable_receipt:
      return "executable_receipt";
  }
  return "unknown_hold_kind";
}

Result<NamespaceAuthority> NamespaceAuthority::create(const AuthorizationConfig& config, const GenerationFacts& facts) {
  KVRT_TRY(config.validate());
  NamespaceAuthority a;
  for (size_t i = 0; i < config.namespaces.size(); ++i) {
    const NamespaceConfig& n = config.namespaces[i];
    CacheIsolationNamespace iso;
    iso.deployment_namespace = n.deployment;
    iso.tenant_id = n.tenant;
    iso.generation = NamespaceGeneration{n.generation};
    iso.publication_policy = n.publication_policy;
    iso.model_cache_generation = facts.layout.model_generation;
    if (n.salt) {
      iso.cache_salt = *n.salt;
    } else {
      KVRT_TRY_ASSIGN(iso.cache_salt, random_secret_hex());
    }
    Status s = a.registry_.create(iso, facts);
    if (!s.ok())
      return make_error(s.error().code, s.error().reason, "namespace[" + std::to_string(i) + "]." + s.error().field);
    a.namespaces_.push_back(NamespaceState{namespace_name(iso), cache_salt_digest(iso.cache_salt), true, std::nullopt});
  }
  for (const PrincipalConfig& pc : config.principals) {
    Principal p;
    p.name = pc.name;
    const PrincipalId id{a.next_principal_id_++};
    if (pc.token_sha256) {
      p.token_sha256 = *pc.token_sha256;
    } else {
      auto token = BearerToken::generate();
      if (!token.ok()) return token.error();
      p.token_sha256 = token->digest();
      a.issued_tokens_.push_back(IssuedToken{pc.name, id, std::move(token).value()});
    }
    for (const std::string& ns : pc.namespaces) {
      NamespaceId nid;
      KVRT_ASSERT(a.find_namespace(ns, &nid) != nullptr, "validated config names an unknown namespace");
      p.namespaces.insert(nid);
    }
    a.principals_.emplace(id, std::move(p));
  }
  return a;
}

std::vector<IssuedToken> NamespaceAuthority::take_issued_tokens() {
  std::vector<IssuedToken> out;
  out.swap(issued_tokens_);
  return out;
}

const NamespaceAuthority::NamespaceState* NamespaceAuthority::find_namespace(std::string_view name,
                                                                             NamespaceId* id_out) const {
  for (size_t i = 0; i < namespaces_.size(); ++i)
    if (namespaces_[i].name == name) {
      if (id_out != nullptr) *id_out = NamespaceId{static_cast<uint32_t>(i)};
      return &namespaces_[i];
    }
  return nullptr;
}

NamespaceGeneration NamespaceAuthority::current_generation(const NamespaceState& ns) const {
  const GenerationRecord* r = registry_.current(ns.name);
  KVRT_ASSERT(r != nullptr, "authority namespace missing from its registry: " + ns.name);
  return r->generation();
}

NamespaceGrant NamespaceAuthority::grant_value(GrantId id, const GrantRecord& g) const {
  const NamespaceState& ns = namespaces_.at(g.namespace_id.value);
  return NamespaceGrant{g.principal, g.namespace_id, ns.name, g.generation, ns.salt_digest, id};
}

Result<PrincipalId> NamespaceAuthority::authenticate(const BearerToken& token) const {
  const Sha256Digest d = token.digest();
  // Visit every principal and never stop early: the time taken does not say
  // how many principals were compared before a match.
  // The match is selected with a mask, not a branch; principal ids start at 1,
  // so 0 means "none".
  uint64_t match = 0;
  for (const auto& [id, p] : principals_) {
    const uint64_t equal = digests_equal_constant_time(p.token_sha256, d) ? 1 : 0;
    const uint64_t take = equal & static_cast<uint64_t>(match == 0);
    match |= id.value & (0 - take);
  }
  if (match == 0) return unauthenticated("the bearer token matches no principal");
  const Principal& p = principals_.at(PrincipalId{match});
  if (p.barred)
    return make_error(ErrorCode::authorization_principal_revoked,
                      "the token of principal \"" + p.name + "\" was revoked", "principal");
  return PrincipalId{match};
}

Result<PrincipalId> NamespaceAuthority::authenticate_hex(std::string_view token_hex) const {
  auto token = BearerToken::from_hex(token_hex);
  if (!token.ok()) return token.error();
  return authenticate(*token);
}

Result<AuthorizedLookup> NamespaceAuthority::authorize(PrincipalId principal, std::string_view name) {
  auto pit = principals_.find(principal);
  if (pit == principals_.end()) return unauthenticated(principal_text(principal) + " is not configured");
  if (pit->second.barred)
    return make_error(ErrorCode::authorization_principal_revoked, "principal \"" + pit->second.name + "\" was revoked",
                      "principal");
  NamespaceId nid;
  const NamespaceState* ns = find_namespace(name, &nid);
  if (ns == nullptr)
    return make_error(ErrorCode::authorization_unknown_namespace,
                      "no cache namespace \"" + std::string(name) + "\" is configured", "namespace");
  if (!pit->second.namespaces.contains(nid))
    return make_error(ErrorCode::authorization_namespace_denied,
                      "principal \"" + pit->second.name + "\" may not use namespace \"" + ns->name + "\"", "namespace");
  if (!ns->admitting)
    return make_error(ErrorCode::authorization_namespace_closed,
                      "namespace \"" + ns->name + "\" generation " + std::to_string(current_generation(*ns).value) +
                          " stopped admitting (purge in progress)",
                      "namespace");
  const auto key = std::make_pair(principal, nid);
  if (auto it = grant_by_principal_namespace_.find(key); it != grant_by_principal_namespace_.end())
    return AuthorizedLookup(grant_value(it->second, grants_.at(it->second)));
  const GrantId id{next_grant_id_++};
  GrantRecord g{principal, nid, current_generation(*ns)};
  grants_.emplace(id, g);
  grant_by_principal_namespace_.emplace(key, id);
  pit->second.grants.insert(id);
  return AuthorizedLookup(grant_value(id, g));
}

Status NamespaceAuthority::check(const AuthorizedLookup& lookup) const {
  const NamespaceGrant& g = lookup.grant();
  auto pit = principals_.find(g.principal);
  if (pit == principals_.end()) return unauthenticated(principal_text(g.principal) + " is not configured");
  if (pit->second.barred)
    return make_error(ErrorCode::authorization_principal_revoked, "principal \"" + pit->second.name + "\" was revoked",
                      "principal");
  if (g.namespace_id.value >= namespaces_.size() || namespaces_[g.namespace_id.value].name != g.namespace_name)
    return make_error(ErrorCode::authorization_grant_ended, "the grant names no configured namespace", "namespace");
  const NamespaceState& ns = namespaces_[g.namespace_id.value];
  const NamespaceGeneration current = current_generation(ns);
  if (g.generation != current)
    return make_error(ErrorCode::authorization_stale_generation,
                      "grant for namespace \"" + ns.name + "\" generation " + std::to_string(g.generation.value) +
                          "; the current generation is " + std::to_string(current.value),
                      "namespace_generation");
  if (!ns.admitting)
    return make_error(ErrorCode::authorization_namespace_closed,
                      "namespace \"" + ns.name + "\" generation " + std::to_string(current.value) +
                          " stopped admitting (purge in progress)",
                      "namespace");
  auto git = grants_.find(g.grant_id);
  if (git == grants_.end() || git->second.principal != g.principal || git->second.namespace_id != g.namespace_id ||
      git->second.generation != g.generation)
    return make_error(ErrorCode::authorization_grant_ended,
                      "grant " + std::to_string(g.grant_id.value) + " is not live", "grant_id");
  return Status::success();
}

Result<AuthorizedLookup> NamespaceAuthority::verify_claim(const NamespaceGrant& claim) const {
  AuthorizedLookup candidate(claim);
  KVRT_TRY(check(candidate));
  // check() matched principal, namespace id and generation; the salt digest
  // and name must be the authority's too, or the claim was not ours.
  if (!(grant_value(claim.grant_id, grants_.at(claim.grant_id)) == claim))
    return make_error(ErrorCode::authorization_grant_ended,
                      "grant " + std::to_string(claim.grant_id.value) + " does not match the claim", "grant_id");
  return candidate;
}

Result<HoldId> NamespaceAuthority::record_hold(const AuthorizedLookup& lookup, HoldKind kind, uint64_t subject) {
  KVRT_TRY(check(lookup));
  auto ticket = registry_.admit(lookup.namespace_name());
  KVRT_ASSERT(ticket.ok() && ticket->generation == lookup.generation(),
              "registry admitted a generation other than the checked current one");
  const HoldId id{next_hold_id_++};
  holds_.emplace(id, HoldRecord{kind, lookup.principal(), lookup.namespace_name(), lookup.generation(), subject,
                                std::move(ticket).value()});
  return id;
}

Status NamespaceAuthority::release_hold(HoldId hold) {
  auto it = holds_.find(hold);
  if (it == holds_.end())
    return make_error(ErrorCode::authorization_unknown_hold,
                      "hold " + std::to_string(hold.value) + " is not live (released twice or never recorded)", "hold");
  Status s = registry_.release(it->second.ticket);
  KVRT_ASSERT(s.ok(), "a live hold's registry admission was not live: " + s.error().describe());
  holds_.erase(it);
  return Status::success();
}

uint64_t NamespaceAuthority::live_holds(std::string_view name, NamespaceGeneration generation, HoldKind kind) const {
  return static_cast<uint64_t>(std::count_if(holds_.begin(), holds_.end(), [&](const auto& h) {
    return h.second.kind == kind && h.second.generation == generation && h.second.namespace_name == name;
  }));
}

const HoldRecord* NamespaceAuthority::hold(HoldId id) const {
  auto it = holds_.find(id);
  return it == holds_.end() ? nullptr : &it->second;
}

void NamespaceAuthority::end_grant(GrantId id) {
  auto it = grants_.find(id);
  KVRT_ASSERT(it != grants_.end(), "ending a grant that is not live");
  grant_by_principal_namespace_.erase({it->second.principal, it->second.namespace_id});
  principals_.at(it->second.principal).grants.erase(id);
  grants_.erase(it);
}

Result<PrincipalEndReceipt> NamespaceAuthority::end_principal(PrincipalId principal, bool bar) {
  auto pit = principals_.find(principal);
  if (pit == principals_.end()) return unauthenticated(principal_text(principal) + " is not configured");
  if (bar && pit->second.barred)
    return make_error(ErrorCode::authorization_principal_revoked,
                      "principal \"" + pit->second.name + "\" is already revoked", "principal");
  PrincipalEndReceipt r;
  r.principal = principal;
  r.principal_name = pit->second.name;
  r.ended_grants.assign(pit->second.grants.begin(), pit->second.grants.end());
  for (const auto& [id, h] : holds_)
    if (h.principal == principal) r.outstanding_holds.push_back(id);
  for (GrantId g : r.ended_grants) end_grant(g);
  if (bar) pit->second.barred = true;
  r.token_barred = pit->second.barred;
  return r;
}

Result<PrincipalEndReceipt> NamespaceAuthority::end_principal_grants(PrincipalId principal) {
  return end_principal(principal, false);
}

Result<PrincipalEndReceipt> NamespaceAuthority::revoke_principal(PrincipalId principal) {
  return end_principal(principal, true);
}

std::optional<NamespaceId> NamespaceAuthority::namespace_id(std::string_view name) const {
  NamespaceId id;
  if (find_namespace(name, &id) == nullptr) return std::nullopt;
  return id;
}

std::optional<PrincipalId> NamespaceAuthority::principal_id(std::string_view name) const {
  for (const auto& [id, p] : principals_)
    if (p.name == name) return id;
  return std::nullopt;
}

bool NamespaceAuthority::admitting(std::string_view name) const {
  const NamespaceState* ns = find_namespace(name);
  return ns != nullptr && ns->admitting;
}

const PurgeProgress* NamespaceAuthority::purge(PurgeId id) const {
  auto it = purges_.find(id);
  return it == purges_.end() ? nullptr : &it->second;
}

}  // namespace kvrt
