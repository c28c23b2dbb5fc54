#include "services/authorization/authorization_service.hpp"

#include <algorithm>
#include <string>

#include "services/identity/compatibility_manifest_builder.hpp"

namespace kvrt {

AuthorizationService::AuthorizationService(NamespaceAuthority authority, const AuthorizationConfig& config)
    : authority_(std::move(authority)) {
  for (const PrincipalConfig& p : config.principals) {
    allowed_[p.name] = p.namespaces;
    if (p.role == PrincipalRole::admin) admins_.insert(p.name);
  }
}

Result<OpenedSession> AuthorizationService::open_session(const HelloRequest& hello) {
  ++hellos_;
  Result<PrincipalId> principal = authority_.authenticate_hex(hello.token);
  if (!principal.ok()) {
    ++unauthenticated_;
    return principal.error();
  }
  std::string name;
  for (const auto& [n, namespaces] : allowed_)
    if (authority_.principal_id(n) == *principal) name = n;
  const SessionId id{next_session_++};
  sessions_[id.value] = SessionRecord{*principal, name, hello.worker_name, admins_.contains(name), {}};
  ++sessions_per_principal_[principal->value];
  OpenedSession out{id, name, {}, admins_.contains(name)};
  if (const auto it = allowed_.find(name); it != allowed_.end()) out.allowed_namespaces = it->second;
  return out;
}

Result<IssuedGrant> AuthorizationService::authorize(SessionId session, const AuthorizeRequest& request) {
  const auto s = sessions_.find(session.value);
  if (s == sessions_.end())
    return make_error(ErrorCode::session_ended, "session " + std::to_string(session.value) + " is not open", "session");
  Result<AuthorizedLookup> lookup = authority_.authorize(s->second.principal, request.namespace_name);
  if (!lookup.ok()) {
    ++denied_;
    return lookup.error();
  }
  ++grants_;
  const NamespaceGrant& g = lookup->grant();
  IssuedGrant out;
  CanonicalWriter w("kvrt.namespace_grant.v1");
  w.u64("grant_id", g.grant_id.value)
      .u64("principal", g.principal.value)
      .str("namespace", g.namespace_name)
      .u64("generation", g.generation.value);
  out.receipt = NamespaceGrantReceipt{g.grant_id.value, g.namespace_name, g.generation, w.finish(), 0, {}};
  // The index owners salt chains with the salt's digest: as secret as the
  // salt for separating tenants, and the salt itself never leaves this owner.
  out.for_indexes = SessionNamespaceGrant{g.namespace_name, g.generation, g.salt_digest.hex(), {}, {}};
  if (const GenerationRecord* rec = authority_.registry().find(g.namespace_name, g.generation)) {
    out.for_indexes.semantic_digest = reuse_semantic_digest(rec->facts.layout, rec->facts.artifact, rec->isolation);
    out.for_indexes.layout_digest = rec->layout_sha256;
    out.receipt.model_generation = rec->facts.layout.model_generation;
    out.receipt.adapter_identity = rec->facts.artifact.adapter_identity;
  }
  s->second.grants.insert_or_assign(g.namespace_name, *lookup);
  return out;
}

ReuseKeyAnswer AuthorizationService::reuse_key(SessionId session, const ReuseKeyRequest& request) const {
  auto denied = [](Error e) { return ReuseKeyAnswer{AuthorizationDenied{std::move(e)}, std::nullopt}; };
  const auto s = sessions_.find(session.value);
  if (s == sessions_.end())
    return denied(make_error(ErrorCode::authorization_unauthenticated,
                             "session " + std::to_string(session.value) + " is not open", "session"));
  const auto g = s->second.grants.find(request.namespace_name);
  if (g == s->second.grants.end())
    return denied(make_error(ErrorCode::authorization_namespace_denied, "this session holds no grant for the namespace",
                             "namespace_name"));
  if (Status held = authority_.check(g->second); !held.ok()) {
    if (held.error().code == ErrorCode::authorization_stale_generation) ++stale_generation_refusals_;
    return denied(held.error());
  }
  const GenerationRecord* rec = authority_.registry().find(g->second.namespace_name(), g->second.generation());
  if (rec == nullptr)
    return denied(make_error(ErrorCode::authorization_stale_generation, "the granted generation has no record",
                             "namespace_generation"));
  CoveredInput input;
  input.token_ids.assign(request.tokens.begin(), request.tokens.end());
  Result<CacheCompatibilityManifest> m =
      build_compatibility_manifest(rec->facts.layout, rec->facts.artifact, rec->isolation, input);
  if (!m.ok()) return ReuseKeyAnswer{g->second, std::nullopt};  // the attempt's build_key step names the error
  return ReuseKeyAnswer{g->second, KeyEvidence{std::move(m).value()}};
}

Status AuthorizationService::check_admin(SessionId session) const {
  const auto s = sessions_.find(session.value);
  if (s == sessions_.end())
    return make_error(ErrorCode::session_ended, "session " + std::to_string(session.value) + " is not open", "session");
  if (!s->second.admin)
    return make_error(ErrorCode::authorization_route_denied,
                      "principal \"" + s->second.principal_name + "\" is not an admin", "session");
  return Status::success();
}

Result<GenerationFacts> AuthorizationService::successor_facts(const std::string& namespace_name,
                                                              InvalidationCause cause,
                                                              const std::string& identity) const {
  const GenerationRecord* current = authority_.registry().current(namespace_name);
  if (current == nullptr)
    return make_error(ErrorCode::authorization_unknown_namespace,
                      "no cache namespace \"" + namespace_name + "\" is configured", "namespace_name");
  return live_successor_facts(cause, current->facts, identity);
}

Result<NamespaceInvalidationReceipt> AuthorizationService::apply(SessionId session,
                                                                 const NamespaceInvalidateRequest& request) {
  KVRT_TRY(check_admin(session));
  auto refused = [&](Error e) {
    ++invalidations_refused_;
    return e;
  };
  Result<GenerationFacts> successor =
      successor_facts(request.namespace_name, request.cause, request.successor_identity);
  if (!successor.ok()) return refused(successor.error());
  Result<NamespaceInvalidation> done = authority_.invalidate(request.namespace_name, request.cause, *successor);
  if (!done.ok()) return refused(done.error());
  ++invalidations_;
  grants_ended_by_invalidation_ += done->ended_grants.size();
  // The sessions' grants of the old generation are what the authority just
  // ended: a session's next reuse step finds its grant stale and is refused.
  const InvalidationReceipt& r = done->receipt;
  NamespaceInvalidationReceipt out;
  out.trace = request.trace;
  out.namespace_name = r.namespace_name;
  out.cause = r.cause;
  out.old_generation = r.old_generation;
  out.new_generation = r.new_generation;
  out.old_model_generation = r.old_model_generation;
  out.new_model_generation = r.new_model_generation;
  out.changed_facts = r.changed_facts;
  out.ended_grants = static_cast<uint32_t>(done->ended_grants.size());
  out.old_live_admissions = r.old_live_admissions;
  out.old_reclaimed = r.old_reclaimed;
  out.old_namespace_sha256 = r.old_namespace_sha256;
  out.new_namespace_sha256 = r.new_namespace_sha256;
  return out;
}

Result<AuthorizationService::BegunPurge> AuthorizationService::begin_purge(SessionId session,
                                                                           const NamespacePurgeRequest& request) {
  KVRT_TRY(check_admin(session));
  auto refused = [&](Error e) {
    ++purges_refused_;
    return e;
  };
  Result<GenerationFacts> successor =
      successor_facts(request.namespace_name, request.cause, request.successor_identity);
  if (!successor.ok()) return refused(successor.error());
  PurgeRequest plan;
  plan.cause = request.cause;
  plan.successor = *successor;
  plan.index_owners = {"prefix_index"};  // a node serves one index owner, hash chain or radix
  plan.cancel_live_leases = false;       // the node's receipts are revoked by the reuse coordinator
  plan.physical_owners = {"allocator"};
  plan.physical_mode = request.overwrite ? PhysicalReleaseMode::overwrite : PhysicalReleaseMode::release;
  // begin_purge checks everything step 2 needs, so step 2 cannot refuse
  // after step 1 closed the namespace.
  Result<PurgeStepReceipt> stop = authority_.begin_purge(request.namespace_name, plan);
  if (!stop.ok()) return refused(stop.error());
  const size_t grants_before = authority_.live_grants();
  Result<PurgeStepReceipt> advance = authority_.advance_purge(stop->purge);
  KVRT_ASSERT(advance.ok(), "purge step 2 refused after begin_purge accepted its successor");
  BegunPurge out{std::move(stop).value(), std::move(advance).value(),
                 static_cast<uint32_t>(grants_before - authority_.live_grants())};
  grants_ended_by_invalidation_ += out.ended_grants;
  return out;
}

Result<std::optional<PurgeId>> AuthorizationService::open_purge(SessionId session,
                                                                const std::string& namespace_name) const {
  KVRT_TRY(check_admin(session));
  Result<NamespaceStanding> s = authority_.standing(namespace_name);
  if (!s.ok()) return std::optional<PurgeId>{};  // begin_purge answers the unknown namespace
  return s->open_purge;
}

std::vector<std::string> AuthorizationService::purge_fault_point_names() {
  std::vector<std::string> names;
  for (PurgeStep s : {PurgeStep::advance_generation, PurgeStep::invalidate_index, PurgeStep::drain_leases,
                      PurgeStep::release_physical, PurgeStep::remove_external_copies})
    names.push_back("after_" + std::string(to_string(s)));
  return names;
}

void AuthorizationService::record_purge(bool completed, uint64_t duration_us, uint64_t receipts_revoked) {
  if (!completed) {
    ++purges_stopped_;
    return;
  }
  ++purges_completed_;
  purge_receipts_revoked_ += receipts_revoked;
  last_purge_us_ = duration_us;
  max_purge_us_ = std::max(max_purge_us_, duration_us);
}

Result<NamespaceStatusReceipt> AuthorizationService::apply(SessionId session,
                                                           const NamespaceStatusRequest& request) const {
  KVRT_TRY(check_admin(session));
  std::vector<std::string> names;
  if (request.namespace_name.empty())
    names = authority_.namespace_names();
  else
    names.push_back(request.namespace_name);
  std::sort(names.begin(), names.end());
  NamespaceStatusReceipt out;
  out.trace = request.trace;
  for (const std::string& name : names) {
    Result<NamespaceStanding> s = authority_.standing(name);
    if (!s.ok()) return make_error(s.error().code, s.error().reason, "namespace_name");
    NamespaceStatus st;
    st.namespace_name = s->namespace_name;
    st.generation = s->generation;
    st.model_generation = s->model_generation;
    st.admitting = s->admitting;
    st.open_purge = s->open_purge ? s->open_purge->value : 0;
    st.live_grants = s->live_grants;
    for (NamespaceGeneration g : s->frozen_generations) st.frozen_generations.push_back(g.value);
    st.live_lease_holds = s->lease_holds;
    st.live_receipt_holds = s->receipt_holds;
    st.invalidations = s->invalidations;
    if (s->last_cause) st.last_cause = std::string(to_string(*s->last_cause));
    out.namespaces.push_back(std::move(st));
  }
  return out;
}

Result<PoolDescriptorReceipt> AuthorizationService::apply(SessionId session, const PoolDescriptorRequest&) {
  const auto refuse = [this](Error e) -> Result<PoolDescriptorReceipt> {
    ++pool_descriptors_refused_;
    return e;
  };
  const auto s = sessions_.find(session.value);
  if (s == sessions_.end())
    return refuse(
        make_error(ErrorCode::session_ended, "session " + std::to_string(session.value) + " is not open", "session"));
  if (s->second.admin)
    return refuse(make_error(
        ErrorCode::authorization_route_denied,
        "principal \"" + s->second.principal_name + "\" is an admin: operators are never handed K/V", "session"));
  const auto allowed = allowed_.find(s->second.principal_name);
  if (allowed == allowed_.end() || allowed->second.empty())
    return refuse(make_error(ErrorCode::authorization_namespace_denied,
                             "principal \"" + s->second.principal_name + "\" may use no namespace, so no pool",
                             "session"));
  if (descriptor_pools_.empty())
    return refuse(make_error(ErrorCode::invalid_argument,
                             "this node's pool segments have names (the session receipt names them): attach them by "
                             "name",
                             "pool_segments"));
  const uint32_t domain = descriptor_plan_.domain_of_namespaces(allowed->second);
  if (domain >= descriptor_pools_.size())
    return refuse(make_error(ErrorCode::invalid_argument, "no pools serve this principal's trust domain", "session"));
  ++pool_descriptors_served_;
  return PoolDescriptorReceipt{descriptor_pools_[domain]};
}

Status AuthorizationService::end_session(SessionId session, bool revoke) {
  const auto s = sessions_.find(session.value);
  if (s == sessions_.end())
    return make_error(ErrorCode::session_ended, "session " + std::to_string(session.value) + " is not open", "session");
  const PrincipalId principal = s->second.principal;
  sessions_.erase(s);
  ++sessions_ended_;
  uint32_t& live = sessions_per_principal_[principal.value];
  if (live > 0) --live;
  if (live == 0) sessions_per_principal_.erase(principal.value);
  // A principal's grants end with its last session (another session of the
  // same principal keeps them; a grant is the principal's, 0x0CE).
  if (revoke) {
    Result<PrincipalEndReceipt> r = authority_.revoke_principal(principal);
    if (!r.ok()) return r.error();
  } else if (!sessions_per_principal_.contains(principal.value)) {
    Result<PrincipalEndReceipt> r = authority_.end_principal_grants(principal);
    if (!r.ok()) return r.error();
  }
  return Status::success();
}

Status AuthorizationService::validate() const {
  KVRT_TRY(authority_.validate());
  std::map<uint64_t, uint32_t> per_principal;
  for (const auto& [id, record] : sessions_) ++per_principal[record.principal.value];
  if (per_principal != sessions_per_principal_)
    return make_error(ErrorCode::invariant_violated, "session counts per principal disagree with the sessions");
  return Status::success();
}

OwnerStats AuthorizationService::stats() const {
  OwnerStats out;
  out.owner = "authorization";
  auto put = [&](std::string name, int64_t value) { out.values.push_back(StatValue{std::move(name), value}); };
  put("live_sessions", static_cast<int64_t>(sessions_.size()));
  put("live_grants", static_cast<int64_t>(authority_.live_grants()));
  put("hellos", static_cast<int64_t>(hellos_));
  put("rejected_unauthenticated", static_cast<int64_t>(unauthenticated_));
  put("grants_issued", static_cast<int64_t>(grants_));
  put("rejected_namespace", static_cast<int64_t>(denied_));
  put("sessions_ended", static_cast<int64_t>(sessions_ended_));
  put("invalidations", static_cast<int64_t>(invalidations_));
  put("invalidations_refused", static_cast<int64_t>(invalidations_refused_));
  put("grants_ended_by_invalidation", static_cast<int64_t>(grants_ended_by_invalidation_));
  put("stale_generation_refusals", static_cast<int64_t>(stale_generation_refusals_));
  put("purges_completed", static_cast<int64_t>(purges_completed_));
  put("purges_refused", static_cast<int64_t>(purges_refused_));
  put("purges_stopped", static_cast<int64_t>(purges_stopped_));
  put("purge_receipts_revoked", static_cast<int64_t>(purge_receipts_revoked_));
  put("last_purge_us", static_cast<int64_t>(last_purge_us_));
  put("max_purge_us", static_cast<int64_t>(max_purge_us_));
  put("pool_descriptors_served", static_cast<int64_t>(pool_descriptors_served_));
  put("pool_descriptors_refused", static_cast<int64_t>(pool_descriptors_refused_));
  return out;
}

}  // namespace kvrt
