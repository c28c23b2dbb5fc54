#include "services/prefix/prefix_service.hpp"

#include <string>

#include "services/prefix/publication_range.hpp"
#include "services/prefix/request_identity.hpp"

namespace kvrt {

Result<PrefixService> PrefixService::create(PrefixIndexConfig config) {
  // The node's index is ungated: authorization runs here, before the index,
  // and namespaces separate by salt (see the header).
  config.registry = nullptr;
  Result<PrefixIndex> index = PrefixIndex::create(std::move(config));
  if (!index.ok()) return index.error();
  Result<PrefixScope> scope = index->local_scope();
  if (!scope.ok()) return scope.error();
  return PrefixService(std::move(*index), std::move(*scope));
}

void PrefixService::grant(SessionId session, SessionNamespaceGrant g) { grants_.grant(session, std::move(g)); }

std::vector<LeaseId> PrefixService::advance_generation(const std::string& name, NamespaceGeneration generation) {
  grants_.advance_generation(name, generation);
  ++retraction_version_;
  return {};
}

void PrefixService::end_session(SessionId session) { grants_.end_session(session); }

Result<BlockExtrasPlan> PrefixService::authorized_plan(SessionId session, const std::string& name,
                                                       const RequestIdentity& identity,
                                                       NamespaceGeneration computed_under) const {
  Result<SessionNamespaceGrant> granted = grants_.for_publication(session, name, computed_under);
  if (!granted.ok()) return granted.error();
  const SessionNamespaceGrant* g = &*granted;
  // The salt binds namespace, salt and generation: a later generation hashes
  // differently, so candidates of a revoked generation never match (0x0CE
  // revocation step 3). The request's identity extras are read only once
  // the grant holds (authorization before anything else, 0x0CE).
  Result<RequestExtras> extras =
      identity_extras(identity, name + "\x1f" + g->salt + "\x1fg" + std::to_string(g->generation.value));
  if (!extras.ok()) return extras.error();
  return index_.extras_plan(scope_, *extras);
}

Result<PrefixMatchReceipt> PrefixService::match(SessionId session, const PrefixMatchOp& op) {
  Result<BlockExtrasPlan> plan = authorized_plan(session, op.namespace_name, op.identity);
  if (!plan.ok()) {
    if (plan.error().code == ErrorCode::authorization_namespace_denied) ++unauthorized_;
    if (plan.error().code == ErrorCode::authorization_stale_generation) ++stale_generation_;
    if (const auto reason = authorization_rejection(plan.error().code)) funnel_.record_refused(*reason);
    return plan.error();
  }
  Result<PrefixMatchReceipt> r = receipt_for(session, op, *plan);
  if (!r.ok()) return r.error();
  ++lookups_;
  funnel_.record_lookup(r->runtime_hit_tokens);
  lookup_prompt_tokens_ += r->prompt_tokens;
  lookup_hit_tokens_ += r->runtime_hit_tokens;
  partial_hits_ += r->copy_valid_partial_rows > 0 ? 1 : 0;
  return r;
}

namespace {
Error no_handoff() {
  return make_error(ErrorCode::invalid_argument,
                    "this node's prefix index is the hash chain ([node] prefix_index = \"hash_chain\"); the scheduler "
                    "handoff (0x08G) locks a radix path: run the node with prefix_index = \"radix\"",
                    "handoff");
}
}  // namespace

Result<RadixSchedulerHandoffReceipt> PrefixService::handoff(SessionId, const PrefixHandoffOp&) { return no_handoff(); }

Result<HandoffDispositionReceipt> PrefixService::dispose_handoff(SessionId, const PrefixHandoffDispositionOp&) {
  return no_handoff();
}

Result<PrefixMatchReceipt> PrefixService::peek(SessionId session, const PrefixMatchOp& op) {
  // The hash chain's lookup is const already: a peek differs from a match
  // only in what it counts (nothing of the lookup or reuse funnel).
  Result<BlockExtrasPlan> plan = authorized_plan(session, op.namespace_name, op.identity);
  if (!plan.ok()) return plan.error();
  Result<PrefixMatchReceipt> r = receipt_for(session, op, *plan);
  if (r.ok()) ++peeks_;
  return r;
}

Result<PrefixMatchReceipt> PrefixService::receipt_for(SessionId session, const PrefixMatchOp& op,
                                                      const BlockExtrasPlan& plan) const {
  Result<PrefixMatch> m = index_.lookup(
      scope_, PrefixLookupArgs{op.request, op.request_generation, op.tokens, &plan, op.logits_path, {}}, nullptr);
  if (!m.ok()) return m.error();
  m->receipt.namespace_id = op.namespace_name;
  m->receipt.namespace_generation = grants_.current(session, op.namespace_name)->generation;
  m->receipt.receipt_sha256 = canonical_digest(m->receipt);
  return std::move(m->receipt);
}

Result<BlockExtrasPlan> PrefixService::publication_plan(SessionId session, const PrefixPublishOp& op) const {
  Result<BlockExtrasPlan> plan = authorized_plan(session, op.namespace_name, op.identity, op.computed_generation);
  if (!plan.ok()) return plan.error();
  KVRT_TRY(check_publication_range(op, index_.block_tokens(),
                                   index_.config().policy == ReusePolicy::immutable_partial_tail));
  return plan;
}

Status PrefixService::check_tail_block(const PrefixPublishOp& op, const BlockTableView& table) const {
  // Everything publish_tail would refuse about the block, checked before the
  // full blocks are recorded: a publication is decided whole or not at all.
  for (size_t g = 0; g < table.groups.size(); ++g) {
    if (op.end_block >= table.groups[g].size())
      return make_error(ErrorCode::table_out_of_bounds,
                        "request maps " + std::to_string(table.groups[g].size()) + " blocks in group " +
                            std::to_string(g) + "; the tail is block " + std::to_string(op.end_block),
                        "tail_rows");
    const BlockTableEntry& e = table.groups[g][op.end_block];
    if (e.valid_rows < op.tail_rows)
      return make_error(ErrorCode::row_not_valid,
                        "block " + std::to_string(e.handle.block.value) + " has " + std::to_string(e.valid_rows) +
                            " committed rows; the tail covers " + std::to_string(op.tail_rows),
                        "tail_rows");
  }
  return Status::success();
}

Status PrefixService::check_publication(SessionId session, const PrefixPublishOp& op) const {
  Result<BlockExtrasPlan> plan = publication_plan(session, op);
  return plan.ok() ? Status::success() : Status(plan.error());
}

Result<DecidedPublication> PrefixService::decide_publication(SessionId session, const PrefixPublishOp& op,
                                                             const BlockTableView& table) {
  BlockExtrasPlan plan;
  KVRT_TRY_ASSIGN(plan, publication_plan(session, op));
  std::vector<std::vector<SnapshotBlock>> groups(table.groups.size());
  for (size_t g = 0; g < table.groups.size(); ++g)
    for (const BlockTableEntry& e : table.groups[g])
      groups[g].push_back(SnapshotBlock{e.handle, e.valid_rows, e.cache_key});
  BlockTableSnapshotTarget target(op.request, index_.block_tokens(), std::move(groups));
  std::vector<BlockHash> hashes;
  index_.extend_hashes(scope_, op.tokens, plan, hashes);
  if (op.tail_rows > 0) KVRT_TRY(check_tail_block(op, table));
  PublishOutcome outcome;
  KVRT_TRY_ASSIGN(outcome, index_.publish_blocks(
                               scope_, target,
                               PrefixPublishArgs{op.request, op.tokens, hashes, &plan, op.first_block, op.end_block}));
  if (op.tail_rows > 0) {
    // A block that already carries another identity (a tail of other rows
    // published before) keeps it: an immutable block has one key. The full
    // blocks stand either way.
    Result<PublishOutcome> tail = index_.publish_tail(
        scope_, target, PrefixTailArgs{op.request, op.tokens, hashes, &plan, op.end_block, op.tail_rows});
    if (tail.ok()) {
      outcome.published += tail->published;
      outcome.duplicates += tail->duplicates;
      outcome.already += tail->already;
      tails_published_ += tail->published > 0 ? 1 : 0;
    } else {
      ++tails_refused_;
    }
  }
  ++publications_;
  if (Result<SessionNamespaceGrant> g = grants_.current(session, op.namespace_name); g.ok())
    published_digests_.record(*g);
  DecidedPublication out;
  out.receipt = PrefixPublishReceipt{op.request, outcome.published, outcome.duplicates, outcome.already,
                                     index_.publication_generation()};
  out.tags = target.tags();
  return out;
}

std::vector<LeaseId> PrefixService::confirm_publication(DecidedPublication& publication,
                                                        const PublicationAnswer& answer) {
  std::vector<Status> results(publication.tags.size());
  for (size_t i = 0; i < results.size(); ++i)
    if (i >= answer.tags_applied.size() || answer.tags_applied[i] == 0)
      results[i] = make_error(ErrorCode::unknown_physical, "the allocator refused the tag");
  publication.receipt.published -= confirm_tags(publication.tags, results);
  return {};
}

uint32_t PrefixService::confirm_tags(const std::vector<CacheKeyTag>& tags, const std::vector<Status>& results) {
  std::vector<AllocatorEvent> withdrawn;
  for (size_t i = 0; i < tags.size() && i < results.size(); ++i)
    if (!results[i].ok())
      withdrawn.push_back(AllocatorEvent{AllocatorEvent::Kind::cache_key_evicted, tags[i].handle, tags[i].cache_key});
  tags_refused_ += withdrawn.size();
  if (!withdrawn.empty()) {
    index_.absorb(withdrawn);
    ++retraction_version_;
  }
  return static_cast<uint32_t>(withdrawn.size());
}

AbsorbOutcome PrefixService::absorb(std::span<const AllocatorEvent> events) {
  const AbsorbOutcome out = index_.absorb(events);
  if (out.removed > 0) ++retraction_version_;
  return out;
}

Result<CandidateAnswer> PrefixService::reuse_candidate(SessionId session, const PrefixMatchOp& op) {
  const uint64_t version = retraction_version_;
  Result<PrefixMatchReceipt> m = match(session, op);
  if (!m.ok()) return m.error();
  if (m->runtime_hit_tokens == 0) return CandidateAnswer(IndexMiss{});
  ReuseCandidate c;
  KVRT_TRY_ASSIGN(
      c, candidate_of_hit(ReuseSource::prefix_index, op, *m, published_digests_, index_.config().collision_witness));
  c.index_version = version;
  return CandidateAnswer(std::move(c));
}

OwnerStats PrefixService::stats() const {
  OwnerStats out;
  out.owner = "prefix_index";
  auto put = [&](std::string name, int64_t value) { out.values.push_back(StatValue{std::move(name), value}); };
  put("cached_block_entries", static_cast<int64_t>(index_.cached_blocks()));
  put("hash_keys", static_cast<int64_t>(index_.hash_keys()));
  put("publication_generation", static_cast<int64_t>(index_.publication_generation()));
  put("lookups", static_cast<int64_t>(lookups_));
  put("peeks", static_cast<int64_t>(peeks_));
  put("lookup_prompt_tokens", static_cast<int64_t>(lookup_prompt_tokens_));
  put("lookup_hit_tokens", static_cast<int64_t>(lookup_hit_tokens_));
  put("rejected_unauthorized", static_cast<int64_t>(unauthorized_));
  put("rejected_stale_generation", static_cast<int64_t>(stale_generation_));
  put("publications", static_cast<int64_t>(publications_));
  put("tags_refused", static_cast<int64_t>(tags_refused_));
  put("reuse_policy_partial_tail", index_.config().policy == ReusePolicy::immutable_partial_tail ? 1 : 0);
  put("partial_tails_published", static_cast<int64_t>(tails_published_));
  put("partial_tails_refused", static_cast<int64_t>(tails_refused_));
  put("lookup_partial_tail_hits", static_cast<int64_t>(partial_hits_));
  put("sessions_with_grants", static_cast<int64_t>(grants_.sessions()));
  funnel_.put(out);
  return out;
}

}  // namespace kvrt
