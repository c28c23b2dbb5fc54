#include "services/allocator/allocator_service.hpp"

#include <algorithm>
#include <span>
#include <string>

namespace kvrt {

AllocatorService::AllocatorService(BlockAllocator allocator, AllocatorServiceOptions options)
    : allocator_(std::move(allocator)),
      options_(std::move(options)),
      quotas_(options_.quotas,
              allocator_.config().groups.empty() ? CacheGroupId{} : allocator_.config().groups[0].group),
      residue_(allocator_.config()) {
  fault_points_.add("allocator", allocator_.faults(), fault_point_names());
}

void AllocatorService::grant(SessionId session, const std::string& namespace_name) {
  granted_[session.value].insert(namespace_name);
}

Result<std::optional<uint32_t>> AllocatorService::charged_namespace(SessionId s, const std::string& name) const {
  if (name.empty()) {
    if (!quotas_.enforced()) return std::optional<uint32_t>{};
    return make_error(ErrorCode::invalid_argument,
                      "this node enforces block quotas: an allocation names the namespace it is served in",
                      "namespace_name");
  }
  // Charging a namespace is using it: only a session that was granted it may
  // (otherwise a tenant could spend another's quota). The same refusal for
  // an unconfigured name, so that it tells nothing of the configuration.
  const auto it = granted_.find(s.value);
  if (it == granted_.end() || !it->second.contains(name))
    return make_error(ErrorCode::authorization_namespace_denied,
                      "this session holds no grant for namespace \"" + name + "\" (authorize it first)",
                      "namespace_name");
  Result<uint32_t> index = quotas_.namespace_index(name, "namespace_name");
  if (!index.ok()) return index.error();
  return std::optional<uint32_t>{*index};
}

std::optional<NamespaceQuotaGate> AllocatorService::gate_of(RequestId request) const {
  if (!quotas_.enforced()) return std::nullopt;
  const std::optional<uint32_t> ns = quotas_.namespace_of(request);
  if (!ns) return std::nullopt;
  return NamespaceQuotaGate(quotas_, *ns);
}

void AllocatorService::settle(RequestId request, std::optional<uint32_t> ns, const AllocationReceipt& r) {
  if (!ns) ns = quotas_.namespace_of(request);
  if (r.outcome == AllocationOutcome::committed) residue_.record(ns, r.refcount_deltas);
  if (!quotas_.enforced() || !ns) return;
  if (r.outcome == AllocationOutcome::quota_exceeded) quotas_.count_refusal(*ns);
  if (r.outcome == AllocationOutcome::committed) quotas_.record(r.request_id, r.refcount_deltas);
}

uint64_t AllocatorService::mark_for_overwrite(const std::string& namespace_name) {
  const Result<uint32_t> ns = quotas_.namespace_index(namespace_name, "namespace_name");
  if (!ns.ok()) {
    residue_.clear();
    return allocator_.mark_all_for_overwrite();
  }
  return allocator_.mark_for_overwrite(residue_.take(*ns));
}

std::vector<std::string> AllocatorService::fault_point_names() const {
  std::vector<std::string> names = allocator_.fault_point_names();
  names.emplace_back(kReclaimFaultPoint);
  return names;
}

AllocatorBatchReceipt AllocatorService::apply(SessionId session, const AllocatorBatch& batch) {
  AllocatorBatchReceipt out;
  out.trace = batch.trace;
  out.outcomes.reserve(batch.ops.size());
  for (const AllocatorOp& op : batch.ops) out.outcomes.push_back(apply_one(session, op));
  if (std::optional<uint32_t> missing = pressure_monitor_.observe(batch, out, allocator_.block_size()))
    pressure_ = missing;
  return out;
}

Result<FaultArmReceipt> AllocatorService::apply(SessionId, const FaultArmRequest& request) {
  if (!options_.fault_injection)
    return make_error(ErrorCode::invalid_argument,
                      "this node does not arm fault points: start it with [node] fault_injection = true "
                      "(fault-injection runs only)",
                      "fault_injection");
  return fault_points_.arm(request);
}

std::optional<BlockTableView> AllocatorService::read_table(SessionId session, RequestId request) {
  AllocatorOutcome out = apply_one(session, ReadTableOp{request});
  if (auto* view = std::get_if<BlockTableView>(&out)) return std::move(*view);
  return std::nullopt;
}

std::vector<std::optional<LeaseId>> AllocatorService::lease_for_node(const std::vector<PhysicalBlockHandle>& handles) {
  std::vector<std::optional<LeaseId>> leases;
  leases.reserve(handles.size());
  for (const PhysicalBlockHandle& h : handles) {
    const AllocatorOutcome out = apply_one(kNodeSession, AcquireLeaseOp{h});
    const auto* r = std::get_if<LeaseReceipt>(&out);
    leases.push_back(r != nullptr ? std::optional(r->lease) : std::nullopt);
  }
  return leases;
}

void AllocatorService::release_node_leases(const std::vector<LeaseId>& leases) {
  for (LeaseId l : leases) (void)apply_one(kNodeSession, ReleaseLeaseOp{l});
}

std::vector<uint8_t> AllocatorService::release_leases(SessionId session, const std::vector<LeaseId>& leases) {
  std::vector<uint8_t> released;
  released.reserve(leases.size());
  for (LeaseId l : leases)
    released.push_back(std::holds_alternative<LeaseReleaseReceipt>(apply_one(session, ReleaseLeaseOp{l})) ? 1 : 0);
  return released;
}

AllocatorOutcome AllocatorService::apply_one(SessionId session, const AllocatorOp& op) {
  ++operations_;
  AllocatorOutcome outcome = std::visit([&](const auto& o) { return apply(session, o); }, op);
  if (const auto* e = std::get_if<Error>(&outcome)) {
    ++errors_;
    if (names_foreign_pool(*e)) ++foreign_pool_refusals_;
  }
  if (const auto* r = std::get_if<AllocationReceipt>(&outcome)) {
    if (r->outcome == AllocationOutcome::out_of_capacity) {
      ++out_of_capacity_;
      // Locked-cache pressure (0x0CF): the pool is full, yet part of it is
      // the node's prefix cache, whose leases this owner may not evict
      // (only the radix owner's pressure relief gives them back).
      if (leases_.holds_any(kNodeSession)) ++locked_eviction_rejects_;
    }
    if (r->outcome == AllocationOutcome::quota_exceeded) ++quota_exceeded_;
  }
  return outcome;
}

bool AllocatorService::names_foreign_pool(const Error& e) {
  return e.code == ErrorCode::unknown_physical && e.field.ends_with("pool");
}

Status AllocatorService::check_request(SessionId s, RequestId request, const char* field) const {
  return requests_.check(s, request.value, field);
}

AllocatorOutcome AllocatorService::apply(SessionId s, const AllocateOp& op) {
  Result<std::optional<uint32_t>> ns = charged_namespace(s, op.namespace_name);
  if (!ns.ok()) return ns.error();
  std::optional<NamespaceQuotaGate> gate;
  if (*ns && quotas_.enforced()) gate.emplace(quotas_, **ns);
  Result<AllocationReceipt> r = allocator_.allocate(
      AllocateArgs{op.prompt_rows, op.prefix_hit, op.expected_epoch, gate ? &*gate : nullptr, op.copy_tail_rows});
  const bool reuses = !op.prefix_hit.empty();
  if (!r.ok()) {
    if (reuses)
      if (const auto reason = hit_rejection(r.error().code)) hits_.record_refused(*reason);
    return r.error();
  }
  if (r->outcome == AllocationOutcome::committed) {
    requests_.record(s, r->request_id.value);
    if (*ns) quotas_.open_request(r->request_id, **ns);
  }
  settle(r->request_id, *ns, *r);
  if (reuses && r->outcome == AllocationOutcome::committed) hits_.record_leased();
  if (r->outcome == AllocationOutcome::committed && op.copy_tail_rows > 0) {
    ++partial_tails_copied_;
    partial_tail_rows_copied_ += r->copied_rows;
  }
  if (reuses && r->outcome == AllocationOutcome::out_of_capacity) hits_.record_out_of_capacity();
  if (reuses && r->outcome == AllocationOutcome::quota_exceeded) hits_.record_quota_exceeded();
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const AppendOp& op) {
  if (Status own = check_request(s, op.fence.request, "fence.request"); !own.ok()) return own.error();
  std::vector<std::span<const uint8_t>> rows;
  rows.reserve(op.rows.size());
  for (const auto& row : op.rows) rows.emplace_back(row);
  const std::optional<NamespaceQuotaGate> gate = gate_of(op.fence.request);
  Result<AllocationReceipt> r =
      allocator_.append(AppendArgs{op.fence, rows, op.expected_epoch, gate ? &*gate : nullptr});
  if (!r.ok()) return r.error();
  settle(op.fence.request, std::nullopt, *r);
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const CommitRowsOp& op) {
  if (Status own = check_request(s, op.fence.request, "fence.request"); !own.ok()) return own.error();
  Result<AllocationReceipt> r = allocator_.commit_rows(CommitRowsArgs{op.fence, op.valid_through});
  if (!r.ok()) return r.error();
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const ForkOp& op) {
  if (Status own = check_request(s, op.parent.request, "parent.request"); !own.ok()) return own.error();
  Result<AllocationReceipt> r = allocator_.fork(ForkArgs{op.parent});
  if (!r.ok()) return r.error();
  if (r->outcome == AllocationOutcome::committed) {
    requests_.record(s, r->request_id.value);
    // The child is served in its parent's namespace and references only
    // blocks the parent's namespace holds already.
    if (const std::optional<uint32_t> ns = quotas_.namespace_of(op.parent.request))
      quotas_.open_request(r->request_id, *ns);
    settle(r->request_id, std::nullopt, *r);
  }
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const TruncateOp& op) {
  if (Status own = check_request(s, op.fence.request, "fence.request"); !own.ok()) return own.error();
  Result<ReleaseResult> r = allocator_.truncate(TruncateArgs{op.fence, op.from_token, op.to_token});
  if (!r.ok()) return r.error();
  quotas_.record(op.fence.request, r->refcount_deltas);
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const ReleaseOp& op) {
  if (Status own = check_request(s, op.fence.request, "fence.request"); !own.ok()) return own.error();
  if (op.reason != ReleaseReason::finished && op.reason != ReleaseReason::cancelled &&
      op.reason != ReleaseReason::preempted)
    return make_error(ErrorCode::invalid_argument, "a release is finished, cancelled or preempted", "reason");
  Result<ReleaseResult> r = allocator_.release(ReleaseArgs{op.fence, op.reason});
  if (!r.ok()) return r.error();
  requests_.forget(op.fence.request.value);
  quotas_.record(op.fence.request, r->refcount_deltas);
  quotas_.close_request(op.fence.request);
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const TouchOp& op) {
  if (Status own = check_request(s, op.fence.request, "fence.request"); !own.ok()) return own.error();
  const std::optional<NamespaceQuotaGate> gate = gate_of(op.fence.request);
  Result<AllocationReceipt> r = allocator_.touch(TouchArgs{op.fence, op.bundles, gate ? &*gate : nullptr});
  if (!r.ok()) return r.error();
  settle(op.fence.request, std::nullopt, *r);
  return std::move(r).value();
}

AllocatorOutcome AllocatorService::apply(SessionId s, const AcquireLeaseOp& op) {
  Result<BlockLease> lease = allocator_.acquire_lease(op.handle);
  if (!lease.ok()) return lease.error();
  leases_.record(s, lease->id.value);
  lease_handles_[lease->id.value] = op.handle;
  const Result<BlockMeta> meta = allocator_.block(op.handle);
  return LeaseReceipt{lease->id, op.handle, meta.ok() ? meta->refcount : 0};
}

ReuseLeaseAnswer AllocatorService::reuse_leases(SessionId s, const ReuseLeaseRequest& request) {
  ReuseLeaseAnswer out;
  const uint32_t groups = allocator_.group_count();
  if (request.handles.empty() || request.bundles == 0 || request.handles.size() != size_t{request.bundles} * groups) {
    out.lease = LeaseRefused{"the candidate names " + std::to_string(request.handles.size()) + " handles for " +
                             std::to_string(request.bundles) + " bundles of " + std::to_string(groups) + " groups"};
    return out;
  }
  LeaseGrant grant;
  for (const PhysicalBlockHandle& h : request.handles) {
    AllocatorOutcome taken = apply(s, AcquireLeaseOp{h});
    if (const auto* receipt = std::get_if<LeaseReceipt>(&taken)) {
      grant.leases.push_back(receipt->lease);
      grant.covered_handles.push_back(h);
      continue;
    }
    // All or none: the leases this call took go back before it answers.
    for (LeaseId l : grant.leases) (void)apply(s, ReleaseLeaseOp{l});
    out.lease = LeaseRefused{std::get<Error>(taken).describe()};
    return out;
  }
  for (const GroupPoolConfig& g : allocator_.config().groups) {
    const bool named = std::any_of(request.handles.begin(), request.handles.end(),
                                   [&](const PhysicalBlockHandle& h) { return h.pool == g.pool; });
    if (named) out.pool_generations.push_back(PoolGenerationRef{g.pool, g.pool_generation});
  }
  // Read under the leases: no other owner can recycle these blocks now.
  const uint32_t P = allocator_.block_size();
  uint32_t frontier = 0;
  for (uint32_t b = 0; b < request.bundles; ++b) {
    uint32_t rows = P;
    for (uint32_t g = 0; g < groups; ++g) {
      const Result<BlockMeta> meta = allocator_.block(request.handles[size_t{b} * groups + g]);
      rows = std::min<uint32_t>(rows, meta.ok() ? meta->valid_rows : 0);
    }
    frontier += rows;
    if (rows < P) break;
  }
  out.valid_frontier_tokens = frontier;
  out.lease = std::move(grant);
  return out;
}

AllocatorOutcome AllocatorService::apply(SessionId s, const ReleaseLeaseOp& op) {
  if (Status own = leases_.check(s, op.lease.value, "lease"); !own.ok()) return own.error();
  const Status st = allocator_.release_lease(op.lease);
  if (!st.ok()) return st.error();
  return finish_lease(op.lease);
}

AllocatorOutcome AllocatorService::apply(SessionId s, const ReadTableOp& op) {
  if (Status own = check_request(s, op.request, "request"); !own.ok()) return own.error();
  BlockTableView view;
  Result<RequestFence> fence = allocator_.fence(op.request);
  if (!fence.ok()) return fence.error();
  view.fence = *fence;
  Result<uint32_t> context = allocator_.context_tokens(op.request);
  if (!context.ok()) return context.error();
  view.context_tokens = *context;
  view.allocator_epoch = allocator_.epoch();
  view.groups.resize(allocator_.group_count());
  for (uint32_t g = 0; g < allocator_.group_count(); ++g) {
    Result<std::vector<PhysicalBlockHandle>> table = allocator_.table(op.request, g);
    if (!table.ok()) return table.error();
    view.groups[g].reserve(table->size());
    for (const PhysicalBlockHandle& h : *table) {
      Result<BlockMeta> meta = allocator_.block(h);
      if (!meta.ok()) return meta.error();
      view.groups[g].push_back(BlockTableEntry{h, meta->valid_rows, meta->cache_key});
    }
  }
  return view;
}

LeaseReleaseReceipt AllocatorService::finish_lease(LeaseId lease) {
  LeaseReleaseReceipt r{lease, {}, 0};
  if (const auto it = lease_handles_.find(lease.value); it != lease_handles_.end()) {
    r.handle = it->second;
    const Result<BlockMeta> meta = allocator_.block(it->second);
    r.refs_after = meta.ok() ? meta->refcount : 0;
    lease_handles_.erase(it);
  }
  leases_.forget(lease.value);
  return r;
}

std::vector<Status> AllocatorService::tag_cache_keys(const std::vector<CacheKeyTag>& tags) {
  std::vector<Status> out;
  out.reserve(tags.size());
  for (const CacheKeyTag& t : tags) {
    Result<AllocationReceipt> r = allocator_.publish_cache_key(t.handle, t.cache_key);
    out.push_back(r.ok() ? Status::success() : Status(r.error()));
  }
  return out;
}

SessionReclaim AllocatorService::end_session(SessionId session) {
  SessionReclaim out;
  granted_.erase(session.value);
  if (reclaims_interrupted_.erase(session.value) != 0)
    ++reclaim_resumptions_;
  else
    ++sessions_ended_;
  // Leases first: a lease is a reference like a table cell, and releasing it
  // before the requests lets the requests' blocks reach zero references in one
  // pass.
  for (uint64_t lease : leases_.held_by(session)) {
    const Status st = allocator_.release_lease(LeaseId{lease});
    if (st.ok()) {
      ++out.leases_released;
      out.receipts.push_back(finish_lease(LeaseId{lease}));
    } else {
      leases_.forget(lease);
      lease_handles_.erase(lease);
      out.receipts.push_back(st.error());
    }
  }
  const std::vector<uint64_t> requests = requests_.held_by(session);
  if (!requests.empty() && allocator_.faults().reached(kReclaimFaultPoint)) {
    reclaims_interrupted_.insert(session.value);
    out.interrupted = true;
    leases_reclaimed_ += out.leases_released;
    return out;
  }
  for (uint64_t request : requests) {
    Result<RequestFence> fence = allocator_.fence(RequestId{request});
    requests_.forget(request);
    if (!fence.ok()) {
      out.receipts.push_back(fence.error());
      continue;
    }
    Result<ReleaseResult> r = allocator_.release(ReleaseArgs{*fence, ReleaseReason::cancelled});
    if (r.ok()) {
      quotas_.record(RequestId{request}, r->refcount_deltas);
      quotas_.close_request(RequestId{request});
      ++out.requests_released;
      out.receipts.push_back(std::move(r).value());
    } else {
      out.receipts.push_back(r.error());
    }
  }
  requests_reclaimed_ += out.requests_released;
  leases_reclaimed_ += out.leases_released;
  return out;
}

Status AllocatorService::validate() const {
  KVRT_TRY(allocator_.validate());
  KVRT_TRY(requests_.validate());
  KVRT_TRY(leases_.validate());
  if (requests_.size() != allocator_.live_requests())
    return make_error(ErrorCode::invariant_violated, "the allocator holds " +
                                                         std::to_string(allocator_.live_requests()) +
                                                         " requests; sessions own " + std::to_string(requests_.size()));
  KVRT_TRY(quotas_.validate(allocator_));
  if (quotas_.enforced())
    for (uint64_t request : requests_.keys())
      if (!quotas_.namespace_of(RequestId{request}))
        return make_error(ErrorCode::invariant_violated,
                          "request " + std::to_string(request) + " is charged to no namespace on a node with quotas");
  if (leases_.size() != allocator_.active_leases())
    return make_error(ErrorCode::invariant_violated, "the allocator holds " +
                                                         std::to_string(allocator_.active_leases()) +
                                                         " leases; sessions own " + std::to_string(leases_.size()));
  return Status::success();
}

}  // namespace kvrt
