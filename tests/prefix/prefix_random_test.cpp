// Seeded randomised differential test of the prefix index against the
// brute-force reference (tests/prefix_reference.hpp), over the real
// allocator, for every combination of groups, policy, witness, duplicate
// publication and free-queue policy. After every operation: the index's and
// the allocator's validate(), and the reference's block count equals the
// index's. After every lookup: the four lengths, the hit bundles and the
// receipt agree with lengths derived from the reference's scans.
#include <catch2/catch.hpp>
#include <random>

#include "services/common/units.hpp"
#include "tests/prefix/prefix_fixture.hpp"
#include "tests/prefix/prefix_reference.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct Running {
  RequestId id;
  std::vector<TokenId> tokens;
  std::string salt, lora;
};

class Driver {
 public:
  Driver(const PrefixRigOptions& o, uint64_t seed)
      : rig(o), ref(o.block_tokens, o.groups), rng(seed), P(o.block_tokens), G(o.groups) {
    for (auto& base : bases) {
      base.resize(10 * P);
      for (auto& t : base) t = static_cast<TokenId>(rng() % 3);
    }
  }

  void step() {
    const int op = static_cast<int>(rng() % 20);
    if (op < 9)
      admit();
    else if (op < 14)
      release();
    else if (op < 17)
      append();
    else if (op < 19)
      evict();
    else if (rng() % 6 == 0)
      clear();
    REQUIRE(rig.alloc.validate().ok());
    const Status v = rig.index.validate(&rig.alloc);
    INFO((v.ok() ? std::string("valid") : v.error().describe()));
    REQUIRE(v.ok());
    REQUIRE(ref.size() == rig.index.cached_blocks());
  }

  PrefixRig rig;
  PrefixReference ref;
  std::mt19937_64 rng;
  uint32_t P, G;
  uint64_t lookups = 0, hits = 0, partial_hits = 0, evictions = 0;

 private:
  RequestExtras extras_of(const Running& r) const {
    RequestExtras e;
    e.cache_salt = r.salt;
    e.lora_name = r.lora;
    return e;
  }

  void drain() {
    const std::vector<AllocatorEvent> events = rig.alloc.drain_events();
    for (const auto& ev : events) ref.evict(ev.handle);
    evictions += events.size();
    const AbsorbOutcome a = rig.index.absorb(events);
    REQUIRE(a.unknown == 0);
  }

  // Publishes full blocks [first, end) of r, mirrored in the reference.
  void publish(const Running& r, uint32_t first, uint32_t end) {
    const BlockExtrasPlan plan = rig.plan(extras_of(r));
    std::vector<BlockHash> chain;
    rig.index.extend_hashes(rig.scope, r.tokens, plan, chain);
    const auto out =
        rig.index.publish_blocks(rig.scope, rig.target(), PrefixPublishArgs{r.id, r.tokens, chain, &plan, first, end});
    INFO((out.ok() ? std::string("ok") : out.error().describe()));
    REQUIRE(out.ok());
    for (uint32_t j = first; j < end; ++j)
      for (uint32_t g = 0; g < G; ++g) {
        const RefIdentity id = ref.full_identity(r.salt, r.lora, r.tokens, j);
        if (!rig.options.publish_duplicates && ref.present(id, g)) continue;
        ref.store(id, g, rig.alloc.table(r.id, g).value()[j]);
      }
  }

  std::vector<TokenId> random_prompt() {
    const auto& base = bases[rng() % bases.size()];
    std::vector<TokenId> t(base.begin(), base.begin() + 1 + static_cast<ptrdiff_t>(rng() % base.size()));
    if (rng() % 3 == 0) t[rng() % t.size()] = static_cast<TokenId>(rng() % 3);
    return t;
  }

  void admit() {
    Running r;
    r.tokens = random_prompt();
    r.salt = std::string(rng() % 4 == 0 ? 1 : 0, 's');
    r.lora = std::string(rng() % 5 == 0 ? 1 : 0, 'L');
    const PrefixMatch m = rig.lookup(r.tokens, extras_of(r));
    ++lookups;
    check_against_reference(r, m);
    hits += m.lengths.runtime > 0;
    partial_hits += m.receipt.copy_valid_partial_rows > 0;

    const uint32_t blocks = static_cast<uint32_t>(ceil_div(r.tokens.size(), P));
    const std::vector<PhysicalBlockHandle> full_hit(m.hit_handles.begin(),
                                                    m.hit_handles.begin() + uint64_t{m.full_hit_blocks} * G);
    const Result<AllocationReceipt> a =
        rig.alloc.allocate(AllocateArgs{static_cast<uint32_t>(r.tokens.size()), full_hit, {}});
    REQUIRE(a.ok());
    if (a->outcome != AllocationOutcome::committed) return;  // out of capacity: nothing changed
    drain();
    r.id = a->request_id;
    REQUIRE(rig.alloc.commit_rows(CommitRowsArgs{rig.alloc.fence(r.id).value(), static_cast<uint32_t>(r.tokens.size())})
                .ok());
    publish(r, m.full_hit_blocks, static_cast<uint32_t>(r.tokens.size()) / P);
    REQUIRE(rig.alloc.table(r.id, 0).value().size() == blocks);
    running.push_back(std::move(r));
  }

  void check_against_reference(const Running& r, const PrefixMatch& m) {
    const RefLookup want = ref.lookup(r.salt, r.lora, r.tokens);
    const uint32_t prompt = static_cast<uint32_t>(r.tokens.size());
    const bool partial = rig.options.policy == ReusePolicy::immutable_partial_tail;
    const uint32_t semantic = want.indexed_full * P + want.extension;
    const uint32_t indexed = partial ? semantic : want.indexed_full * P;
    const uint32_t bound = std::min({semantic, indexed, prompt - 1});
    const uint32_t runtime = partial ? bound : P * (bound / P);
    CHECK(m.lengths == PrefixLengths{prompt, semantic, indexed, prompt - 1, runtime, prompt - runtime});
    const uint32_t k = std::min(want.indexed_full, bound / P);
    REQUIRE(m.full_hit_blocks == k);
    CHECK(std::vector<PhysicalBlockHandle>(m.hit_handles.begin(), m.hit_handles.begin() + uint64_t{k} * G) ==
          std::vector<PhysicalBlockHandle>(want.handles.begin(), want.handles.begin() + uint64_t{k} * G));
    if (runtime % P != 0) {
      const std::vector<PhysicalBlockHandle> got(m.hit_handles.begin() + uint64_t{k} * G, m.hit_handles.end());
      if (k < want.indexed_full)
        CHECK(got == std::vector<PhysicalBlockHandle>(want.handles.begin() + uint64_t{k} * G,
                                                      want.handles.begin() + uint64_t{k + 1} * G));
      else
        CHECK(std::find(want.best_children.begin(), want.best_children.end(), got) != want.best_children.end());
    } else {
      CHECK(m.hit_handles.size() == uint64_t{k} * G);
    }
    CHECK(m.receipt.new_block_bundles == ceil_div(prompt, P) - runtime / P);
  }

  void release() {
    if (running.empty()) return;
    const size_t k = rng() % running.size();
    Running& r = running[k];
    const uint32_t v = static_cast<uint32_t>(r.tokens.size() % P);
    if (rig.options.policy == ReusePolicy::immutable_partial_tail && v > 0 && rng() % 2 == 0) {
      // Finished: its partial last block becomes an immutable tail.
      const BlockExtrasPlan plan = rig.plan(extras_of(r));
      std::vector<BlockHash> chain;
      rig.index.extend_hashes(rig.scope, r.tokens, plan, chain);
      const uint32_t block = static_cast<uint32_t>(r.tokens.size() / P);
      REQUIRE(
          rig.index.publish_tail(rig.scope, rig.target(), PrefixTailArgs{r.id, r.tokens, chain, &plan, block, v}).ok());
      const RefIdentity id{r.salt, r.lora, r.tokens, v, true};
      for (uint32_t g = 0; g < G; ++g)
        if (rig.options.publish_duplicates || !ref.present(id, g))
          ref.store(id, g, rig.alloc.table(r.id, g).value()[block]);
    }
    REQUIRE(rig.alloc.release(ReleaseArgs{rig.alloc.fence(r.id).value(), ReleaseReason::finished}).ok());
    drain();
    running.erase(running.begin() + static_cast<ptrdiff_t>(k));
  }

  // One decode row; a block that becomes full is published.
  void append() {
    if (running.empty()) return;
    Running& r = running[rng() % running.size()];
    const Result<AllocationReceipt> a = rig.alloc.append(AppendArgs{rig.alloc.fence(r.id).value(), {}, {}});
    REQUIRE(a.ok());
    if (a->outcome != AllocationOutcome::committed) return;
    drain();
    r.tokens.push_back(static_cast<TokenId>(rng() % 3));
    REQUIRE(rig.alloc.commit_rows(CommitRowsArgs{rig.alloc.fence(r.id).value(), static_cast<uint32_t>(r.tokens.size())})
                .ok());
    if (r.tokens.size() % P == 0) {
      const uint32_t block = static_cast<uint32_t>(r.tokens.size() / P) - 1;
      publish(r, block, block + 1);
    }
  }

  void evict() {
    const uint32_t g = static_cast<uint32_t>(rng() % G);
    const uint32_t start = static_cast<uint32_t>(rng() % rig.alloc.capacity_blocks());
    for (uint32_t k = 0; k < rig.alloc.capacity_blocks(); ++k) {
      const PhysicalBlockHandle h = rig.alloc.handle_of(g, (start + k) % rig.alloc.capacity_blocks());
      if (rig.alloc.block(h).value().cache_key == kNoCacheKey) continue;
      REQUIRE(rig.alloc.evict(h).ok());
      drain();
      return;
    }
  }

  void clear() {
    REQUIRE(rig.index.clear(rig.alloc).ok());
    ref.clear();
  }

  std::vector<Running> running;
  std::array<std::vector<TokenId>, 4> bases;
};

}  // namespace

TEST_CASE("prefix index agrees with a brute-force reference on random workloads", "[prefix][random]") {
  uint64_t configs = 0, total_hits = 0, total_partial = 0, total_evictions = 0;
  for (uint32_t groups : {1u, 2u})
    for (ReusePolicy policy : {ReusePolicy::full_block, ReusePolicy::immutable_partial_tail})
      for (bool witness : {true, false})
        for (bool duplicates : {false, true})
          for (FreeQueuePolicy queue :
               {FreeQueuePolicy::free_first_then_oldest_evictable, FreeQueuePolicy::single_lru_queue}) {
            PrefixRigOptions o;
            o.groups = groups;
            o.blocks = 24;
            o.block_tokens = 4;
            o.policy = policy;
            o.witness = witness;
            o.publish_duplicates = duplicates;
            o.queue = queue;
            o.family = configs % 2 == 0 ? HashFamily::sha256 : HashFamily::xxh3_bits128;
            const uint64_t seed = 1000 + configs;
            INFO("seed " << seed << " groups " << groups << " partial " << (policy != ReusePolicy::full_block)
                         << " witness " << witness << " duplicates " << duplicates << " lru "
                         << (queue == FreeQueuePolicy::single_lru_queue));
            Driver d(o, seed);
            for (int s = 0; s < 800; ++s) d.step();
            total_hits += d.hits;
            total_partial += d.partial_hits;
            total_evictions += d.evictions;
            ++configs;
          }
  // The workload exercised what it is meant to.
  CHECK(configs == 32);
  CHECK(total_hits > 500);
  CHECK(total_partial > 100);
  CHECK(total_evictions > 500);
}
