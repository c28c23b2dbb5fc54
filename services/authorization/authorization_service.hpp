#pragma once
// AuthorizationService: the namespace / authorization owner as the node
// serves it. It wraps the NamespaceAuthority core (principals,
// tokens, namespaces, generations, grants, purge) with the node's sessions: a
// worker authenticates once with its bearer token and gets a session; every
// namespace grant belongs to a session, and when the session ends its grants
// end with it (revocation of a worker that went away, 0x0CE).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/authorization/namespace_authority.hpp"
#include "services/authorization/namespace_grants.hpp"
#include "services/authorization/trust_domain_plan.hpp"
#include "services/common/fault_points.hpp"
#include "services/reuse/reuse_step_answers.hpp"

namespace kvrt {

struct OpenedSession {
  SessionId session;
  std::string principal;
  std::vector<std::string> allowed_namespaces;
  bool admin = false;  // the principal's role is admin (services/session/routes.hpp, RouteAccess)
};

// A grant as the index owners must hear it (salt digest, not the salt).
struct IssuedGrant {
  NamespaceGrantReceipt receipt;      // for the worker
  SessionNamespaceGrant for_indexes;  // for the index owners
};

class AuthorizationService {
 public:
  AuthorizationService(NamespaceAuthority authority, const AuthorizationConfig& config);

  Result<OpenedSession> open_session(const HelloRequest& hello);
  Result<IssuedGrant> authorize(SessionId session, const AuthorizeRequest& request);
  // Steps 1-2 of the executable-reuse transaction (0x0CD): the session's
  // latest grant for the namespace, checked now (a revoked principal, a
  // closed or advanced generation, an ended grant is a denial), and the
  // request's key built from that generation's facts. A session that holds
  // no grant for the namespace is denied (namespace_denied) before any index
  // sees the tokens (0x0CE "Authorization Before Lookup").
  ReuseKeyAnswer reuse_key(SessionId session, const ReuseKeyRequest& request) const;
  // The admin routes (an admin session only; the session actor already
  // refuses a worker's): invalidate makes the namespace's successor
  // generation current (NamespaceAuthority::invalidate, the successor's
  // facts from live_successor_facts). The caller must then tell the index
  // owners (advance_generation), before any grant of the new generation is
  // issued, so that they refuse every grant of the old one.
  Result<NamespaceInvalidationReceipt> apply(SessionId session, const NamespaceInvalidateRequest& request);
  Result<NamespaceStatusReceipt> apply(SessionId session, const NamespaceStatusRequest& request) const;

  // The purge route's authority steps, driven by NodePurge (node_purge.hpp),
  // which also drives the other owners' parts. begin_purge performs 0x0CE
  // steps 1 and 2 at once (the successor's facts as for invalidate): g
  // stops admitting, g+1 becomes current, g's grants end. Refused, nothing
  // changes.
  struct BegunPurge {
    PurgeStepReceipt stop_admitting;
    PurgeStepReceipt advance_generation;
    uint32_t ended_grants = 0;
  };
  Result<BegunPurge> begin_purge(SessionId session, const NamespacePurgeRequest& request);
  // The open purge of the namespace, if any, for an admin session (a purge
  // that stopped open is resumed, node_purge.hpp).
  Result<std::optional<PurgeId>> open_purge(SessionId session, const std::string& namespace_name) const;
  // Fault-injection runs: "after_<step>" for steps 2-6 stops a node purge
  // there, open (NodePurge; the node names them under owner "purge").
  FaultPoints& purge_faults() { return purge_faults_; }
  static std::vector<std::string> purge_fault_point_names();
  Result<PurgeStepReceipt> advance_purge(PurgeId purge) { return authority_.advance_purge(purge); }
  Status acknowledge_purge_work(PurgeId purge, PurgeWorkId item) {
    return authority_.acknowledge_purge_work(purge, item);
  }
  // A purge route's end, for the statistics: completed, or stopped open.
  void record_purge(bool completed, uint64_t duration_us, uint64_t receipts_revoked);

  // Unnamed pool segments: the pools whose descriptors a worker session may
  // receive, per trust domain (`pools[d]`: domain d's under `plan`; the node
  // sets them once, before it serves). apply answers which of them the
  // session's principal may map: its domain's, for a worker principal
  // allowed at least one namespace; nothing is ever handed to an admin
  // (operators hold no K/V). The session channel attaches the descriptors.
  // Errors: session_ended, authorization_route_denied (admin),
  // authorization_namespace_denied (no namespace allowed), invalid_argument
  // on "pool_segments" (the node's pools have names: attach those).
  void serve_pool_descriptors(std::vector<std::vector<PoolAttachment>> pools, TrustDomainPlan plan) {
    descriptor_pools_ = std::move(pools);
    descriptor_plan_ = std::move(plan);
  }
  Result<PoolDescriptorReceipt> apply(SessionId session, const PoolDescriptorRequest& request);

  // Ends the session's grants; the principal keeps its token (a worker may
  // reconnect) unless `revoke` bars it.
  Status end_session(SessionId session, bool revoke = false);

  size_t live_sessions() const { return sessions_.size(); }
  OwnerStats stats() const;
  Status validate() const;
  const NamespaceAuthority& authority() const { return authority_; }

 private:
  struct SessionRecord {
    PrincipalId principal;
    std::string principal_name;
    std::string worker_name;
    bool admin = false;
    std::map<std::string, AuthorizedLookup> grants;  // namespace -> the latest grant this session was issued
  };
  Status check_admin(SessionId session) const;
  // The successor facts an invalidation or a purge of the namespace makes
  // current (live_successor_facts); unknown namespace otherwise.
  Result<GenerationFacts> successor_facts(const std::string& namespace_name, InvalidationCause cause,
                                          const std::string& identity) const;

  NamespaceAuthority authority_;
  std::map<std::string, std::vector<std::string>> allowed_;  // principal -> namespaces (config)
  std::set<std::string> admins_;                             // principals whose role is admin (config)
  std::map<uint64_t, SessionRecord> sessions_;
  std::map<uint64_t, uint32_t> sessions_per_principal_;
  uint64_t next_session_ = 1;
  uint64_t hellos_ = 0, unauthenticated_ = 0, grants_ = 0, denied_ = 0, sessions_ended_ = 0;
  uint64_t invalidations_ = 0, invalidations_refused_ = 0, grants_ended_by_invalidation_ = 0;
  mutable uint64_t stale_generation_refusals_ = 0;
  uint64_t purges_completed_ = 0, purges_refused_ = 0, purges_stopped_ = 0, purge_receipts_revoked_ = 0;
  uint64_t last_purge_us_ = 0, max_purge_us_ = 0;
  std::vector<std::vector<PoolAttachment>> descriptor_pools_;  // [trust domain] unnamed pool segments
  TrustDomainPlan descriptor_plan_ = TrustDomainPlan::shared();
  uint64_t pool_descriptors_served_ = 0, pool_descriptors_refused_ = 0;
  FaultPoints purge_faults_;
};

}  // namespace kvrt
