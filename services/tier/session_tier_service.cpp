#include "services/tier/session_tier_service.hpp"

#include "services/prefix/request_identity.hpp"

namespace kvrt {

namespace {
constexpr std::string_view kDefaultContract = "absolute";
}

Result<std::unique_ptr<SessionTierService>> SessionTierService::open(const SessionTierConfig& config,
                                                                     std::vector<uint64_t> group_row_bytes) {
  if (group_row_bytes.empty())
    return make_error(ErrorCode::invalid_argument, "a layout without cache groups", "group_row_bytes");
  Result<SessionTier> tier = SessionTier::open(config);
  if (!tier.ok()) return tier.error();
  return std::unique_ptr<SessionTierService>(
      new SessionTierService(std::move(tier).value(), std::move(group_row_bytes)));
}

ReuseKeyRequest SessionTierService::key_request(const SessionSaveRequest& r) {
  return ReuseKeyRequest{r.namespace_name, r.tokens};
}

ReuseKeyRequest SessionTierService::key_request(const SessionResumeRequest& r) {
  return ReuseKeyRequest{r.namespace_name, r.prompt};
}

Result<SessionHistoryIdentity> SessionTierService::identity_for(const ReuseKeyAnswer& key, const std::string& label,
                                                                const RequestIdentity& extras,
                                                                const std::string& contract) const {
  if (const auto* denied = std::get_if<AuthorizationDenied>(&key.authorization)) return denied->error;
  if (label.empty()) return make_error(ErrorCode::invalid_argument, "a session label is required", "session_label");
  if (!key.key) return make_error(ErrorCode::invariant_violated, "an authorization without its key", "session_tier");
  const AuthorizedLookup& grant = std::get<AuthorizedLookup>(key.authorization);
  const CacheCompatibilityManifest& m = key.key->manifest;
  Result<std::string> material = identity_material(extras);
  if (!material.ok()) return material.error();
  SessionHistoryIdentity id;
  id.session_id = label;
  id.tenant_id = "principal-" + std::to_string(grant.principal().value);
  id.namespace_id = grant.namespace_name();
  id.namespace_generation = grant.generation();
  // The rows mean what the model, its weights and the request's identity
  // extras (an adapter, multimodal inputs) made them.
  CanonicalWriter w("kvrt.SessionTierSemantic.v1");
  w.digest("manifest", reuse_semantic_digest(m)).str("identity", *material);
  id.semantic_digest = w.finish();
  id.layout_digest = m.cache_layout_sha256;
  id.position_truncation_contract = contract.empty() ? std::string(kDefaultContract) : contract;
  return id;
}

Result<SessionSaveReceipt> SessionTierService::save(const ReuseKeyAnswer& key, const SessionSaveRequest& r) {
  Result<SessionHistoryIdentity> id = identity_for(key, r.session_label, r.identity, r.position_contract);
  if (!id.ok()) return id.error();
  // Rows of the node's layout only: a resume hands them back to be written
  // into pool blocks as they are.
  bool shaped = r.group_rows.size() == group_row_bytes_.size();
  for (size_t g = 0; shaped && g < group_row_bytes_.size(); ++g)
    shaped = r.group_rows[g].size() == r.tokens.size() * group_row_bytes_[g];
  if (!shaped)
    return make_error(ErrorCode::invalid_argument,
                      "a history of " + std::to_string(r.tokens.size()) +
                          " tokens needs one group of that many rows of B_row,g bytes per cache group (" +
                          std::to_string(group_row_bytes_.size()) + " groups)",
                      "group_rows");
  Result<SessionReuseReceipt> saved = tier_.demote(SessionHistory{*id, r.tokens, r.group_rows});
  if (!saved.ok()) return saved.error();
  return SessionSaveReceipt{r.trace, std::move(*saved)};
}

Result<SessionResumeReceipt> SessionTierService::resume(const ReuseKeyAnswer& key, const SessionResumeRequest& r) {
  Result<SessionHistoryIdentity> id = identity_for(key, r.session_label, r.identity, r.position_contract);
  if (!id.ok()) return id.error();
  SessionResumeAnswer a = tier_.resume(*id, r.prompt);
  SessionResumeReceipt out;
  out.trace = r.trace;
  if (auto* resumed = std::get_if<SessionResume>(&a)) {
    out.outcome = SessionResumed{std::move(resumed->receipt), std::move(resumed->group_rows)};
  } else {
    const SessionResumeRefused& no = std::get<SessionResumeRefused>(a);
    out.outcome = SessionResumeRefusal{no.refusal, reason_of(no.refusal), no.detail};
  }
  return out;
}

uint64_t SessionTierService::retire(const std::string& namespace_id, NamespaceGeneration purged) {
  return tier_.retire(namespace_id, NamespaceGeneration{purged.value + 1});
}

void SessionTierService::put_stats(OwnerStats& out) const {
  const SessionTierStats s = tier_.stats();
  auto put = [&](std::string name, uint64_t value) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(value)});
  };
  put("tier_objects", s.objects);
  put("tier_bytes", s.bytes);
  put("tier_saves", s.demotions);
  put("tier_saved_bytes", s.demoted_bytes);
  put("tier_resumes", s.resumes);
  put("tier_resumed_rows", s.resumed_rows);
  put("tier_refusals", s.refusals);
  for (size_t i = 0; i < kSessionTierRefusalCount; ++i)
    put("tier_refused_" + std::string(to_string(static_cast<SessionTierRefusal>(i))), s.refused_by[i]);
  put("tier_evicted", s.evicted);
  put("tier_retired", s.retired);
}

}  // namespace kvrt
