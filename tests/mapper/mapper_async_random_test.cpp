// Randomised differential test of asynchronous mapping (spec 0x06D: the
// background thread "changes timing, not the dependency"). One seeded stream
// of alloc / step / append / free drives a synchronous mapper and an
// asynchronous one (PrefetchingBacking over a real memfd pool); after every
// step the asynchronous side prefetches its plan for a prediction that is
// mostly the exact decode step, sometimes wrong, sometimes skipped. Checked
// after every operation: the same result or error code, receipts equal but
// for mapping_path, equal ledgers, digests and epochs, validate() on both,
// and the OS view of the reservations: every fourth operation, after the
// background batch settled, every page of the asynchronous one (core pages
// show their handle, prefetched pages their planned one, the rest PROT_NONE;
// the synchronous one every eighth); every odd operation the core's pages
// only, while a background batch may still be mapping others.
#include <sched.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "tests/mapper/mapper_async_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct LiveRequest {
  SlotGeneration generation;
  uint32_t valid = 0;   // rows written [tokens]
  uint32_t target = 0;  // last stepped frontier [tokens]
};

template <class T>
bool same_outcome(const Result<T>& a, const Result<T>& b) {
  return code_of(a) == code_of(b);
}

// Half of the targets land exactly on a page edge, so that the decode
// prediction that follows crosses into a new page (something to prefetch).
uint32_t random_target(std::mt19937& rng, uint32_t valid, uint32_t max_tokens, uint32_t tokens_per_page) {
  const uint32_t any = std::uniform_int_distribution<uint32_t>(valid, max_tokens)(rng);
  const uint32_t edge = (any / tokens_per_page) * tokens_per_page;
  return (rng() % 2 == 0 && edge >= valid) ? edge : any;
}

std::vector<StepRequest> random_batch(std::mt19937& rng, const std::map<uint64_t, LiveRequest>& live,
                                      uint32_t max_tokens, uint32_t tokens_per_page, uint64_t next_id) {
  std::vector<StepRequest> batch;
  for (const auto& [id, r] : live)
    if (rng() % 3 != 0) batch.push_back({RequestId{id}, random_target(rng, r.valid, max_tokens, tokens_per_page)});
  std::shuffle(batch.begin(), batch.end(), rng);
  switch (rng() % 16) {  // now and then a step the core must reject as a whole
    case 0:
      batch.push_back({RequestId{next_id + 7}, 1});
      break;  // unknown request
    case 1:
      if (!batch.empty()) batch.push_back(batch.front());
      break;  // duplicate
    case 2:
      if (!batch.empty()) batch.back().target_tokens = max_tokens + 1;
      break;
    default:
      break;
  }
  return batch;
}

PrefetchStats run_seed(uint32_t seed, const MapperConfig& c, bool flaky, AsyncMappingOptions thread = {}) {
  INFO("seed " << seed << (flaky ? " (flaky background)" : "") << (thread.spin_ns > 0 ? " (polling thread)" : ""));
  SyncMapper s(c);
  AsyncMapper a(c, flaky, thread);
  std::mt19937 rng(seed);
  std::map<uint64_t, LiveRequest> live;
  std::vector<StepRequest> last_batch;  // the last step both published
  uint64_t next_id = 1;
  uint64_t steps_ready = 0;
  for (int op = 0; op < 240; ++op) {
    INFO("operation " << op);
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind < 2) {
      const uint32_t expected = std::uniform_int_distribution<uint32_t>(0, c.max_tokens)(rng);
      auto bs = s.mapper->alloc_reqid(RequestId{next_id}, gen1(), expected);
      auto ba = a.mapper->alloc_reqid(RequestId{next_id}, gen1(), expected);
      REQUIRE(same_outcome(bs, ba));
      if (bs.ok()) {
        CHECK(bs->slot == ba->slot);
        CHECK(bs->generation == ba->generation);
        CHECK(bs->retained_pages == ba->retained_pages);
        CHECK(bs->retained_mapping_reused == ba->retained_mapping_reused);
        live[next_id] = LiveRequest{bs->generation};
      }
      ++next_id;
    } else if (kind < 6 && !live.empty()) {
      std::vector<StepRequest> batch;
      if (!last_batch.empty() && rng() % 3 != 0) {
        batch = next_decode_step(last_batch, c.max_tokens);  // what was predicted
      } else {
        batch = random_batch(rng, live, c.max_tokens, s.mapper->geometry().tokens_per_page(), next_id);
      }
      auto rs = s.mapper->step(batch, MappingPath::synchronous);
      auto ra = a.mapper->step(batch, MappingPath::asynchronous);
      REQUIRE(same_outcome(rs, ra));
      if (rs.ok()) {
        require_same_step(rs, ra);
        if (rs->feasibility == MappingFeasibility::ready) {
          ++steps_ready;
          last_batch = batch;
          for (const StepRequest& r : batch) live[r.request.value].target = r.target_tokens;
          // Step t is published: prepare step t+1 (0x06D). Mostly the exact
          // decode prediction; sometimes a wrong one; sometimes none.
          const uint32_t dice = rng() % 8;
          std::vector<StepRequest> predicted = next_decode_step(batch, c.max_tokens);
          if (dice == 0)
            predicted = random_batch(rng, live, c.max_tokens, s.mapper->geometry().tokens_per_page(), next_id);
          if (dice != 1) REQUIRE(a.prefetch->prefetch(a.mapper->plan_frontier_mappings(predicted)).ok());
        }
      }
    } else if (kind < 8 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      const uint32_t rows = std::uniform_int_distribution<uint32_t>(it->second.valid, it->second.target + 1)(rng);
      const Status ss = s.mapper->append_rows(RequestId{it->first}, it->second.generation, rows);
      const Status sa = a.mapper->append_rows(RequestId{it->first}, it->second.generation, rows);
      REQUIRE(code_of(ss) == code_of(sa));
      if (ss.ok()) it->second.valid = rows;
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      const ReleaseMode mode = (rng() % 2) ? ReleaseMode::retain : ReleaseMode::unmap_now;
      const Status ss = s.mapper->free_reqid(RequestId{it->first}, it->second.generation, mode);
      const Status sa = a.mapper->free_reqid(RequestId{it->first}, it->second.generation, mode);
      REQUIRE(ss.ok());
      REQUIRE(sa.ok());
      std::erase_if(last_batch, [&](const StepRequest& r) { return r.request.value == it->first; });
      live.erase(it);
    }
    require_same_state(*s.mapper, *a.mapper);
    const auto marker = static_cast<uint8_t>(op);
    if (op % 8 == 0) check_os_view(*s.mapper, *s.pool, nullptr, marker);  // the synchronous path's own view
    if (op % 4 == 0) {
      a.prefetch->settle();
      check_os_view(*a.mapper, *a.pool, a.prefetch, marker);
    } else if (op % 2 == 1) {  // a background batch may be mapping other pages right now
      check_os_view(*a.mapper, *a.pool, a.prefetch, marker, /*published_only=*/true);
    }
  }
  CHECK(steps_ready > 20);  // the stream really exercised the prefetch path
  for (const auto& [id, r] : live) {
    REQUIRE(s.mapper->free_reqid(RequestId{id}, r.generation, ReleaseMode::retain).ok());
    REQUIRE(a.mapper->free_reqid(RequestId{id}, r.generation, ReleaseMode::retain).ok());
  }
  REQUIRE(s.mapper->shutdown().ok());
  REQUIRE(a.mapper->shutdown().ok());
  require_same_state(*s.mapper, *a.mapper);
  return a.prefetch->stats();
}

// Every path of the prefetch was taken somewhere in the seeds of one run:
// right predictions (hits), pages revoked in the background and by the owner
// (wrong predictions), and, with the flaky backing, refused maps.
void check_coverage(const std::vector<PrefetchStats>& runs, bool flaky) {
  PrefetchStats sum;
  for (const PrefetchStats& s : runs) {
    sum.hits += s.hits;
    sum.background_unmaps += s.background_unmaps;
    sum.foreground_revokes += s.foreground_revokes;
    sum.background_failures += s.background_failures;
  }
  INFO("hits " << sum.hits << ", background unmaps " << sum.background_unmaps << ", foreground revokes "
               << sum.foreground_revokes << ", background failures " << sum.background_failures);
  CHECK(sum.hits >= 20);
  CHECK(sum.background_unmaps > 0);
  CHECK(sum.foreground_revokes > 0);
  CHECK((sum.background_failures > 0) == flaky);
}

}  // namespace

TEST_CASE("async mapping: randomised differential against the synchronous path", "[mapper]") {
  // 4 slots of 4 pages, 10 bundles: pressure, so steps reclaim retained pages
  // (never prefetched) and some steps are infeasible.
  const MapperConfig pressured = async_config(4, 4, 10);
  std::vector<PrefetchStats> runs;
  for (uint32_t seed = 1; seed <= 10; ++seed) runs.push_back(run_seed(seed, pressured, false));
  check_coverage(runs, false);
  // Enough bundles for every slot: long runs of correctly predicted decode.
  const MapperConfig roomy = async_config(3, 6, 18);
  runs.clear();
  for (uint32_t seed = 50; seed < 55; ++seed) runs.push_back(run_seed(seed, roomy, false));
  check_coverage(runs, false);
  // Half of the background maps refused: still the synchronous results.
  runs.clear();
  for (uint32_t seed = 90; seed < 94; ++seed) runs.push_back(run_seed(seed, pressured, true));
  check_coverage(runs, true);
  // A thread that polls for its next batch (and, where the process may use
  // a second CPU, runs there): the hand-off without a wake-up must give the
  // synchronous results too, refused maps included.
  AsyncMappingOptions polling;
  polling.spin_ns = 5'000'000;  // far longer than the gap between two operations here
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = CPU_SETSIZE - 1; c >= 0 && polling.cpu < 0; --c)
      if (CPU_ISSET(c, &allowed)) polling.cpu = c;
  runs.clear();
  uint64_t wakeups = 0, batches = 0;
  for (uint32_t seed = 60; seed < 64; ++seed) {
    runs.push_back(run_seed(seed, pressured, seed % 2 == 1, polling));
    wakeups += runs.back().wakeups;
    batches += runs.back().batches;
    CHECK(runs.back().thread_pinned);
  }
  PrefetchStats sum;
  for (const PrefetchStats& s : runs) sum.hits += s.hits;
  CHECK(sum.hits >= 20);
  // How many hand-offs woke a parked thread depends on timing (a slow
  // sanitizer build parks between operations); the count is bounded.
  INFO(wakeups << " wake-ups for " << batches << " batches");
  CHECK(batches > 20);
  CHECK(wakeups <= batches);
}
