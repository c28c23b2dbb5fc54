#include "services/radix/radix_block_service.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "services/common/digest.hpp"
#include "services/common/units.hpp"
#include "services/prefix/prefix_match_receipt.hpp"
#include "services/prefix/publication_range.hpp"
#include "services/prefix/request_identity.hpp"
#include "services/radix/radix_handoff_receipt.hpp"

namespace kvrt {

Result<RadixBlockService> RadixBlockService::create(const CacheLayoutManifest& layout, uint32_t budget_blocks,
                                                    EvictionPolicy eviction, ReusePolicy policy) {
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  auto index = RadixBlockIndex::create(RadixBlockIndexConfig{layout.allocator_block_size, groups, budget_blocks,
                                                             eviction, policy == ReusePolicy::immutable_partial_tail});
  if (!index.ok()) return index.error();
  Result<ChainHasher> hasher = ChainHasher::create(layout.hash_family, layout.allocator_block_size);
  if (!hasher.ok()) return hasher.error();
  return RadixBlockService(std::move(index).value(), layout.digest(), groups, layout.row_bytes(),
                           std::move(hasher).value());
}

void RadixBlockService::set_event_sink(KvEventSink* sink) {
  events_ = sink;
  index_.track_freed_pages(sink != nullptr);
}

KvBlockStored RadixBlockService::stored_event(uint64_t key, std::span<const TokenId> path,
                                              const RadixAdoption& adoption, const std::string& adapter) const {
  const uint32_t P = index_.block_tokens();
  const uint32_t pages = static_cast<uint32_t>((path.size() + P - 1) / P);
  const uint32_t first = pages - static_cast<uint32_t>(adoption.pages.size());  // the tree held [0, first)
  std::string root_bytes("radix");
  root_bytes.append(reinterpret_cast<const char*>(&key), sizeof key);
  BlockHash h = hasher_.root(root_bytes);
  KvBlockStored e;
  e.block_size = P;
  if (!adapter.empty()) e.lora_name = adapter;  // vLLM's lora_name: the adapter's name
  for (uint32_t j = 0; j < pages; ++j) {
    const std::span<const TokenId> tokens = path.subspan(uint64_t{j} * P, std::min<uint64_t>(P, path.size() - j * P));
    if (j == first && j > 0) e.parent_block_hash = h;
    // A partial last page (0x07D) keys as the hash-chain index keys a tail.
    h = tokens.size() == P
            ? hasher_.full_block(h, tokens, std::nullopt)
            : hasher_.partial_tail(h, tokens, static_cast<uint8_t>(ReusePolicy::immutable_partial_tail), std::nullopt);
    if (j < first) continue;
    e.block_hashes.push_back(h);
    e.token_ids.insert(e.token_ids.end(), tokens.begin(), tokens.end());
  }
  return e;
}

void RadixBlockService::emit_removals() {
  if (events_ == nullptr) return;
  KvBlockRemoved removed;
  for (uint32_t id : index_.take_freed_pages()) {
    auto it = announced_.find(id);
    if (it == announced_.end()) continue;  // an adoption taken back before it was announced
    removed.block_hashes.push_back(it->second);
    announced_.erase(it);
  }
  if (removed.block_hashes.empty()) return;
  for (uint32_t g = 0; g < groups_; ++g) {
    removed.group_index = g;
    events_->on_event(removed);
  }
}

Result<uint64_t> RadixBlockService::namespace_key(SessionId session, const std::string& name,
                                                  const RequestIdentity& identity,
                                                  NamespaceGeneration computed_under) const {
  Result<SessionNamespaceGrant> g = grants_.for_publication(session, name, computed_under);
  if (!g.ok()) return g.error();
  // Namespace, salt and generation bind the subtree (0x0CE): a later
  // generation keys differently, so a revoked generation's pages never match.
  // The request's identity extras, read only once the grant holds, bind it
  // further (request_identity.hpp: the whole identity keys the subtree).
  Result<std::string> extra = identity_material(identity);
  if (!extra.ok()) return extra.error();
  std::string material = name + "\x1f" + g->salt + "\x1fg" + std::to_string(g->generation.value);
  if (!extra->empty()) material.append("\x1fi").append(*extra);
  const Sha256Digest d = sha256(std::span(reinterpret_cast<const uint8_t*>(material.data()), material.size()));
  uint64_t key = 0;
  std::memcpy(&key, d.bytes.data(), sizeof key);
  return key | 1;  // 0 means "no extra key" to the tree
}

Result<PrefixMatchReceipt> RadixBlockService::match(SessionId session, const PrefixMatchOp& op) {
  return match_at(session, op, nullptr);
}

Result<PrefixMatchReceipt> RadixBlockService::match_at(SessionId session, const PrefixMatchOp& op,
                                                       RadixNodeRef* terminal) {
  Result<uint64_t> key = namespace_key(session, op.namespace_name, op.identity);
  if (!key.ok()) {
    ++unauthorized_;
    if (const auto reason = authorization_rejection(key.error().code)) funnel_.record_refused(*reason);
    return key.error();
  }
  const uint32_t cap = reuse_cap(op);
  const RadixBlockMatch m = index_.match(*key, op.tokens, cap);
  if (terminal != nullptr) *terminal = m.terminal;
  ++lookups_;
  funnel_.record_lookup(m.hit_tokens);
  lookup_prompt_tokens_ += op.tokens.size();
  lookup_hit_tokens_ += m.hit_tokens;
  partial_hits_ += m.tail_rows > 0 ? 1 : 0;
  return receipt_for(session, op, cap, m);
}

Result<PrefixMatchReceipt> RadixBlockService::peek(SessionId session, const PrefixMatchOp& op) {
  Result<uint64_t> key = namespace_key(session, op.namespace_name, op.identity);
  if (!key.ok()) return key.error();
  const uint32_t cap = reuse_cap(op);
  const RadixBlockMatch m = index_.peek(*key, op.tokens, cap);
  ++peeks_;
  return receipt_for(session, op, cap, m);
}

uint32_t RadixBlockService::reuse_cap(const PrefixMatchOp& op) {
  const uint32_t prompt = static_cast<uint32_t>(op.tokens.size());
  return op.logits_path == LogitsPath::logits_required && prompt > 0 ? prompt - 1 : prompt;
}

PrefixMatchReceipt RadixBlockService::receipt_for(SessionId session, const PrefixMatchOp& op, uint32_t cap,
                                                  const RadixBlockMatch& m) const {
  const uint32_t P = index_.block_tokens();
  const uint32_t prompt = static_cast<uint32_t>(op.tokens.size());
  PrefixMatchReceipt r;
  r.request_id = op.request;
  r.request_generation = op.request_generation;
  r.index_snapshot_id = IndexSnapshotId{publications_};
  r.index_publication_generation = publications_;
  r.compatibility_manifest_sha256 = layout_sha256_;
  r.namespace_id = op.namespace_name;
  r.namespace_generation = grants_.current(session, op.namespace_name)->generation;
  // Pages of P_a tokens, or token by token under partial tails (the hit's
  // last page then copied: copy_valid_partial_rows).
  r.policy_id = index_.partial_tails() ? "radix_token_partial_tail" : "radix_page";
  r.alignment_tokens = index_.partial_tails() ? 1 : P;
  r.logits_path = op.logits_path;
  r.prompt_tokens = prompt;
  r.semantic_match_tokens = m.hit_tokens;
  r.indexed_match_tokens = m.hit_tokens;
  r.reuse_cap_tokens = cap;
  r.runtime_hit_tokens = m.hit_tokens;
  r.prompt_rows_recomputed = prompt - m.hit_tokens;
  r.matched_group_handles = m.bundles;
  r.new_block_bundles = new_block_bundles(prompt, m.hit_tokens, P);
  r.copy_valid_partial_rows = m.tail_rows;
  r.receipt_sha256 = canonical_digest(r);
  return r;
}

void RadixBlockService::end_session(SessionId session) {
  grants_.end_session(session);
  for (auto it = path_leases_.begin(); it != path_leases_.end();) {
    if (it->second.session == session) {
      (void)index_.unlock_path(it->second.terminal);
      it = path_leases_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<CandidateAnswer> RadixBlockService::reuse_candidate(SessionId session, const PrefixMatchOp& op) {
  RadixNodeRef terminal;
  Result<PrefixMatchReceipt> m = match_at(session, op, &terminal);
  if (!m.ok()) return m.error();
  if (m->runtime_hit_tokens == 0) return CandidateAnswer(IndexMiss{});
  // The tree compares every token of its walk: a hit's stored tokens are the request's.
  ReuseCandidate c;
  KVRT_TRY_ASSIGN(c, candidate_of_hit(ReuseSource::radix_index, op, *m, published_digests_, true));
  c.tree_version = index_.retraction_version();
  c.path_node_ids = index_.tree().path_ids(terminal);
  return CandidateAnswer(std::move(c));
}

ReusePathLeaseAnswer RadixBlockService::lease_path(SessionId session, const ReusePathLeaseRequest& request) {
  auto refuse = [&](std::string why) {
    ++path_leases_refused_;
    return ReusePathLeaseAnswer{std::nullopt, std::move(why)};
  };
  if (request.path.empty()) return refuse("an empty path names no node to lock");
  // O(nodes): the request names the terminal by id only.
  const std::optional<RadixNodeRef> terminal = index_.tree().find(request.path.back());
  if (!terminal) return refuse("node " + std::to_string(request.path.back().value) + " left the tree since the lookup");
  // A split since the lookup may have put new nodes on the path; every node
  // the candidate named must still be on it, in order (a removed one would
  // have taken the terminal with it: eviction is leaf first).
  const std::vector<RadixNodeId> now = index_.tree().path_ids(*terminal);
  auto at = now.begin();
  for (RadixNodeId id : request.path) {
    at = std::find(at, now.end(), id);
    if (at == now.end()) return refuse("node " + std::to_string(id.value) + " is no longer on the path");
    ++at;
  }
  Result<LeaseId> lease = lock_for(session, *terminal, PathLeaseKind::reuse);
  if (!lease.ok()) return refuse(lease.error().describe());
  return ReusePathLeaseAnswer{*lease, ""};
}

bool RadixBlockService::release_path(SessionId session, LeaseId lease) {
  const auto it = path_leases_.find(lease.value);
  if (it == path_leases_.end() || it->second.session != session || it->second.kind != PathLeaseKind::reuse)
    return false;
  if (!index_.unlock_path(it->second.terminal).ok()) return false;
  path_leases_.erase(it);
  return true;
}

Result<RadixSchedulerHandoffReceipt> RadixBlockService::handoff(SessionId session, const PrefixHandoffOp& op) {
  Result<uint64_t> key = namespace_key(session, op.match.namespace_name, op.match.identity);
  if (!key.ok()) {
    ++unauthorized_;
    return key.error();
  }
  // The match is a lookup of its own, outside the reuse funnel: the
  // admitted request still goes through the reuse transaction, which
  // counts it once.
  const uint32_t cap = reuse_cap(op.match);
  const RadixBlockMatch m = index_.match(*key, op.match.tokens, cap);
  RadixSchedulerHandoffReceipt h;
  h.match = receipt_for(session, op.match, cap, m);
  h.tree_version = index_.retraction_version();
  const bool hit = m.hit_tokens > 0;
  if (hit) {
    h.path_node_ids = index_.tree().path_ids(m.terminal);
    h.terminal_node_id = m.terminal.id;
    // Match and lock in one owner step: nothing can evict the path between
    // them, so the receipt's v_tree is read under the lock.
    Result<LeaseId> lease = lock_for(session, m.terminal, PathLeaseKind::handoff, op.match.request);
    if (!lease.ok())
      return make_error(ErrorCode::invariant_violated,
                        "the tree refused a lock on a path its match just walked: " + lease.error().describe(),
                        "handoff");
    h.lock_lease_id = *lease;
  }
  h.suffix_interval = TokenInterval{m.hit_tokens, h.match.prompt_tokens};
  h.lock_required_until_scheduler_disposition = hit;
  h.free_private_tail_slots = op.free_private_tail_slots;
  const HandoffEstimates e = handoff_estimates(h.match.prompt_tokens, m.hit_tokens, op.free_private_tail_slots,
                                               index_.block_tokens(), row_bytes_);
  h.new_useful_kv_bytes = e.new_useful_kv_bytes;
  h.new_physical_blocks = e.new_physical_blocks;
  h.new_physical_capacity_bytes = e.new_physical_capacity_bytes;
  h.receipt_sha256 = canonical_digest(h);
  if (hit) path_leases_.at(h.lock_lease_id.value).issued = h.receipt_sha256;
  ++handoffs_;
  return h;
}

Result<LeaseId> RadixBlockService::lock_for(SessionId session, RadixNodeRef terminal, PathLeaseKind kind,
                                            RequestId request) {
  KVRT_TRY(index_.lock_path(terminal));
  const LeaseId lease = OwnerLeaseId::path_lease(next_path_lease_++).id();
  path_leases_[lease.value] = PathLease{session, terminal, kind, request, Sha256Digest{}};
  ++path_leases_granted_;
  return lease;
}

Result<HandoffDispositionReceipt> RadixBlockService::dispose_handoff(SessionId session,
                                                                     const PrefixHandoffDispositionOp& op) {
  const RadixSchedulerHandoffReceipt& h = op.receipt;
  const bool admit = op.disposition == HandoffDisposition::admit;
  auto refuse = [&](ErrorCode code, std::string why, const char* field) -> Error {
    ++handoffs_refused_;
    handoffs_stale_ += code == ErrorCode::stale_tree_version ? 1 : 0;
    return make_error(code, std::move(why), field);
  };
  if (h.match.receipt_sha256 != canonical_digest(h.match))
    return refuse(ErrorCode::receipt_tampered, "match.receipt_sha256 does not cover the match's fields",
                  "match.receipt_sha256");
  if (h.receipt_sha256 != canonical_digest(h))
    return refuse(ErrorCode::receipt_tampered, "receipt_sha256 does not cover the receipt's fields", "receipt_sha256");
  HandoffDispositionReceipt out{h.match.request_id, h.lock_lease_id, op.disposition, index_.retraction_version(), {}};
  if (h.lock_lease_id.value == 0) {
    if (h.lock_required_until_scheduler_disposition || h.terminal_node_id.value != 0)
      return refuse(ErrorCode::unknown_lease, "a handoff of a hit names no lease", "lock_lease_id");
    return out;  // a miss: nothing was locked
  }
  const auto it = path_leases_.find(h.lock_lease_id.value);
  const bool disposable =
      it != path_leases_.end() && it->second.session == session && it->second.request == h.match.request_id &&
      (it->second.kind == PathLeaseKind::handoff || (!admit && it->second.kind == PathLeaseKind::admitted));
  if (!disposable)
    return refuse(ErrorCode::unknown_lease,
                  "lease " + std::to_string(OwnerLeaseId::of(h.lock_lease_id).serial()) +
                      (admit ? " is not a handoff of this session's request awaiting its disposition"
                             : " is not a handoff lock this session holds for this request"),
                  "lock_lease_id");
  PathLease& lease = it->second;
  if (lease.issued != h.receipt_sha256)
    return refuse(ErrorCode::receipt_tampered, "not the receipt this lease was issued with (edited and digested again)",
                  "receipt_sha256");
  out.path_node_ids = index_.tree().path_ids(lease.terminal);
  if (!admit) {
    (void)index_.unlock_path(lease.terminal);
    path_leases_.erase(it);
    ++handoffs_released_;
    return out;
  }
  if (h.tree_version != index_.retraction_version())
    return refuse(ErrorCode::stale_tree_version,
                  "the receipt read tree version " + std::to_string(h.tree_version.value) + "; the tree is at " +
                      std::to_string(index_.retraction_version().value) +
                      ": cached tokens left the tree since (0x08G stale read); release and ask again",
                  "tree_version");
  // The lock kept the path; a split since may have added nodes to it
  // (0x08B), never removed one. Checked anyway: admitting a path the tree no
  // longer holds would be the stale read the version guards against.
  auto on_path = [&] {
    if (h.terminal_node_id != lease.terminal.id) return false;
    auto at = out.path_node_ids.begin();
    for (RadixNodeId id : h.path_node_ids) {
      at = std::find(at, out.path_node_ids.end(), id);
      if (at == out.path_node_ids.end()) return false;
      ++at;
    }
    return true;
  };
  if (!on_path())
    return refuse(ErrorCode::path_slot_mismatch, "path_node_ids/terminal_node_id are not the leased path",
                  "path_node_ids");
  lease.kind = PathLeaseKind::admitted;
  ++handoffs_admitted_;
  return out;
}

Status RadixBlockService::validate() const {
  KVRT_TRY(index_.validate());
  std::map<uint64_t, uint32_t> ending;  // node id -> path leases ending there
  for (const auto& [id, lease] : path_leases_) {
    if (!index_.tree().is_live(lease.terminal))
      return make_error(
          ErrorCode::invariant_violated,
          "path lease " + std::to_string(OwnerLeaseId::of(LeaseId{id}).serial()) + " ends at a node not in the tree");
    ++ending[lease.terminal.id.value];
  }
  for (const auto& [id, lease] : path_leases_)
    if (index_.tree().node(lease.terminal).lock_count < ending[lease.terminal.id.value])
      return make_error(ErrorCode::invariant_violated,
                        "node " + std::to_string(lease.terminal.id.value) + " holds fewer locks than path leases");
  return Status::success();
}

Status RadixBlockService::check_publication(SessionId session, const PrefixPublishOp& op) const {
  Result<uint64_t> key = namespace_key(session, op.namespace_name, op.identity, op.computed_generation);
  if (!key.ok()) return key.error();
  return check_publication_range(op, index_.block_tokens(), index_.partial_tails());
}

Result<RadixPublication> RadixBlockService::decide_publication(SessionId session, const PrefixPublishOp& op,
                                                               const BlockTableView& table) {
  KVRT_TRY(check_publication(session, op));
  const uint64_t key = *namespace_key(session, op.namespace_name, op.identity, op.computed_generation);
  published_keys_[op.namespace_name][grants_.current(session, op.namespace_name)->generation.value].insert(key);
  const uint32_t P = index_.block_tokens();
  if (table.groups.size() != groups_)
    return make_error(ErrorCode::invalid_argument, "the table has another number of cache groups", "table");
  // Pages [0, end_block), and the partial tail after them: the tree needs
  // the whole path; pages it holds already come back as duplicates.
  const uint32_t page_count = op.end_block + (op.tail_rows > 0 ? 1 : 0);
  std::vector<std::vector<PhysicalBlockHandle>> pages(page_count);
  for (uint32_t g = 0; g < groups_; ++g) {
    if (table.groups[g].size() < page_count)
      return make_error(ErrorCode::invalid_argument,
                        "the request's table has " + std::to_string(table.groups[g].size()) + " blocks in group " +
                            std::to_string(g) + ", fewer than the " + std::to_string(page_count) + " published",
                        op.tail_rows > 0 ? "tail_rows" : "end_block");
    for (uint32_t j = 0; j < page_count; ++j) {
      const BlockTableEntry& e = table.groups[g][j];
      const uint32_t rows = j < op.end_block ? P : op.tail_rows;
      if (e.valid_rows < rows)
        return make_error(ErrorCode::row_not_valid,
                          "block " + std::to_string(j) + " of group " + std::to_string(g) + " holds " +
                              std::to_string(e.valid_rows) + " committed rows; its page covers " + std::to_string(rows),
                          j < op.end_block ? "end_block" : "tail_rows");
      pages[j].push_back(e.handle);
    }
  }
  emit_removals();  // the ids of pages gone so far may be reused by this adoption
  const std::span<const TokenId> path = std::span(op.tokens).first(uint64_t{op.end_block} * P + op.tail_rows);
  auto adoption = index_.adopt(key, path, pages);
  if (!adoption.ok()) return adoption.error();
  RadixPublication out;
  out.adoption = std::move(adoption).value();
  if (events_ != nullptr && !out.adoption.pages.empty())
    out.stored = stored_event(key, path, out.adoption, op.identity.adapter_id);
  for (uint32_t id : out.adoption.pages)
    for (const PhysicalBlockHandle& h : index_.page(id).handles) out.lease_handles.push_back(h);
  out.receipt = PrefixPublishReceipt{op.request, 0, out.adoption.duplicates * groups_, 0, publications_ + 1};
  if (Result<SessionNamespaceGrant> g = grants_.current(session, op.namespace_name); g.ok())
    published_digests_.record(*g);
  ++publications_;
  pages_duplicate_ += out.adoption.duplicates;
  return out;
}

std::vector<LeaseId> RadixBlockService::confirm_publication(RadixPublication& publication,
                                                            const PublicationAnswer& answer) {
  const std::vector<std::optional<LeaseId>>& leases = answer.leases;
  std::vector<std::vector<std::optional<LeaseId>>> per_page(publication.adoption.pages.size());
  for (size_t i = 0; i < per_page.size(); ++i)
    for (uint32_t g = 0; g < groups_; ++g) {
      const size_t k = i * groups_ + g;
      per_page[i].push_back(k < leases.size() ? leases[k] : std::nullopt);
    }
  bool granted = !answer.withdrawn && leases.size() == publication.lease_handles.size();
  for (const auto& l : leases) granted = granted && l.has_value();
  std::vector<LeaseId> release = index_.confirm(publication.adoption, per_page, answer.withdrawn);
  if (!granted) {
    // Taken back: the tree holds no more than before, so there is no budget
    // to enforce now (a tree over budget evicts at its next publication).
    ++adoptions_withdrawn_;
    emit_removals();
    return release;
  }
  if (publication.stored) {
    for (size_t i = 0; i < publication.adoption.pages.size(); ++i)
      announced_[publication.adoption.pages[i]] = publication.stored->block_hashes.at(i);
    for (uint32_t g = 0; g < groups_; ++g) {
      publication.stored->group_index = g;
      events_->on_event(*publication.stored);
    }
  }
  publication.receipt.published = static_cast<uint32_t>(publication.lease_handles.size());
  pages_adopted_ += publication.adoption.pages.size();
  for (uint32_t id : publication.adoption.pages)
    tails_published_ += index_.page(id).rows < index_.block_tokens() ? 1 : 0;
  std::vector<LeaseId> evicted = index_.enforce_budget(&faults_);
  release.insert(release.end(), evicted.begin(), evicted.end());
  emit_removals();
  return release;
}

std::vector<LeaseId> RadixBlockService::advance_generation(const std::string& name, NamespaceGeneration g) {
  grants_.advance_generation(name, g);
  std::vector<LeaseId> release;
  const auto ns = published_keys_.find(name);
  if (ns == published_keys_.end()) return release;
  const uint32_t before = index_.cached_pages();
  for (auto it = ns->second.begin(); it != ns->second.end() && it->first < g.value;) {
    // A key whose pages a running request still locks is kept: a later
    // advance to the same or a newer generation (a purge's last step, once
    // it revoked the receipts that held the locks) evicts the rest.
    for (auto key = it->second.begin(); key != it->second.end();) {
      std::vector<LeaseId> leases = index_.evict_extra_key(*key);
      release.insert(release.end(), leases.begin(), leases.end());
      key = index_.tree().count_extra_key(*key) == 0 ? it->second.erase(key) : std::next(key);
    }
    it = it->second.empty() ? ns->second.erase(it) : std::next(it);
  }
  invalidated_pages_ += before - index_.cached_pages();
  emit_removals();
  return release;
}

std::vector<LeaseId> RadixBlockService::relieve_pressure(uint32_t missing_blocks) {
  ++pressure_calls_;
  const uint32_t before = index_.cached_pages();
  std::vector<LeaseId> release = index_.evict_pages(std::max(1u, missing_blocks), &faults_);
  pressure_pages_ += before - index_.cached_pages();
  emit_removals();
  return release;
}

OwnerStats RadixBlockService::stats() const {
  OwnerStats out;
  out.owner = "prefix_index";
  auto put = [&](std::string name, uint64_t value) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(value)});
  };
  put("radix", 1);
  put("cached_pages", index_.cached_pages());
  put("path_leases", path_leases_.size());
  put("path_leases_granted", path_leases_granted_);
  put("path_leases_refused", path_leases_refused_);
  put("handoffs", handoffs_);
  put("handoffs_admitted", handoffs_admitted_);
  put("handoffs_released", handoffs_released_);
  put("handoffs_refused", handoffs_refused_);
  put("handoffs_stale", handoffs_stale_);
  put("cached_blocks", uint64_t{index_.cached_pages()} * groups_);
  put("tree_nodes", index_.tree().ledger().nodes);
  put("evicted_pages", index_.evicted_pages());
  put("lookups", lookups_);
  put("peeks", peeks_);
  put("lookup_prompt_tokens", lookup_prompt_tokens_);
  put("lookup_hit_tokens", lookup_hit_tokens_);
  put("rejected_unauthorized", unauthorized_);
  put("publications", publications_);
  put("pages_adopted", pages_adopted_);
  put("pages_duplicate", pages_duplicate_);
  put("adoptions_withdrawn", adoptions_withdrawn_);
  put("pressure_calls", pressure_calls_);
  put("pressure_pages", pressure_pages_);
  put("invalidated_pages", invalidated_pages_);
  put("reuse_policy_partial_tail", index_.partial_tails() ? 1 : 0);
  put("partial_tails_published", tails_published_);
  put("lookup_partial_tail_hits", partial_hits_);
  put("sessions_with_grants", grants_.sessions());
  funnel_.put(out);
  return out;
}

}  // namespace kvrt
