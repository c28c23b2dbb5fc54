// RadixIndex: lookups, leases, slot reservation and eviction. Publication
// (0x08C) is in radix_publish.cpp, the scheduler handoff (0x08G) in
// radix_handoff.cpp, validate() in radix_index_validate.cpp.
#include "tests/spec_lab/radix_index.hpp"

#include <string>
#include <unordered_set>

namespace kvrt {

namespace {
constexpr uint64_t kLeaseTag = uint64_t{0x4c} << 56;  // 'L'

// Collects the edges an eviction removes, in order, for the receipt.
class ReceiptSink final : public RadixEvictionSink {
 public:
  explicit ReceiptSink(RadixMutationReceipt& r) : r_(r) {}
  void evicted(const RadixEvictedEdge& e) override {
    r_.evicted_nodes.push_back(e.node);
    r_.evicted_slots.insert(r_.evicted_slots.end(), e.slots.begin(), e.slots.end());
  }

 private:
  RadixMutationReceipt& r_;
};
}  // namespace

RadixIndex::RadixIndex(RadixTree tree, uint32_t pool_slots, uint64_t row_bytes)
    : tree_(std::move(tree)), pool_(pool_slots), row_bytes_(row_bytes) {}

Result<RadixIndex> RadixIndex::create(const RadixIndexConfig& config) {
  if (config.pool_slots == 0)
    return make_error(ErrorCode::invalid_argument, "a radix index needs at least one token slot", "pool_slots");
  if (config.pool_slots > (uint32_t{1} << 31))
    return make_error(ErrorCode::invalid_argument, "pool_slots above 2^31", "pool_slots");
  Result<RadixTree> tree = RadixTree::create(config.tree);
  if (!tree.ok()) return tree.error();
  return RadixIndex(std::move(tree).value(), config.pool_slots, config.row_bytes);
}

StateDigest RadixIndex::state_digest() const {
  // Entries of the tree, the pool and the leases carry distinct domain tags,
  // so the sum is the digest of their union.
  MultisetDigest d;
  d.add_digest(tree_.state_digest());
  d.add_digest(pool_.state_digest());
  d.add_digest(lease_digest_.value());
  return d.value();
}

Sha256Digest RadixIndex::state_sha256() const {
  const StateDigest d = state_digest();
  CanonicalWriter w("kvrt.RadixIndexState.v1");
  w.u64("tree_version", version_.value).u64("digest_hi", d.hi).u64("digest_lo", d.lo);
  return w.finish();
}

const RadixLease* RadixIndex::lease(LeaseId id) const {
  const auto it = leases_.find(id.value);
  return it == leases_.end() ? nullptr : &it->second;
}

MultisetDigest::Entry RadixIndex::lease_entry(const RadixLease& l) const {
  return {kLeaseTag ^ l.id.value, l.request.id.value, (uint64_t{l.request.generation.value} << 8) | uint64_t(l.kind),
          (l.terminal.id.value << 32) ^ l.matched ^ (l.extra_key * 0x9e3779b97f4a7c15ull)};
}

RadixMutationReceipt RadixIndex::begin(RadixMutationKind kind, RadixRequestRef request) const {
  RadixMutationReceipt r;
  r.kind = kind;
  r.request_id = request.id;
  r.request_generation = request.generation;
  r.version_before = version_;
  r.state_before = state_digest();
  return r;
}

void RadixIndex::commit(RadixMutationReceipt& r) {
  version_ = TreeVersion{version_.value + 1};
  r.version_after = version_;
  r.state_after = state_digest();
  ++counters_.committed;
  counters_.splits += r.splits.size();
  counters_.duplicate_slots_released += r.duplicate_slots_released.size();
}

void RadixIndex::fill_match(RadixMutationReceipt& r, const RadixMatchResult& m) {
  r.matched_tokens = m.matched;
  r.terminal_node = m.terminal.id;
  if (m.split) r.splits.push_back(*m.split);
}

Status RadixIndex::check_lease(LeaseId id, RadixRequestRef request, RadixLeaseKind kind) const {
  const RadixLease* l = lease(id);
  if (l == nullptr)
    return make_error(ErrorCode::unknown_lease, "lease " + std::to_string(id.value) + " is not held", "lease");
  if (l->request.id != request.id || l->request.generation != request.generation)
    return make_error(ErrorCode::stale_generation,
                      "lease " + std::to_string(id.value) + " belongs to request " +
                          std::to_string(l->request.id.value) + " generation " +
                          std::to_string(l->request.generation.value),
                      "lease");
  if (l->kind != kind)
    return make_error(ErrorCode::unknown_lease,
                      "lease " + std::to_string(id.value) +
                          (l->kind == RadixLeaseKind::handoff ? " is a handoff lease: admit or release it first"
                                                              : " is a request lease, not a handoff lease"),
                      "lease");
  return Status::success();
}

LeaseId RadixIndex::grant(RadixRequestRef request, RadixLeaseKind kind, const RadixMatchResult& m, uint64_t extra_key,
                          RadixMutationReceipt& r) {
  RadixLease l;
  l.id = LeaseId{next_lease_++};
  l.request = request;
  l.kind = kind;
  l.terminal = m.terminal;
  l.matched = m.matched;
  l.extra_key = extra_key;
  l.granted_at = TreeVersion{version_.value + 1};
  r.evictable_delta += tree_.inc_lock(m.terminal).value();  // live: just returned by match
  r.lease = l.id;
  r.lease_terminal_after = m.terminal.id;
  lease_digest_.add(lease_entry(l));
  leases_.emplace(l.id.value, l);
  return l.id;
}

Result<RadixMutationReceipt> RadixIndex::probe(const RadixLookupArgs& a) {
  RadixMutationReceipt r = begin(RadixMutationKind::probe, a.request);
  fill_match(r, tree_.match(RadixKeyView{a.tokens, a.extra_key}, &r.prefix_slots));
  commit(r);
  return r;
}

Result<RadixMutationReceipt> RadixIndex::acquire(const RadixLookupArgs& a) {
  RadixMutationReceipt r = begin(RadixMutationKind::acquire, a.request);
  const RadixMatchResult m = tree_.match(RadixKeyView{a.tokens, a.extra_key}, &r.prefix_slots);
  fill_match(r, m);
  grant(a.request, RadixLeaseKind::request, m, a.extra_key, r);
  commit(r);
  return r;
}

Result<RadixMutationReceipt> RadixIndex::release(LeaseId id) {
  const RadixLease* l = lease(id);
  if (l == nullptr)
    return make_error(ErrorCode::unknown_lease,
                      "lease " + std::to_string(id.value) + " is not held (released twice, or never granted)", "lease");
  RadixMutationReceipt r = begin(RadixMutationKind::release, l->request);
  r.lease = id;
  r.lease_terminal_before = l->terminal.id;
  // The lease's terminal is live: a locked node is never evicted and a split
  // keeps the node's identity on the lower half.
  r.evictable_delta = tree_.dec_lock(l->terminal).value();
  lease_digest_.remove(lease_entry(*l));
  leases_.erase(id.value);
  commit(r);
  return r;
}

Result<RadixMutationReceipt> RadixIndex::reserve(RadixRequestRef request, uint32_t slots) {
  if (slots > pool_.free_count())
    return make_error(ErrorCode::storage_exhausted,
                      "reserve of " + std::to_string(slots) + " slots with " + std::to_string(pool_.free_count()) +
                          " free; evict first",
                      "slots");
  RadixMutationReceipt r = begin(RadixMutationKind::reserve, request);
  r.reserved_slots = pool_.reserve(request.id, slots).value();
  commit(r);
  return r;
}

Result<RadixMutationReceipt> RadixIndex::release_private(RadixRequestRef request, std::span<const TokenSlotId> slots) {
  std::unordered_set<uint64_t> seen;
  for (TokenSlotId s : slots) {
    if (!pool_.contains(s) || pool_.state(s) != SlotState::request_private || pool_.private_owner(s) != request.id ||
        !seen.insert(s.value).second)
      return make_error(ErrorCode::owned_slot_reuse,
                        "slot " + std::to_string(s.value) + " is not a private slot of request " +
                            std::to_string(request.id.value) + " (listed twice, or " +
                            std::string(pool_.contains(s) ? to_string(pool_.state(s)) : "outside the pool") + ")",
                        "slots");
  }
  RadixMutationReceipt r = begin(RadixMutationKind::release_private, request);
  for (TokenSlotId s : slots) pool_.release(s);
  r.released_private_slots.assign(slots.begin(), slots.end());
  commit(r);
  return r;
}

void RadixIndex::account_eviction(RadixMutationReceipt& r) {
  for (TokenSlotId s : r.evicted_slots) pool_.release(s);
  ++counters_.eviction_calls;
  counters_.evicted_edges += r.evicted_nodes.size();
  counters_.evicted_slots += r.evicted_slots.size();
}

Result<RadixMutationReceipt> RadixIndex::evict(uint64_t target_tokens) {
  RadixMutationReceipt r = begin(RadixMutationKind::evict, RadixRequestRef{});
  ReceiptSink sink(r);
  (void)tree_.evict(target_tokens, &sink);
  account_eviction(r);
  commit(r);
  return r;
}

Result<RadixMutationReceipt> RadixIndex::evict_leaf(RadixNodeId node) {
  RadixMutationReceipt r = begin(RadixMutationKind::evict_leaf, RadixRequestRef{});
  ReceiptSink sink(r);
  // A rejected eviction (root, unknown, locked or internal node) returns
  // before the tree or the sink is touched.
  Result<RadixEvictResult> done = tree_.evict_leaf(node, &sink);
  if (!done.ok()) return done.error();
  account_eviction(r);
  commit(r);
  return r;
}

}  // namespace kvrt
