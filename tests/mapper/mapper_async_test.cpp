// Asynchronous mapping one step ahead (spec 0x06D) and the mapper's
// incremental state digest, on exact scenarios: the steady decode of 0x06D
// finds every new page already mapped, a stale prefetch is revoked before its
// handle shows anywhere else, a refused background map changes timing only,
// and every transition moves the digest by exactly what changed.
#include <chrono>
#include <thread>
#include <vector>

#include "tests/mapper/mapper_async_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

uint64_t new_mappings(const StepResult& r) {
  uint64_t n = 0;
  for (const MappedFrontierReceipt& rec : r.receipts) n += rec.new_mappings.size();
  return n;
}

// Four requests decode one token per step from staggered lengths, so their
// page crossings (every 16 tokens) fall on different steps. Returns the number
// of mappings made during decode.
uint64_t run_steady_decode(SyncMapper& s, AsyncMapper& a, uint64_t& prefill_mappings) {
  const uint32_t t_max = s.mapper->geometry().config().max_tokens;
  std::vector<StepRequest> batch;
  for (uint64_t r = 1; r <= 4; ++r) {
    auto bs = s.mapper->alloc_reqid(req(r), gen1(), 0);
    auto ba = a.mapper->alloc_reqid(req(r), gen1(), 0);
    REQUIRE(bs.ok());
    REQUIRE(ba.ok());
    CHECK(bs->slot == ba->slot);
    batch.push_back({req(r), static_cast<uint32_t>(4 * r - 1)});  // 3, 7, 11, 15 tokens
  }
  auto prefill_s = s.mapper->step(batch, MappingPath::synchronous);
  auto prefill_a = a.mapper->step(batch, MappingPath::asynchronous);
  require_same_step(prefill_s, prefill_a);
  prefill_mappings = new_mappings(*prefill_s);
  uint64_t decode_mappings = 0;
  for (int step = 0; step < 45; ++step) {  // the longest request ends at 60 <= T_max = 64
    INFO("decode step " << step);
    for (const StepRequest& r : batch) {
      REQUIRE(s.mapper->append_rows(r.request, SlotGeneration{1}, r.target_tokens).ok());
      REQUIRE(a.mapper->append_rows(r.request, SlotGeneration{1}, r.target_tokens).ok());
    }
    // Step t is published: plan step t+1 and let the background map it while
    // "the forward pass" runs.
    REQUIRE(a.prefetch->prefetch(a.mapper->plan_frontier_mappings(next_decode_step(batch, t_max))).ok());
    check_os_view(*a.mapper, *a.pool, a.prefetch, static_cast<uint8_t>(step), /*published_only=*/true);
    batch = next_decode_step(batch, t_max);
    auto rs = s.mapper->step(batch, MappingPath::synchronous);
    auto ra = a.mapper->step(batch, MappingPath::asynchronous);
    require_same_step(rs, ra);
    require_same_state(*s.mapper, *a.mapper);
    decode_mappings += new_mappings(*rs);
  }
  return decode_mappings;
}

}  // namespace

TEST_CASE("async mapping: steady decode finds every new page already mapped", "[mapper]") {
  const MapperConfig c = async_config(4, 4, 16);
  SyncMapper s(c);
  AsyncMapper a(c, false);
  uint64_t prefill = 0;
  const uint64_t decode = run_steady_decode(s, a, prefill);
  // 16 tokens per page. After 45 steps the requests end at 48, 52, 56 and 60
  // tokens: the first crosses into pages 1 and 2 (2 bundles), the others into
  // pages 1, 2 and 3 (3 each): 11 bundles of 4 tensors.
  CHECK(prefill == 4 * 4);
  CHECK(decode == 11 * 4);
  const PrefetchStats st = a.prefetch->stats();
  CHECK(st.hits == decode);              // every decode page was mapped ahead ...
  CHECK(st.foreground_maps == prefill);  // ... so only the prefill mapped on the owner thread
  CHECK(st.background_maps == decode);
  CHECK(st.background_failures == 0);
  CHECK(st.foreground_revokes == 0);
  a.prefetch->settle();
  check_os_view(*s.mapper, *s.pool, nullptr, 0xA1);
  check_os_view(*a.mapper, *a.pool, a.prefetch, 0xA1);
}

TEST_CASE("async mapping: a refused background map changes timing only", "[mapper]") {
  const MapperConfig c = async_config(4, 4, 16);
  SyncMapper s(c);
  AsyncMapper a(c, /*flaky_background=*/true);
  uint64_t prefill = 0;
  const uint64_t decode = run_steady_decode(s, a, prefill);  // same receipts, ledgers, digests
  const PrefetchStats st = a.prefetch->stats();
  // Every second background map is refused and re-reserved (PROT_NONE); the
  // owner maps those pages itself when the step asks for them.
  CHECK(st.background_failures == decode / 2);
  CHECK(st.hits == decode - decode / 2);
  CHECK(st.foreground_maps == prefill + decode / 2);
  a.prefetch->settle();
  check_os_view(*a.mapper, *a.pool, a.prefetch, 0xB2);
}

TEST_CASE("async mapping: a stale prefetch is revoked before its handle shows elsewhere", "[mapper]") {
  const MapperConfig c = async_config(2, 4, 8);  // 16 tokens per page
  SyncMapper s(c);
  AsyncMapper a(c, false);
  for (VmmMapper* m : {s.mapper.get(), a.mapper.get()}) {
    REQUIRE(m->alloc_reqid(req('X'), gen1(), 0).ok());
    REQUIRE(m->alloc_reqid(req('Y'), gen1(), 0).ok());
  }
  const std::vector<StepRequest> both{{req('X'), 16}, {req('Y'), 16}};
  require_same_step(s.mapper->step(both, MappingPath::synchronous), a.mapper->step(both, MappingPath::asynchronous));
  // Predicted: X and Y both cross into page 1; X's page 1 would take handles
  // 8-11 and Y's 12-15.
  const auto plan = a.mapper->plan_frontier_mappings(next_decode_step(both, c.max_tokens));
  REQUIRE(plan.size() == 8);
  CHECK(plan[0].pool_offset / c.page_group_bytes == 8);
  CHECK(plan[0].va_offset == a.mapper->geometry().page_offset(0, 0, 1));
  CHECK(plan[4].pool_offset / c.page_group_bytes == 12);
  REQUIRE(a.prefetch->prefetch(plan).ok());
  a.prefetch->settle();
  CHECK(a.prefetch->prefetched().size() == 8);
  check_os_view(*a.mapper, *a.pool, a.prefetch, 0xC3);

  // Only Y steps: the core gives Y's page 1 handles 8-11, which were
  // prefetched behind X's page 1. Those four are unmapped there first.
  const std::vector<StepRequest> only_y{{req('Y'), 17}};
  auto rs = s.mapper->step(only_y, MappingPath::synchronous);
  auto ra = a.mapper->step(only_y, MappingPath::asynchronous);
  require_same_step(rs, ra);
  require_same_state(*s.mapper, *a.mapper);
  CHECK(ra->receipts.at(0).new_mappings.at(0).handle.value == 8);
  const PrefetchStats st = a.prefetch->stats();
  CHECK(st.hits == 0);
  CHECK(st.foreground_revokes == 4);
  CHECK(st.foreground_maps == 8 + 4);       // the first step's two bundles, then Y's page 1
  CHECK(a.prefetch->prefetched().empty());  // 12-15 were replaced by MAP_FIXED
  check_os_view(*a.mapper, *a.pool, a.prefetch, 0xC4);
  CHECK_FALSE(readable(a.mapper->reservation_base() + a.mapper->geometry().page_offset(0, 0, 1)));
}

TEST_CASE("async mapping: malformed plans are rejected before anything is submitted", "[mapper]") {
  PrefetchingBacking unready(std::make_unique<MemfdBacking>());
  CHECK(code_of(unready.prefetch({})) == ErrorCode::invalid_argument);  // not created yet

  const MapperConfig c = async_config(2, 4, 8);
  AsyncMapper a(c, false);
  const uint64_t g = c.page_group_bytes;
  CHECK(code_of(a.prefetch->prefetch({{0, 0, g}, {0, g, g}})) == ErrorCode::invalid_argument);  // one address twice
  CHECK(code_of(a.prefetch->prefetch({{0, 0, g}, {g, 0, g}})) == ErrorCode::invalid_argument);  // one handle twice
  CHECK(code_of(a.prefetch->prefetch({{0, 0, 0}})) == ErrorCode::invalid_argument);             // empty
  CHECK(a.prefetch->stats().planned == 0);
  a.prefetch->settle();
  CHECK(a.prefetch->prefetched().empty());
}

TEST_CASE("mapper digest is maintained incrementally and moves with every transition", "[mapper]") {
  auto m = make_fixture_mapper();
  std::vector<StateDigest> seen{m->state_digest()};
  auto moved = [&](const char* what) {
    INFO(what);
    CHECK(m->state_digest() == m->recompute_digest());
    for (const StateDigest& d : seen) CHECK(m->state_digest() != d);
    seen.push_back(m->state_digest());
  };
  auto a = m->alloc_reqid(req('A'), gen1(), 8).value();
  moved("alloc");
  REQUIRE(m->step({{req('A'), 6}}, MappingPath::synchronous).ok());
  moved("step maps two bundles");
  REQUIRE(m->step({{req('A'), 7}}, MappingPath::synchronous).ok());
  moved("step moves the frontier only");
  REQUIRE(m->append_rows(req('A'), a.generation, 5).ok());
  moved("append");
  REQUIRE(m->free_reqid(req('A'), a.generation, ReleaseMode::unmap_now).ok());
  moved("free, unmap now");
  REQUIRE(m->shutdown().ok());
  moved("shutdown");
  // A digest is a function of the state, not of the path: a fresh mapper
  // taken through the same transitions arrives at the same value.
  auto twin = make_fixture_mapper();
  auto ta = twin->alloc_reqid(req('A'), gen1(), 8).value();
  REQUIRE(twin->step({{req('A'), 7}}, MappingPath::asynchronous).ok());
  REQUIRE(twin->append_rows(req('A'), ta.generation, 5).ok());
  REQUIRE(twin->free_reqid(req('A'), ta.generation, ReleaseMode::unmap_now).ok());
  REQUIRE(twin->shutdown().ok());
  CHECK(twin->state_digest() == m->state_digest());
}

namespace kvrt {

TEST_CASE("async mapping worker: a polling thread takes every batch without a wake-up, in order", "[mapper]") {
  // The thread polls far longer than this test runs, so it never parks
  // between batches: no submit may need the system call (deterministic, not
  // a timing bound). Results come back in job order.
  LedgerOnlyBacking backing;
  AsyncMappingOptions options;
  options.spin_ns = 60'000'000'000ull;
  const auto started = std::chrono::steady_clock::now();
  {
    AsyncMappingWorker worker(backing, options);
    for (uint32_t b = 0; b < 50; ++b) {
      std::vector<MappingJob> jobs;
      for (uint32_t j = 0; j <= b % 5; ++j)
        jobs.push_back(MappingJob{j % 2 == 0 ? MappingJob::Kind::map : MappingJob::Kind::unmap,
                                  PlannedMapping{uint64_t{b} * 4096 + j, uint64_t{j} * 4096, 4096}});
      const std::vector<MappingJob> sent = jobs;
      worker.submit(std::move(jobs));
      const std::vector<MappingJobResult> results = worker.await();
      REQUIRE(results.size() == sent.size());
      for (size_t i = 0; i < sent.size(); ++i) {
        CHECK(results[i].ok);
        CHECK(results[i].job.mapping.va_offset == sent[i].mapping.va_offset);
        CHECK(results[i].job.kind == sent[i].kind);
      }
    }
    CHECK(worker.batches() == 50);
    CHECK(worker.wakeups() == 0);
  }  // the destructor ends the poll at once instead of waiting it out
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
}

TEST_CASE("async mapping worker: a parking thread is woken for every batch", "[mapper]") {
  LedgerOnlyBacking backing;
  AsyncMappingWorker worker(backing);  // spin_ns = 0: parks at once
  for (uint32_t b = 0; b < 20; ++b) {
    // Give the thread time to park after the previous batch; a wake-up is
    // then needed. (If it has not parked yet, the count is lower: bounded below.)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    worker.submit({MappingJob{MappingJob::Kind::map, PlannedMapping{uint64_t{b} * 4096, 0, 4096}}});
    REQUIRE(worker.await().size() == 1);
  }
  CHECK(worker.batches() == 20);
  CHECK(worker.wakeups() <= 20);
  CHECK(worker.wakeups() > 0);
}

}  // namespace kvrt
