// The operating system refusing a map() or unmap() part-way through a step
// (0x06B's map / unmap calls; 0x06D: a frontier is never half mapped).
// FaultPointBacking sits between the core and a real backing and makes
// the nth call of one kind fail, as mmap does under ENOMEM. A step that hits
// one must leave the mapper as it was: handles, ledger, digest, validate(),
// and, the stronger property, its next choices (which handles the following
// steps take, which retained bundles they reclaim) must equal those of a twin
// mapper that never saw the failed step. A matching digest alone would not
// show that: the digest is a multiset, blind to the free handles' order.
#include <cstring>
#include <map>
#include <random>

#include "services/common/fault_points.hpp"
#include "services/mapper/fault_point_backing.hpp"
#include "services/mapper/memfd_backing.hpp"
#include "tests/mapper/mapper_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// Everything a caller can observe of a mapper, record by record.
struct MapperImage {
  StateDigest digest;
  MappingLedger ledger;
  Epoch epoch;
  uint64_t maps = 0, unmaps = 0;
  std::vector<std::tuple<bool, uint64_t, uint64_t, uint32_t, uint32_t, std::vector<std::vector<PageHandleId>>>> slots;
  std::vector<std::tuple<HandleState, uint32_t, uint32_t, uint32_t, uint64_t>> handles;
  bool operator==(const MapperImage&) const = default;
};

MapperImage image_of(const VmmMapper& m) {
  MapperImage out{m.state_digest(), m.ledger(), m.epoch(), m.bundle_maps(), m.bundle_unmaps(), {}, {}};
  for (uint32_t s = 0; s < m.geometry().config().request_slots; ++s) {
    const SlotRecord& r = m.slot(s);
    out.slots.emplace_back(r.active, r.request.value, r.generation.value, r.target_tokens, r.valid_tokens, r.pages);
  }
  for (uint64_t h = 0; h < m.geometry().config().handle_count; ++h) {
    const HandleRecord& r = m.handle(h);
    out.handles.emplace_back(r.state, r.slot.value, r.tensor, r.page, r.generation.value);
  }
  return out;
}

// Few handles for many slots, so that steps reclaim retained bundles often.
MapperConfig tight_config() {
  MapperConfig c = fixture_0x06f_config();  // L=2: 4 tensors, bundles of 4 handles
  c.request_slots = 4;                      // and 3 bundles (12 handles): a fourth frontier must reclaim
  return c;
}

struct TwinCounts {
  uint64_t injected = 0, undone = 0, reclaims = 0, twin_steps = 0;
};

void run_twins(uint64_t seed, TwinCounts& counts) {
  INFO("seed " << seed);
  const MapperConfig config = tight_config();
  FaultPoints faults;
  auto faulty_backing = std::make_unique<FaultPointBacking>(std::make_unique<LedgerOnlyBacking>(), faults);
  FaultPointBacking* calls = faulty_backing.get();
  auto a_made = VmmMapper::init(config, std::move(faulty_backing));
  auto b_made = VmmMapper::init(config, std::make_unique<LedgerOnlyBacking>());
  REQUIRE(a_made.ok());
  REQUIRE(b_made.ok());
  VmmMapper& a = *a_made.value();
  VmmMapper& b = *b_made.value();
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  std::map<uint64_t, SlotGeneration> live;  // request -> its slot generation (the same on both twins)
  uint64_t next_id = 1;
  for (int op = 0; op < 600; ++op) {
    INFO("op " << op);
    const uint64_t kind = pick(10);
    if (kind < 3) {
      if (live.size() == config.request_slots) continue;
      const uint32_t expected = static_cast<uint32_t>(pick(config.max_tokens + 1));
      const Result<SlotBinding> x = a.alloc_reqid(RequestId{next_id}, gen1(), expected);
      const Result<SlotBinding> y = b.alloc_reqid(RequestId{next_id}, gen1(), expected);
      REQUIRE(x.ok());
      REQUIRE(y.ok());
      REQUIRE(*x == *y);  // the same slot: the lowest free one, retained pages first
      live[next_id++] = x->generation;
    } else if (kind < 7 && !live.empty()) {
      std::vector<StepRequest> step;
      for (uint64_t k = 0, n = 1 + pick(3); k < n; ++k) {
        auto it = live.begin();
        std::advance(it, pick(live.size()));
        bool dup = false;
        for (const StepRequest& r : step) dup |= r.request.value == it->first;
        if (dup) continue;
        uint32_t valid = 0;
        for (uint32_t s = 0; s < config.request_slots; ++s)
          if (a.slot(s).active && a.slot(s).request.value == it->first) valid = a.slot(s).valid_tokens;
        step.push_back({RequestId{it->first}, valid + static_cast<uint32_t>(pick(config.max_tokens - valid + 1))});
      }
      const bool arm = pick(3) == 0;
      if (arm) faults.arm(pick(2) == 0 ? "os_map" : "os_unmap", 1 + static_cast<uint32_t>(pick(6)));
      const MapperImage before = image_of(a);
      const Result<StepResult> x = a.step(step, MappingPath::synchronous);
      const bool fired = arm && !faults.any_armed();
      faults.disarm_all();
      counts.injected += fired;
      REQUIRE(a.validate().ok());
      if (!x.ok()) {
        // Only the injected refusal may fail a well-formed step, and it
        // leaves every record as it was. The twin does not see the step.
        REQUIRE(fired);
        CHECK(x.error().code == ErrorCode::os_mapping_failed);
        CHECK(x.error().reason.rfind("step undone: ", 0) == 0);
        MapperImage after = image_of(a);
        CHECK(after == before);
        CHECK(a.state_digest() == a.recompute_digest());
        ++counts.undone;
        continue;
      }
      const Result<StepResult> y = b.step(step, MappingPath::synchronous);
      REQUIRE(y.ok());
      REQUIRE(*x == *y);  // same handles, same reclaimed bundles, same ledgers and epochs
      ++counts.twin_steps;
      for (const MappedFrontierReceipt& r : x->receipts) counts.reclaims += r.reclaimed_bundles.size();
    } else if (kind < 9 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, pick(live.size()));
      uint32_t frontier = 0;
      for (uint32_t s = 0; s < config.request_slots; ++s)
        if (a.slot(s).active && a.slot(s).request.value == it->first)
          frontier = std::min<uint32_t>(a.slot(s).target_tokens,
                                        static_cast<uint32_t>(a.slot(s).pages.size()) * a.geometry().tokens_per_page());
      const Status x = a.append_rows(RequestId{it->first}, it->second, frontier);
      const Status y = b.append_rows(RequestId{it->first}, it->second, frontier);
      REQUIRE(code_of(x) == code_of(y));
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, pick(live.size()));
      const ReleaseMode mode = pick(3) == 0 ? ReleaseMode::unmap_now : ReleaseMode::retain;
      REQUIRE(a.free_reqid(RequestId{it->first}, it->second, mode).ok());
      REQUIRE(b.free_reqid(RequestId{it->first}, it->second, mode).ok());
      live.erase(it);
    }
    // The twins agree after every operation: the faulted one is the other's
    // state plus nothing.
    REQUIRE(a.state_digest() == b.state_digest());
    REQUIRE(image_of(a).handles == image_of(b).handles);
  }
  CHECK(calls->maps() > 0);
}

}  // namespace

TEST_CASE("a map or unmap the OS refuses mid-step undoes the whole step, and the next choices are a twin's",
          "[mapper][fault][twin][property]") {
  TwinCounts counts;
  for (uint64_t seed : {1ull, 7ull, 42ull, 20261202ull, 99991ull}) run_twins(seed, counts);
  // Not vacuous: refusals fired inside steps and were undone, and steps reclaimed
  // retained bundles (the path where a half-done step would move handles).
  INFO("injected " << counts.injected << ", undone " << counts.undone << ", reclaims " << counts.reclaims
                   << ", steps compared " << counts.twin_steps);
  CHECK(counts.undone >= 20);
  CHECK(counts.reclaims >= 20);
  CHECK(counts.twin_steps >= 200);
}

TEST_CASE("a refused step maps a reclaimed retained page back: its bytes are where they were", "[mapper][fault]") {
  // Real mappings (G = one OS page): slot X retains one bundle, Y's step
  // reclaims it (unmap from X, map at Y) and the OS refuses Y's second
  // bundle. The undo maps the reclaimed bundle back at X: the bytes written
  // through X's view are visible there again, and Y's view is unchanged.
  MapperConfig c = os_page_config();
  c.handle_count = 2;  // one bundle: K and V of one page
  FaultPoints faults;
  auto made = VmmMapper::init(c, std::make_unique<FaultPointBacking>(std::make_unique<MemfdBacking>(), faults));
  REQUIRE(made.ok());
  VmmMapper& m = *made.value();
  const MapperGeometry& g = m.geometry();
  const SlotBinding x = m.alloc_reqid(req('X'), gen1(), 8).value();
  REQUIRE(m.step({{req('X'), 8}}, MappingPath::synchronous).ok());
  std::byte* k0 = m.reservation_base() + g.page_offset(0, x.slot.value, 0);
  std::memset(k0, 0x5a, 64);
  REQUIRE(m.free_reqid(req('X'), x.generation, ReleaseMode::retain).ok());
  // Y expects more than X retained: it takes the empty slot, not X's (0x06B).
  REQUIRE(m.alloc_reqid(req('Y'), gen1(), 32).value().slot.value != x.slot.value);
  const MapperImage before = image_of(m);
  faults.arm("os_map", 2);  // the reclaim unmaps X's K and V, maps Y's K, then V is refused
  const Result<StepResult> refused = m.step({{req('Y'), 8}}, MappingPath::synchronous);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::os_mapping_failed);
  CHECK(image_of(m) == before);
  REQUIRE(m.validate().ok());
  for (int i = 0; i < 64; ++i) REQUIRE(k0[i] == std::byte{0x5a});
  // With nothing armed the same step reclaims the bundle as it would have.
  const Result<StepResult> ok = m.step({{req('Y'), 8}}, MappingPath::synchronous);
  REQUIRE(ok.ok());
  REQUIRE(ok->receipts.size() == 1);
  CHECK(ok->receipts[0].reclaimed_bundles.size() == 1);
}
