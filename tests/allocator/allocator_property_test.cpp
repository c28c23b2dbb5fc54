// Seeded randomised test of the allocator state machine: 10^5
// operations over several requests, forks and two cache groups, with
// validate() after every step, every failed or rolled-back operation leaving
// the digest unchanged, and the K/V bytes every request can see compared with
// a brute-force reference of who wrote each of its rows.
#include <array>
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "services/allocator/block_allocator.hpp"
#include "tests/support/allocator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

constexpr uint32_t kP = 8;
constexpr uint32_t kBlocks = 24;
const std::vector<uint64_t> kRowBytes{24, 8};

struct Writer {
  uint64_t lineage;
  uint64_t token;
  friend bool operator==(const Writer&, const Writer&) = default;
};

// Reference model of one open request: who wrote each of its rows.
struct ModelRequest {
  uint64_t lineage;
  std::vector<Writer> history;  // one per token position
};

struct PropertyRun {
  std::mt19937_64 rng;
  HostPayloadStore store{kRowBytes, kBlocks, kP};
  BlockAllocator al;
  RowWriter rows{kRowBytes};
  std::map<uint64_t, ModelRequest> model;  // by RequestId
  std::map<uint64_t, std::vector<Writer>> key_content;
  std::map<uint64_t, std::array<PhysicalBlockHandle, 2>> key_handles;
  uint64_t next_lineage = 1;
  uint64_t next_key = 1;
  std::vector<BlockLease> leases;
  uint64_t committed = 0, failed = 0, capacity = 0, rolled_back = 0, tails_copied = 0;
  bool pressure = false;

  PropertyRun(uint64_t seed, FreeQueuePolicy policy) : rng(seed), al(make(policy)) {}

  BlockAllocator make(FreeQueuePolicy policy) {
    BlockAllocatorConfig c;
    c.queue_policy = policy;
    c.block_size = kP;
    c.max_requests = 12;
    c.zero_on_recycle = true;
    c.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{1}, PoolGeneration{3}, kBlocks, 100, kRowBytes[0], {}});
    c.groups.push_back(GroupPoolConfig{CacheGroupId{1}, PoolId{2}, PoolGeneration{3}, kBlocks, 200, kRowBytes[1], {}});
    return BlockAllocator::create(c, &store).value();
  }

  uint32_t pick(uint32_t n) { return static_cast<uint32_t>(rng() % n); }

  std::optional<uint64_t> random_request() {
    if (model.empty()) return std::nullopt;
    auto it = model.begin();
    std::advance(it, pick(static_cast<uint32_t>(model.size())));
    return it->first;
  }

  uint32_t slot_of(const PhysicalBlockHandle& h, uint32_t g) const { return h.block.value - (g == 0 ? 100 : 200); }

  // Writes the model's rows for [from, to) into the store and commits them.
  void write_and_commit(uint64_t id, uint32_t from, uint32_t to) {
    ModelRequest& m = model.at(id);
    for (uint32_t g = 0; g < 2; ++g) {
      auto table = al.table(RequestId{id}, g).value();
      for (uint32_t t = from; t < to; ++t) {
        std::vector<uint8_t> row(kRowBytes[g]);
        RowWriter::fill(row, m.history[t].lineage, m.history[t].token, g);
        store.write_rows(g, slot_of(table[t / kP], g), t % kP, 1, row);
      }
    }
    Result<AllocationReceipt> r = al.commit_rows(CommitRowsArgs{al.fence(RequestId{id}).value(), to});
    REQUIRE(r.ok());
  }

  // Every valid row a request can see holds exactly what its model says.
  void check_contents(uint64_t id) {
    const ModelRequest& m = model.at(id);
    for (uint32_t g = 0; g < 2; ++g) {
      auto table = al.table(RequestId{id}, g).value();
      for (uint32_t t = 0; t < m.history.size(); ++t) {
        const BlockMeta b = al.block(table[t / kP]).value();
        if (t % kP >= b.valid_rows) continue;
        REQUIRE(rows.matches(store, g, slot_of(table[t / kP], g), t % kP, 1, m.history[t].lineage, m.history[t].token));
      }
    }
  }

  void forget_key(uint64_t key) {
    key_content.erase(key);
    key_handles.erase(key);
  }

  // Identities evicted to serve allocations arrive as events.
  void drain() {
    for (const AllocatorEvent& e : al.drain_events()) forget_key(e.cache_key.value);
  }

  void expect_unchanged(const StateDigest& before, const Status& s) {
    REQUIRE(!s.ok());
    REQUIRE(al.state_digest() == before);
    ++failed;
  }
  template <class Receipt>
  void expect_unchanged(const StateDigest& before, const Result<Receipt>& r) {
    REQUIRE(!r.ok());
    REQUIRE(al.state_digest() == before);
    ++failed;
  }

  void step() {
    const StateDigest before = al.state_digest();
    uint32_t op = pick(100);
    auto target = random_request();
    if (pressure && target) op = 75;  // after a capacity outcome, release something
    pressure = false;
    if (op < 12 || !target) {  // allocate, sometimes over cached bundles
      const uint32_t n = 1 + pick(3 * kP);
      std::vector<PhysicalBlockHandle> hits;
      std::vector<Writer> hit_history;
      uint32_t tail_rows = 0;
      const uint32_t reuse = pick(3);
      if (reuse == 0 && !key_content.empty() && n >= kP) {
        auto it = key_handles.begin();
        std::advance(it, pick(static_cast<uint32_t>(key_handles.size())));
        hits = {it->second[0], it->second[1]};
        hit_history = key_content.at(it->first);
      } else if (reuse == 1 && !key_content.empty()) {
        // An immutable partial tail (0x07D): the first v rows of a cached
        // bundle are copied into the new request's own first block.
        auto it = key_handles.begin();
        std::advance(it, pick(static_cast<uint32_t>(key_handles.size())));
        tail_rows = 1 + pick(kP - 1);
        if (n < tail_rows) tail_rows = n;
        hits = {it->second[0], it->second[1]};
        const std::vector<Writer>& content = key_content.at(it->first);
        hit_history.assign(content.begin(), content.begin() + tail_rows);
      }
      if (pick(8) == 0) al.faults().arm("after_reserve_group_" + std::to_string(pick(2)));
      Result<AllocationReceipt> r = al.allocate(AllocateArgs{n, hits, {}, nullptr, tail_rows});
      al.faults().disarm_all();
      REQUIRE(r.ok());
      if (r->outcome != AllocationOutcome::committed) {
        REQUIRE(al.state_digest() == before);
        if (r->outcome == AllocationOutcome::rolled_back)
          ++rolled_back;
        else
          ++capacity, pressure = true;
        return;
      }
      if (tail_rows > 0) {
        // The copy is the request's own block: no reference to the source.
        REQUIRE(r->copied_rows == tail_rows);
        for (const RefcountDelta& d : r->refcount_deltas) REQUIRE(d.handle != hits[0]);
        REQUIRE(al.block(al.table(r->request_id, 0).value()[0]).value().valid_rows == tail_rows);
        ++tails_copied;
      }
      ModelRequest m{next_lineage++, {}};
      m.history = hit_history;
      for (uint32_t t = static_cast<uint32_t>(m.history.size()); t < n; ++t) m.history.push_back({m.lineage, t});
      model[r->request_id.value] = m;
      write_and_commit(r->request_id.value, static_cast<uint32_t>(hit_history.size()), n);
      ++committed;
      return;
    }
    const uint64_t id = *target;
    ModelRequest& m = model.at(id);
    const RequestFence fence = al.fence(RequestId{id}).value();
    if (op < 55) {  // append a decode row, with bytes (or written then committed)
      const uint32_t t = static_cast<uint32_t>(m.history.size());
      if (pick(6) == 0) al.faults().arm("after_reserve_group_" + std::to_string(pick(2)));
      const bool inline_rows = pick(4) != 0;
      Result<AllocationReceipt> r = al.append(AppendArgs{
          fence, inline_rows ? rows.rows_for(m.lineage, t) : std::span<const std::span<const uint8_t>>{}, {}});
      al.faults().disarm_all();
      if (!r.ok()) {  // COW over rows not yet committed: a typed rejection
        REQUIRE(r.error().code == ErrorCode::row_not_valid);
        expect_unchanged(before, r);
        return;
      }
      if (r->outcome != AllocationOutcome::committed) {
        REQUIRE(al.state_digest() == before);
        if (r->outcome == AllocationOutcome::rolled_back)
          ++rolled_back;
        else
          ++capacity, pressure = true;
        return;
      }
      m.history.push_back({m.lineage, t});
      if (!inline_rows) write_and_commit(id, t, t + 1);
      ++committed;
    } else if (op < 63) {  // fork
      Result<AllocationReceipt> r = al.fork(ForkArgs{fence});
      REQUIRE(r.ok());
      if (r->outcome != AllocationOutcome::committed) {
        ++capacity;
        pressure = true;
        return;
      }
      model[r->request_id.value] = ModelRequest{next_lineage++, m.history};
      ++committed;
    } else if (op < 70) {  // truncate a suffix
      const uint32_t len = static_cast<uint32_t>(m.history.size());
      if (len < 2) return;
      const uint32_t keep = 1 + pick(len - 1);
      REQUIRE(al.truncate(TruncateArgs{fence, keep, len}).ok());
      m.history.resize(keep);
      ++committed;
    } else if (op < 80) {  // release or cancel
      REQUIRE(al.release(ReleaseArgs{fence, pick(2) ? ReleaseReason::finished : ReleaseReason::cancelled}).ok());
      model.erase(id);
      ++committed;
    } else if (op < 87) {  // publish a cache key on a full, valid, unkeyed bundle
      auto t0 = al.table(RequestId{id}, 0).value();
      auto t1 = al.table(RequestId{id}, 1).value();
      const uint32_t j = pick(static_cast<uint32_t>(t0.size()));
      const BlockMeta b0 = al.block(t0[j]).value();
      if (b0.valid_rows != kP || b0.cache_key != kNoCacheKey || (j + 1) * kP > m.history.size()) return;
      const uint64_t key = next_key++;
      REQUIRE(al.publish_cache_key(t0[j], CacheKey{key}).ok());
      REQUIRE(al.publish_cache_key(t1[j], CacheKey{key}).ok());
      key_handles[key] = {t0[j], t1[j]};
      key_content[key] = std::vector<Writer>(m.history.begin() + j * kP, m.history.begin() + (j + 1) * kP);
      ++committed;
    } else if (op < 91) {  // evict a cached identity (live or evictable)
      if (key_content.empty()) return;
      auto t0 = al.table(RequestId{id}, 0).value();
      auto t1 = al.table(RequestId{id}, 1).value();
      for (size_t j = 0; j < t0.size(); ++j) {
        const uint64_t key = al.block(t0[j]).value().cache_key.value;
        if (key == 0) continue;
        REQUIRE(al.evict(t0[j]).ok());
        REQUIRE(al.evict(t1[j]).ok());
        forget_key(key);
        ++committed;
        break;
      }
    } else if (op < 95) {  // leases
      if (!leases.empty() && (pick(2) == 0 || leases.size() >= 4)) {
        REQUIRE(al.release_lease(leases.back().id).ok());
        leases.pop_back();
      } else {
        auto t0 = al.table(RequestId{id}, 0).value();
        auto l = al.acquire_lease(t0[pick(static_cast<uint32_t>(t0.size()))]);
        REQUIRE(l.ok());
        leases.push_back(*l);
      }
      ++committed;
    } else {  // malformed transitions: each a typed error, state unchanged
      switch (pick(7)) {
        case 0:
          expect_unchanged(
              before, al.append(AppendArgs{
                          {fence.request, fence.generation, TableVersion{fence.table_version.value + 1}}, {}, {}}));
          break;
        case 1:
          expect_unchanged(
              before,
              al.append(AppendArgs{
                  {fence.request, RequestGeneration{fence.generation.value + 1}, fence.table_version}, {}, {}}));
          break;
        case 2: {
          auto h = al.table(RequestId{id}, 0).value()[0];
          h.generation = BlockGeneration{h.generation.value + 1};
          expect_unchanged(before,
                           al.acquire_lease(h).ok() ? Status{} : Status{make_error(ErrorCode::stale_physical, "")});
          break;
        }
        case 3:
          expect_unchanged(before, al.truncate(TruncateArgs{fence, 0, static_cast<uint32_t>(m.history.size()) + 1}));
          break;
        case 4:
          expect_unchanged(before, al.release_lease(LeaseId{0xFFFFFFFFFFull}));
          break;
        case 5: {
          // A "partial" tail of a whole block, or with no tail named: typed, unchanged.
          auto t0 = al.table(RequestId{id}, 0).value();
          auto t1 = al.table(RequestId{id}, 1).value();
          const std::vector<PhysicalBlockHandle> tail{t0[0], t1[0]};
          if (pick(2) == 0)
            expect_unchanged(before, al.allocate(AllocateArgs{2 * kP, tail, {}, nullptr, kP}));
          else
            expect_unchanged(before, al.allocate(AllocateArgs{2 * kP, {}, {}, nullptr, 1}));
          break;
        }
        default:
          expect_unchanged(before, al.allocate(AllocateArgs{0, {}, {}}));
          break;
      }
    }
  }
};

}  // namespace

TEST_CASE("randomised allocator transitions validate and match a reference model", "[allocator][property]") {
  // Four seeds under the default queue policy, two under vLLM's single queue.
  const std::pair<uint64_t, FreeQueuePolicy> runs[] = {{20261130, FreeQueuePolicy::free_first_then_oldest_evictable},
                                                       {7, FreeQueuePolicy::free_first_then_oldest_evictable},
                                                       {424242, FreeQueuePolicy::free_first_then_oldest_evictable},
                                                       {99, FreeQueuePolicy::free_first_then_oldest_evictable},
                                                       {5150, FreeQueuePolicy::single_lru_queue},
                                                       {31337, FreeQueuePolicy::single_lru_queue}};
  for (const auto& [seed, policy] : runs) {
    INFO("seed " << seed << " policy " << int(policy));
    PropertyRun run(seed, policy);
    std::vector<uint32_t> most_live(run.al.group_count(), 0);  // the live counts seen between steps
    for (int i = 0; i < 25000; ++i) {
      INFO("step " << i);
      run.step();
      run.drain();
      Status v = run.al.validate();
      if (!v.ok()) FAIL(v.error().describe());
      // The pool's high-water mark covers every live count seen (an op may
      // peak inside itself, so it can be higher) and never exceeds capacity.
      for (uint32_t g = 0; g < run.al.group_count(); ++g) {
        const BlockAllocator::PoolCounts c = run.al.counts(g);
        most_live[g] = std::max(most_live[g], c.live);
        REQUIRE(c.peak_live >= most_live[g]);
        REQUIRE(c.peak_live <= run.al.capacity_blocks());
      }
      if (i % 64 == 0)
        for (auto& [id, m] : run.model) run.check_contents(id);
    }
    for (auto& [id, m] : run.model) run.check_contents(id);
    INFO("committed " << run.committed << " failed " << run.failed << " capacity " << run.capacity << " rolled back "
                      << run.rolled_back);
    CHECK(run.committed > 10000);
    CHECK(run.tails_copied > 100);  // the copy-rows intent ran, and its rows matched the reference
    CHECK(run.failed > 100);
    CHECK(run.rolled_back > 10);
    CHECK(run.capacity > 0);
  }
}
