// A purge's overwrite of one namespace (0x0CE step 5) marks only the blocks
// that may hold its rows (services/allocator/block_residue.hpp), and still no
// later owner ever sees them. Checked on real bytes: every request fills all
// its blocks with its namespace's byte; after namespace A's purge, the whole
// pool is handed out again and no block reads A's byte, while a block that
// only B ever wrote is not zeroed (B's rows are not A's to overwrite). Seeded
// random traffic, the seed printed.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "services/allocator/allocator_service.hpp"
#include "services/allocator/payload_store.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 4;
constexpr uint32_t kBlocks = 24;
constexpr uint64_t kRowBytes = 8;

BlockAllocatorConfig pools() {
  BlockAllocatorConfig c;
  c.block_size = kP;
  for (uint32_t g = 0; g < 2; ++g)
    c.groups.push_back(GroupPoolConfig{CacheGroupId{g}, PoolId{1 + g}, PoolGeneration{1}, kBlocks, 0, kRowBytes, {}});
  return c;
}

BlockQuotaConfig namespaces() {
  BlockQuotaConfig q;
  q.namespaces = {NamespaceQuota{"t/a", std::nullopt, std::nullopt}, NamespaceQuota{"t/b", std::nullopt, std::nullopt}};
  return q;
}

// The byte a request of `ns` writes ("" : a request that named none).
uint8_t byte_of(const std::string& ns) { return ns == "t/a" ? 0xA1 : ns == "t/b" ? 0xB2 : 0xC3; }

}  // namespace

TEST_CASE("purge overwrite: only blocks that may hold the namespace's rows are marked, and none reaches a new owner",
          "[node][services][purge][property]") {
  const uint64_t seed = GENERATE(1ull, 2ull, 3ull, 20261204ull);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  HostPayloadStore store({kRowBytes, kRowBytes}, kBlocks, kP);
  AllocatorService svc(BlockAllocator::create(pools(), &store).value(), AllocatorServiceOptions{false, namespaces()});
  const SessionId s{1};
  svc.grant(s, "t/a");
  svc.grant(s, "t/b");
  const std::vector<std::string> names{"t/a", "t/b", ""};

  struct Live {
    std::string ns;
    RequestFence fence;
  };
  std::vector<Live> live;
  // Fills every row of every block of the request with its namespace's byte.
  auto fill = [&](const Live& r) {
    for (uint32_t g = 0; g < 2; ++g) {
      const std::vector<PhysicalBlockHandle> table = svc.core().table(r.fence.request, g).value();
      for (const PhysicalBlockHandle& h : table)
        store.write_rows(g, h.block.value, 0, kP, std::vector<uint8_t>(kP * kRowBytes, byte_of(r.ns)));
    }
  };
  // The reference model: which bytes each block may hold (what a purge of
  // t/a must cover) and which blocks a purge marked that no one took since.
  // A block handed out while marked is zeroed first: it then holds only its
  // new owner's bytes.
  std::map<std::pair<uint32_t, uint32_t>, std::set<uint8_t>> held;
  std::set<std::pair<uint32_t, uint32_t>> pending;
  auto handed_out = [&](uint32_t g, uint32_t slot, const std::string& ns) {
    if (pending.erase({g, slot}) != 0) held[{g, slot}].clear();
    held[{g, slot}].insert(byte_of(ns));
  };
  auto blocks_of = [&](const RequestFence& f) {
    std::set<std::pair<uint32_t, uint32_t>> out;
    for (uint32_t g = 0; g < 2; ++g) {
      const std::vector<PhysicalBlockHandle> table = svc.core().table(f.request, g).value();
      for (const PhysicalBlockHandle& h : table) out.insert({g, h.block.value});
    }
    return out;
  };

  // t/a purged every 25 steps: the blocks that held t/a's rows or a
  // nameless request's since they were last marked are marked, no other.
  auto purge_a = [&] {
    uint64_t expected = 0;  // blocks newly marked
    for (auto& [block, bytes] : held)
      if (bytes.contains(0xA1) || bytes.contains(0xC3)) {
        if (pending.insert(block).second) ++expected;
        bytes.clear();  // the mark zeroes whatever is in it before its next owner
      }
    CHECK(svc.mark_for_overwrite("t/a") == expected);
    return expected;
  };
  uint64_t marked = 0, rounds = 0;
  for (int step = 0; step < 300; ++step) {
    INFO("step " << step);
    if (step % 25 == 24) {
      marked += purge_a();
      ++rounds;
    }
    const uint32_t kind = static_cast<uint32_t>(rng() % 4);
    if (kind <= 1 || live.empty()) {
      // Mostly t/b, so that many blocks hold only t/b's rows at a purge.
      const uint32_t pick = static_cast<uint32_t>(rng() % 6);
      const std::string ns = pick == 0 ? names[0] : pick == 1 ? names[2] : names[1];
      const AllocatorOutcome o =
          svc.apply_one(s, AllocateOp{1 + static_cast<uint32_t>(rng() % 12), {}, std::nullopt, ns});
      const auto* r = std::get_if<AllocationReceipt>(&o);
      REQUIRE(r != nullptr);
      if (r->outcome != AllocationOutcome::committed) continue;
      live.push_back(Live{ns, {r->request_id, r->request_generation, r->table_version_after}});
      for (const auto& [g, slot] : blocks_of(live.back().fence)) handed_out(g, slot, ns);
      fill(live.back());
    } else if (kind == 2) {  // a fork: the child writes its own tail after a copy-on-write
      Live& parent = live[rng() % live.size()];
      const AllocatorOutcome o = svc.apply_one(s, ForkOp{parent.fence});
      const auto* f = std::get_if<AllocationReceipt>(&o);
      if (f == nullptr || f->outcome != AllocationOutcome::committed) continue;
      Live child{parent.ns, {f->request_id, f->request_generation, f->table_version_after}};
      const std::set<std::pair<uint32_t, uint32_t>> shared = blocks_of(parent.fence);
      const AllocatorOutcome a = svc.apply_one(s, AppendOp{child.fence, {}, std::nullopt});
      if (const auto* ar = std::get_if<AllocationReceipt>(&a); ar && ar->outcome == AllocationOutcome::committed) {
        child.fence.generation = ar->request_generation;
        child.fence.table_version = ar->table_version_after;
      }
      // The appended bundle (a copy of the shared tail, or a new one) is the
      // child's own: it holds the copied rows, and the child writes it.
      for (const auto& [g, slot] : blocks_of(child.fence))
        if (!shared.contains({g, slot})) handed_out(g, slot, child.ns);
      live.push_back(child);
    } else {
      const size_t i = rng() % live.size();
      REQUIRE(
          std::holds_alternative<ReleaseResult>(svc.apply_one(s, ReleaseOp{live[i].fence, ReleaseReason::finished})));
      live.erase(live.begin() + static_cast<long>(i));
    }
    REQUIRE(svc.validate().ok());
  }

  marked += purge_a();
  ++rounds;
  // Neither never nor always the whole pool.
  CHECK(marked > 0);
  CHECK(marked < rounds * 2u * kBlocks);
  // Everything goes back, and the whole pool is handed out again: every
  // marked block reads zero, every other block exactly what it held (t/b's
  // rows are not t/a's to overwrite), and none reads t/a's byte.
  auto read = [&](uint32_t g, uint32_t slot) {
    std::vector<uint8_t> bytes(kP * kRowBytes);
    store.read_rows(g, slot, 0, kP, bytes);
    return bytes;
  };
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint8_t>> before;
  for (uint32_t g = 0; g < 2; ++g)
    for (uint32_t slot = 0; slot < kBlocks; ++slot) before[{g, slot}] = read(g, slot);
  for (const Live& r : live) (void)svc.apply_one(s, ReleaseOp{r.fence, ReleaseReason::finished});
  const AllocatorOutcome all = svc.apply_one(s, AllocateOp{kBlocks * kP, {}, std::nullopt, "t/b"});
  REQUIRE(std::get<AllocationReceipt>(all).outcome == AllocationOutcome::committed);
  for (uint32_t g = 0; g < 2; ++g)
    for (uint32_t slot = 0; slot < kBlocks; ++slot) {
      INFO("group " << g << " slot " << slot);
      const std::vector<uint8_t> bytes = read(g, slot);
      CHECK(std::count(bytes.begin(), bytes.end(), uint8_t{0xA1}) == 0);
      if (pending.contains({g, slot}))
        CHECK(std::count(bytes.begin(), bytes.end(), uint8_t{0}) == static_cast<long>(bytes.size()));
      else
        CHECK(bytes == before[{g, slot}]);
    }
  // A name the node does not know marks the whole pool.
  CHECK(svc.mark_for_overwrite("t/zz") == 2u * kBlocks);
}

}  // namespace kvrt::test
