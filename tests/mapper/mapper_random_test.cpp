// Seeded randomised alloc / step / append / free sequences on the mapper,
// validate() after every operation, checked against an independent model of
// each request's valid rows and of step feasibility (0x06A ledgers, 0x06D).
#include <map>
#include <random>

#include "tests/mapper/mapper_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct ModelRequest {
  SlotGeneration generation;
  uint32_t valid = 0;   // rows written [tokens]
  uint32_t target = 0;  // last stepped frontier [tokens]
};

void run_seed(uint32_t seed, const MapperConfig& config) {
  INFO("seed " << seed);
  auto made = VmmMapper::init(config, std::make_unique<LedgerOnlyBacking>());
  REQUIRE(made.ok());
  VmmMapper& m = *made.value();
  const MapperGeometry& g = m.geometry();
  std::mt19937 rng(seed);
  std::map<uint64_t, ModelRequest> live;
  uint64_t next_id = 1;
  auto pick = [&]() {
    auto it = live.begin();
    std::advance(it, std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
    return it;
  };
  for (int op = 0; op < 400; ++op) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind < 3) {  // alloc
      const uint32_t expected = std::uniform_int_distribution<uint32_t>(0, config.max_tokens)(rng);
      auto b = m.alloc_reqid(RequestId{next_id}, gen1(), expected);
      if (live.size() == config.request_slots) {
        CHECK(code_of(b) == ErrorCode::slots_exhausted);
      } else {
        REQUIRE(b.ok());
        CHECK(m.slot(b->slot.value).valid_tokens == 0);  // retained or not, no valid rows
        live[next_id] = ModelRequest{b->generation};
      }
      ++next_id;
    } else if (kind < 6 && !live.empty()) {  // step one or two requests
      std::vector<StepRequest> batch;
      uint64_t needed = 0;
      for (int i = 0; i < 2; ++i) {
        auto it = pick();
        bool dup = false;
        for (const StepRequest& r : batch) dup |= r.request.value == it->first;
        if (dup) continue;
        const uint32_t target = std::uniform_int_distribution<uint32_t>(it->second.valid, config.max_tokens)(rng);
        batch.push_back({RequestId{it->first}, target});
      }
      for (const StepRequest& r : batch) {
        for (uint32_t s = 0; s < config.request_slots; ++s) {
          const SlotRecord& rec = m.slot(s);
          if (rec.active && rec.request == r.request) {
            const uint32_t pages = g.pages_for_tokens(r.target_tokens);
            if (pages > rec.pages.size()) needed += pages - rec.pages.size();
          }
        }
      }
      const MappingLedger before = m.ledger();
      const uint64_t available = (before.free_handle_bytes + before.inactive_retained_bytes) / g.bundle_bytes();
      auto r = m.step(batch, op % 2 ? MappingPath::synchronous : MappingPath::asynchronous);
      REQUIRE(r.ok());
      CHECK(r->bundles_needed == needed);
      CHECK(r->bundles_available == available);
      if (needed > available) {
        CHECK(r->feasibility == MappingFeasibility::insufficient_handles);
        CHECK(m.ledger() == before);
      } else {
        REQUIRE(r->feasibility == MappingFeasibility::ready);
        for (size_t i = 0; i < batch.size(); ++i) {
          live[batch[i].request.value].target = batch[i].target_tokens;
          CHECK(covers(r->receipts[i], gen1(), batch[i].target_tokens));
          CHECK(m.verify_receipt(r->receipts[i]).ok());
          CHECK(r->receipts[i].new_mappings.size() % g.tensor_count() == 0);
        }
      }
    } else if (kind < 8 && !live.empty()) {  // append rows up to (or past) the frontier
      auto it = pick();
      const uint32_t rows = std::uniform_int_distribution<uint32_t>(it->second.valid, it->second.target + 1)(rng);
      const Status s = m.append_rows(RequestId{it->first}, it->second.generation, rows);
      if (rows <= it->second.target) {
        REQUIRE(s.ok());
        it->second.valid = rows;
      } else {
        CHECK(code_of(s) == ErrorCode::page_not_mapped);  // map before use
      }
    } else if (!live.empty()) {  // free
      auto it = pick();
      const ReleaseMode mode = (rng() % 2) ? ReleaseMode::retain : ReleaseMode::unmap_now;
      REQUIRE(m.free_reqid(RequestId{it->first}, it->second.generation, mode).ok());
      live.erase(it);
    }
    REQUIRE(m.validate().ok());
    uint64_t valid_bytes = 0;
    for (const auto& [id, r] : live) {
      valid_bytes += uint64_t{r.valid} * g.row_bytes() * g.tensor_count();
      CHECK(m.check_readable(RequestId{id}, r.generation, r.valid).ok());
      if (r.valid < r.target)
        CHECK(code_of(m.check_readable(RequestId{id}, r.generation, r.valid + 1)) == ErrorCode::rows_not_valid);
    }
    CHECK(m.ledger().active_valid_bytes == valid_bytes);
  }
  for (const auto& [id, r] : live) REQUIRE(m.free_reqid(RequestId{id}, r.generation, ReleaseMode::retain).ok());
  REQUIRE(m.shutdown().ok());
  REQUIRE(m.validate().ok());
  CHECK(m.bundle_maps() == m.bundle_unmaps());  // shutdown returned every mapped bundle
}

}  // namespace

TEST_CASE("mapper randomised lifecycle keeps ledgers and state machines valid", "[mapper]") {
  for (uint32_t seed = 1; seed <= 20; ++seed) run_seed(seed, fixture_0x06f_config());
  MapperConfig wide = fixture_0x06f_config();
  wide.local_layers = 3;
  wide.request_slots = 5;
  wide.max_tokens = 40;
  wide.handle_count = 6 * 9;  // 9 bundles for 5 slots of up to 10 pages: pressure
  for (uint32_t seed = 100; seed < 110; ++seed) run_seed(seed, wide);
}
