#pragma once
// Shared rig of the [prefix] suites: an allocator with G cache-group pools,
// a PrefixIndex over it recording its KV events, and a local scope; helpers
// that run a request the way a worker does (lookup -> allocate with the hit
// bundles -> commit the prefill rows -> publish the full blocks, and the
// immutable tail under the partial-tail policy).
#include <catch2/catch.hpp>
#include <numeric>
#include <span>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/prefix/prefix_index.hpp"

namespace kvrt::test {

struct PrefixRigOptions {
  uint32_t groups = 1;
  uint32_t blocks = 64;  // per pool [blocks]
  uint32_t block_tokens = 16;
  ReusePolicy policy = ReusePolicy::full_block;
  bool witness = true;
  bool publish_duplicates = false;
  HashFamily family = HashFamily::sha256;
  FreeQueuePolicy queue = FreeQueuePolicy::free_first_then_oldest_evictable;
  uint64_t row_bytes_per_group = 32 * 1024;  // [bytes / token]
};

inline BlockAllocatorConfig rig_allocator_config(const PrefixRigOptions& o) {
  BlockAllocatorConfig c;
  c.block_size = o.block_tokens;
  c.queue_policy = o.queue;
  for (uint32_t g = 0; g < o.groups; ++g)
    c.groups.push_back(GroupPoolConfig{
        CacheGroupId{g}, PoolId{10 + g}, PoolGeneration{1}, o.blocks, 1000 * (g + 1), o.row_bytes_per_group, {}});
  return c;
}

inline PrefixIndexConfig rig_index_config(const PrefixRigOptions& o) {
  PrefixIndexConfig c;
  c.hash_family = o.family;
  c.block_tokens = o.block_tokens;
  c.cache_groups = o.groups;
  c.policy = o.policy;
  c.collision_witness = o.witness;
  c.publish_duplicates = o.publish_duplicates;
  return c;
}

// Extras with only a salt / only an adapter (moved in: GCC 12 misreads short
// literal assignment to std::string as an overlapping copy).
inline RequestExtras salted(std::string salt) {
  RequestExtras e;
  e.cache_salt = std::move(salt);
  return e;
}
inline RequestExtras with_lora(std::string lora) {
  RequestExtras e;
  e.lora_name = std::move(lora);
  return e;
}

// Tokens start, start + 1, ... (n of them).
inline std::vector<TokenId> iota_tokens(uint32_t n, TokenId start = 100) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

class PrefixRig {
 public:
  explicit PrefixRig(const PrefixRigOptions& o = {})
      : options(o),
        alloc(BlockAllocator::create(rig_allocator_config(o)).value()),
        index(make_index(o)),
        scope(index.local_scope().value()) {}
  PrefixRig(const PrefixRig&) = delete;
  PrefixRig& operator=(const PrefixRig&) = delete;

  BlockExtrasPlan plan(const RequestExtras& extras = {}) const { return index.extras_plan(scope, extras).value(); }

  std::vector<BlockHash> chain(std::span<const TokenId> tokens, const RequestExtras& extras = {}) const {
    std::vector<BlockHash> h;
    index.extend_hashes(scope, tokens, plan(extras), h);
    return h;
  }

  PrefixMatch lookup(std::span<const TokenId> tokens, const RequestExtras& extras = {},
                     LogitsPath logits = LogitsPath::logits_required) const {
    const BlockExtrasPlan p = plan(extras);
    auto m = index.lookup(scope, PrefixLookupArgs{RequestId{0}, RequestGeneration{0}, tokens, &p, logits, {}}, &alloc);
    INFO((m.ok() ? std::string("ok") : m.error().describe()));
    REQUIRE(m.ok());
    REQUIRE(index.check_receipt(m->receipt, &alloc).ok());
    return *m;
  }

  // A producer request: reuses its full-block hit, prefills the rest, commits
  // every row and publishes its full blocks (and, with publish_tail under the
  // partial-tail policy, its partial last block as an immutable tail).
  RequestId produce(std::span<const TokenId> tokens, const RequestExtras& extras = {}, bool publish_tail = false) {
    const BlockExtrasPlan p = plan(extras);
    std::vector<BlockHash> hashes;
    index.extend_hashes(scope, tokens, p, hashes);
    std::vector<PhysicalBlockHandle> hit;
    const uint32_t P = options.block_tokens;
    const uint32_t hits =
        index.match_full_blocks(hashes, static_cast<uint32_t>((tokens.size() - 1) / P), tokens, &alloc, &hit);
    Result<AllocationReceipt> r = alloc.allocate(AllocateArgs{static_cast<uint32_t>(tokens.size()), hit, {}});
    REQUIRE(r.ok());
    REQUIRE(r->outcome == AllocationOutcome::committed);
    absorb();
    const RequestId id = r->request_id;
    r = alloc.commit_rows(CommitRowsArgs{alloc.fence(id).value(), static_cast<uint32_t>(tokens.size())});
    REQUIRE(r.ok());
    auto published = index.publish_blocks(
        scope, target(), PrefixPublishArgs{id, tokens, hashes, &p, hits, static_cast<uint32_t>(hashes.size())});
    INFO((published.ok() ? std::string("ok") : published.error().describe()));
    REQUIRE(published.ok());
    const uint32_t tail_rows = static_cast<uint32_t>(tokens.size() % P);
    if (publish_tail && tail_rows > 0) {
      auto t = index.publish_tail(
          scope, target(), PrefixTailArgs{id, tokens, hashes, &p, static_cast<uint32_t>(tokens.size() / P), tail_rows});
      INFO((t.ok() ? std::string("ok") : t.error().describe()));
      REQUIRE(t.ok());
    }
    REQUIRE(index.validate(&alloc).ok());
    return id;
  }

  void release(RequestId id) {
    Result<ReleaseResult> rr = alloc.release(ReleaseArgs{alloc.fence(id).value(), ReleaseReason::finished});
    REQUIRE(rr.ok());
    absorb();
  }

  void absorb() { index.absorb(alloc.drain_events()); }

  PrefixRigOptions options;
  KvEventRecorder events;
  BlockAllocator alloc;
  // Publications go straight into alloc; rebuilt per call, so a moved rig
  // never publishes into the allocator it was moved from.
  AllocatorPublicationTarget& target() { return target_.emplace(alloc); }
  PrefixIndex index;
  PrefixScope scope;

 private:
  std::optional<AllocatorPublicationTarget> target_;
  PrefixIndex make_index(const PrefixRigOptions& o) {
    PrefixIndexConfig c = rig_index_config(o);
    c.events = &events;
    return PrefixIndex::create(c).value();
  }
};

}  // namespace kvrt::test
