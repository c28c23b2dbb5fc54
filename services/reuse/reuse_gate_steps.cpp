// Steps 1-5 of the executable-reuse transaction (spec 0x0CD): authorization,
// key, candidate, leases and versions. See reuse_attempt.hpp for the outcome
// rules. Every check runs before the first member is written.
#include <algorithm>
#include <set>
#include <string>

#include "services/identity/compatibility_manifest_builder.hpp"
#include "services/reuse/reuse_attempt.hpp"

namespace kvrt {
namespace {

Error mismatch(ReuseStep step, std::string reason) {
  return make_error(ErrorCode::reuse_evidence_mismatch, std::move(reason), std::string(to_string(step)));
}

std::string gen(NamespaceGeneration g) { return std::to_string(g.value); }

const PoolGenerationRef* find_pool(const std::vector<PoolGenerationRef>& pools, PoolId pool) {
  auto it = std::find_if(pools.begin(), pools.end(), [&](const PoolGenerationRef& p) { return p.pool == pool; });
  return it == pools.end() ? nullptr : &*it;
}

}  // namespace

Result<StepOutcome> ReuseAttempt::step_authorize(const AuthorizationAnswer& a) {
  constexpr ReuseStep step = ReuseStep::authorize;
  if (const auto* denied = std::get_if<AuthorizationDenied>(&a)) {
    const auto reason = authorization_rejection(denied->error.code);
    if (!reason)
      return mismatch(step,
                      "a denial carries an authorization_* error, not " + std::string(to_string(denied->error.code)));
    return reject(step, *reason, denied->error.reason);
  }
  const AuthorizedLookup& lookup = std::get<AuthorizedLookup>(a);
  if (lookup.namespace_name() != request_.namespace_name)
    return reject(step, RejectionReason::cross_namespace_key,
                  "authorized namespace \"" + lookup.namespace_name() + "\" is not the requested \"" +
                      request_.namespace_name + "\"");
  grant_ = lookup.grant();
  e_.namespace_generation = lookup.generation();
  next_ = ReuseStep::build_key;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_build_key(const KeyEvidence& k) {
  constexpr ReuseStep step = ReuseStep::build_key;
  const CacheCompatibilityManifest& m = k.manifest;
  KVRT_TRY(validate_compatibility_manifest(m));
  if (m.cache_isolation_namespace != grant_->namespace_name)
    return reject(step, RejectionReason::cross_namespace_key,
                  "key built for namespace \"" + m.cache_isolation_namespace + "\", authorized \"" +
                      grant_->namespace_name + "\"");
  if (cache_salt_digest(m.cache_salt) != grant_->salt_digest)
    return reject(step, RejectionReason::cross_namespace_key, "key built under a salt other than the namespace's");
  if (m.namespace_generation != grant_->generation)
    return reject(step, RejectionReason::stale_namespace_generation,
                  "key built for generation " + gen(m.namespace_generation) + ", authorized generation " +
                      gen(grant_->generation));
  e_.semantic_digest = reuse_semantic_digest(m);
  e_.layout_digest = m.cache_layout_sha256;
  token_ids_ = m.covered_token_ids;
  next_ = ReuseStep::lookup_candidate;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_lookup(const CandidateAnswer& answer) {
  constexpr ReuseStep step = ReuseStep::lookup_candidate;
  if (std::holds_alternative<IndexMiss>(answer)) return reject(step, RejectionReason::no_candidate, "index miss");
  const ReuseCandidate& c = std::get<ReuseCandidate>(answer);

  // Structure first: an answer that cannot describe this request is the
  // index's or the caller's error, not a funnel outcome.
  if (c.covered_interval.begin >= c.covered_interval.end || c.covered_interval.end > token_ids_.size())
    return mismatch(step, "covered interval [" + std::to_string(c.covered_interval.begin) + ", " +
                              std::to_string(c.covered_interval.end) + ") is empty or beyond the request's " +
                              std::to_string(token_ids_.size()) + " tokens");
  if (c.physical_handles.empty()) return mismatch(step, "a candidate names at least one physical handle");
  if ((c.source == ReuseSource::radix_index) == c.path_node_ids.empty())
    return mismatch(step, "radix candidates, and only they, name path nodes");
  std::set<PoolId> listed, used;
  for (const PoolGenerationRef& p : c.pool_generations)
    if (!listed.insert(p.pool).second) return mismatch(step, "pool " + std::to_string(p.pool.value) + " listed twice");
  for (const PhysicalBlockHandle& h : c.physical_handles) used.insert(h.pool);
  if (listed != used) return mismatch(step, "pool generations must name exactly the pools of the handles");

  // G_compat: equality-bearing facts (0x01A) and the collision witness (0x07F).
  if (c.namespace_name != grant_->namespace_name)
    return reject(step, RejectionReason::isolation_mismatch,
                  "candidate of namespace \"" + c.namespace_name + "\", authorized \"" + grant_->namespace_name + "\"");
  if (c.semantic_digest != *e_.semantic_digest)
    return reject(step, RejectionReason::semantic_mismatch, "candidate d_sem differs from the key's");
  if (c.layout_digest != *e_.layout_digest)
    return reject(step, RejectionReason::layout_mismatch, "candidate d_layout differs from the key's");
  if (request_.require_collision_witness && !c.token_witness)
    return reject(step, RejectionReason::collision_witness_missing, "policy requires a token witness");
  bool witness_verified = false;
  if (c.token_witness) {
    const std::span<const uint32_t> covered(token_ids_.data() + c.covered_interval.begin,
                                            c.covered_interval.end - c.covered_interval.begin);
    if (*c.token_witness != covered_tokens_digest(covered))
      return reject(step, RejectionReason::collision_witness_mismatch,
                    "stored tokens differ from the request's over the covered interval");
    witness_verified = true;
  }
  // The candidate's generation: a stale entry from before an invalidation.
  if (c.namespace_generation != *e_.namespace_generation)
    return reject(step, RejectionReason::stale_candidate_generation,
                  "candidate published under generation " + gen(c.namespace_generation) + ", current " +
                      gen(*e_.namespace_generation));

  candidate_ = c;
  witness_verified_ = witness_verified;
  e_.index_version = c.index_version;
  e_.tree_version = c.tree_version;
  e_.pool_generations = c.pool_generations;
  next_ = ReuseStep::acquire_leases;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_acquire_leases(const LeaseAnswer& answer) {
  constexpr ReuseStep step = ReuseStep::acquire_leases;
  if (const auto* refused = std::get_if<LeaseRefused>(&answer))
    return reject(step, RejectionReason::lease_unavailable, refused->reason);
  const LeaseGrant& g = std::get<LeaseGrant>(answer);
  if (g.leases.empty()) return mismatch(step, "a lease grant names at least one lease");
  if (std::set<LeaseId>(g.leases.begin(), g.leases.end()).size() != g.leases.size())
    return mismatch(step, "a lease id appears twice");
  // require(leases.cover(candidate.path_and_physical_refs)) of 0x0CD.
  for (const PhysicalBlockHandle& h : candidate_->physical_handles)
    if (std::find(g.covered_handles.begin(), g.covered_handles.end(), h) == g.covered_handles.end()) {
      // Acquired but insufficient: the rejection lists them for release.
      return reject(step, RejectionReason::lease_incomplete,
                    "block " + std::to_string(h.block.value) + "@" + std::to_string(h.generation.value) +
                        " is not covered by a lease",
                    g.leases);
    }
  for (RadixNodeId n : candidate_->path_node_ids)
    if (std::find(g.covered_path_nodes.begin(), g.covered_path_nodes.end(), n) == g.covered_path_nodes.end()) {
      return reject(step, RejectionReason::lease_incomplete,
                    "path node " + std::to_string(n.value) + " is not covered by a lease", g.leases);
    }
  leases_ = g.leases;
  next_ = ReuseStep::validate_versions;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_validate_versions(const VersionAnswer& v) {
  constexpr ReuseStep step = ReuseStep::validate_versions;
  for (const PoolGenerationRef& p : e_.pool_generations)
    if (find_pool(v.pool_generations, p.pool) == nullptr)
      return mismatch(step, "no current generation reported for pool " + std::to_string(p.pool.value));
  if (v.index_version != *e_.index_version)
    return reject(
        step, RejectionReason::stale_index_version,
        "index version " + std::to_string(v.index_version) + ", candidate read " + std::to_string(*e_.index_version));
  if (v.tree_version != *e_.tree_version)
    return reject(step, RejectionReason::stale_tree_version,
                  "tree version " + std::to_string(v.tree_version.value) + ", candidate read " +
                      std::to_string(e_.tree_version->value));
  for (const PoolGenerationRef& p : e_.pool_generations) {
    const PoolGenerationRef* now = find_pool(v.pool_generations, p.pool);
    if (now->generation != p.generation)
      return reject(step, RejectionReason::stale_pool_generation,
                    "pool " + std::to_string(p.pool.value) + " generation " + std::to_string(now->generation.value) +
                        ", candidate read " + std::to_string(p.generation.value));
  }
  if (v.valid_frontier_tokens < candidate_->covered_interval.end)
    return reject(step, RejectionReason::frontier_not_valid,
                  "valid rows end at " + std::to_string(v.valid_frontier_tokens) + ", reuse needs " +
                      std::to_string(candidate_->covered_interval.end));
  read_publication_generation_ = v.publication_generation;
  next_ = ReuseStep::validate_positions;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

}  // namespace kvrt
