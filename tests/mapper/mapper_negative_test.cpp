// The 0x06I failure lab: malformed operations rejected by a named reason with
// the mapper's state unchanged. The spec's list of 20 cases was lost; it is
// rebuilt from 0x06A-0x06F (map before use, complete K/V-layer frontiers,
// slot generations, retained capacity != prefix identity, feasibility) and
// from the lifecycle's own preconditions. Each case checks the error code,
// then that digest, ledgers and epoch did not move.
#include "services/mapper/memfd_backing.hpp"
#include "tests/mapper/mapper_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// A on slot 0 wrote 8 rows and was freed with its 2 pages retained; C was
// bound to slot 0 (generation 2, 0 valid rows, reusing those pages); B on
// slot 1 holds 3 valid rows in one page. No handle is free; slot 2 is empty.
struct Scene {
  std::unique_ptr<VmmMapper> m = make_fixture_mapper();
  SlotBinding a, b, c;
  MappedFrontierReceipt b_receipt;
  Scene() {
    a = m->alloc_reqid(req('A'), gen1(), 8).value();
    b = m->alloc_reqid(req('B'), gen1(), 3).value();
    auto s = m->step({{req('A'), 8}, {req('B'), 3}}, MappingPath::synchronous);
    REQUIRE(s.ok());
    b_receipt = s->receipts.at(1);
    REQUIRE(m->append_rows(req('A'), a.generation, 8).ok());
    REQUIRE(m->append_rows(req('B'), b.generation, 3).ok());
    REQUIRE(m->free_reqid(req('A'), a.generation, ReleaseMode::retain).ok());
    c = m->alloc_reqid(req('C'), gen1(), 4).value();
    REQUIRE(c.slot.value == 0);
    REQUIRE(m->validate().ok());
  }
};

struct Snapshot {
  StateDigest digest;
  MappingLedger ledger;
  Epoch epoch;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};
Snapshot snapshot(const VmmMapper& m) { return {m.state_digest(), m.ledger(), m.epoch()}; }

template <class F>
void expect_rejected(Scene& scene, ErrorCode code, F&& op) {
  const Snapshot before = snapshot(*scene.m);
  CHECK(code_of(op(*scene.m)) == code);
  CHECK(snapshot(*scene.m) == before);
  CHECK(scene.m->validate().ok());
}

}  // namespace

TEST_CASE("0x06I: use before map and read before map", "[mapper]") {
  Scene s;
  // 1. B writes row 4 while only rows [0,3) were stepped (page q1 unmapped).
  expect_rejected(s, ErrorCode::page_not_mapped,
                  [&](VmmMapper& m) { return m.append_rows(req('B'), s.b.generation, 5); });
  // 2. Translating B's token 4 hits a reserved but unmapped page.
  expect_rejected(s, ErrorCode::page_not_mapped,
                  [&](VmmMapper& m) { return m.translate(req('B'), s.b.generation, 0, KvTensorKind::key, 4, 0, 0); });
  // 3. C writes rows before any step published its frontier (target 0).
  expect_rejected(s, ErrorCode::page_not_mapped,
                  [&](VmmMapper& m) { return m.append_rows(req('C'), s.c.generation, 1); });
}

TEST_CASE("0x06I: half-mapped frontier and stale or forged receipts", "[mapper]") {
  Scene s;
  // 4. A receipt that shows K0:q0 but lost V1:q0.
  MappedFrontierReceipt half = s.b_receipt;
  half.new_mappings.pop_back();
  expect_rejected(s, ErrorCode::half_mapped_frontier, [&](VmmMapper& m) { return m.verify_receipt(half); });
  // 5. A receipt naming a handle generation the mapper has moved past.
  MappedFrontierReceipt stale = s.b_receipt;
  stale.new_mappings[0].handle_generation = BlockGeneration{stale.new_mappings[0].handle_generation.value + 1};
  expect_rejected(s, ErrorCode::stale_generation, [&](VmmMapper& m) { return m.verify_receipt(stale); });
  // 6. A receipt of another request generation.
  MappedFrontierReceipt other = s.b_receipt;
  other.request_generation = RequestGeneration{9};
  expect_rejected(s, ErrorCode::stale_generation, [&](VmmMapper& m) { return m.verify_receipt(other); });
  // 7. A receipt that claims a frontier it does not back.
  MappedFrontierReceipt beyond = s.b_receipt;
  beyond.target_tokens = 5;
  expect_rejected(s, ErrorCode::page_not_mapped, [&](VmmMapper& m) { return m.verify_receipt(beyond); });
  CHECK(s.m->verify_receipt(s.b_receipt).ok());
}

TEST_CASE("0x06I: stale slot generation and retained mapping as a prefix hit", "[mapper]") {
  Scene s;
  // 8. A's generation 1 of slot 0 was re-bound to C at generation 2.
  expect_rejected(s, ErrorCode::unknown_request,
                  [&](VmmMapper& m) { return m.append_rows(req('A'), s.a.generation, 8); });
  expect_rejected(s, ErrorCode::stale_slot_generation,
                  [&](VmmMapper& m) { return m.append_rows(req('C'), s.a.generation, 0); });
  // 9. C reads A's retained rows as if they were a prefix hit.
  REQUIRE(s.m->step({{req('C'), 4}}, MappingPath::synchronous).ok());
  expect_rejected(s, ErrorCode::rows_not_valid,
                  [&](VmmMapper& m) { return m.check_readable(req('C'), s.c.generation, 4); });
  // 10. A receipt that marks the old K/V as semantically valid.
  auto r = s.m->step({{req('C'), 4}}, MappingPath::synchronous);
  REQUIRE(r.ok());
  MappedFrontierReceipt forged = r->receipts.at(0);
  CHECK(forged.retained_mapping_reused);
  CHECK(s.m->verify_receipt(forged).ok());
  forged.old_kv_semantically_valid = true;
  expect_rejected(s, ErrorCode::rows_not_valid, [&](VmmMapper& m) { return m.verify_receipt(forged); });
  // 11. A receipt claiming more valid rows than C wrote.
  forged.old_kv_semantically_valid = false;
  forged.valid_tokens = 4;
  expect_rejected(s, ErrorCode::rows_not_valid, [&](VmmMapper& m) { return m.verify_receipt(forged); });
}

TEST_CASE("0x06I: malformed step, alloc and free", "[mapper]") {
  Scene s;
  // 12. Beyond T_max.
  expect_rejected(s, ErrorCode::coordinate_out_of_range, [&](VmmMapper& m) {
    return m.step({{req('B'), 13}}, MappingPath::synchronous);
  });
  // 13. Below rows already written.
  expect_rejected(s, ErrorCode::invalid_argument, [&](VmmMapper& m) {
    return m.step({{req('B'), 2}}, MappingPath::synchronous);
  });
  // 14. One request twice.
  expect_rejected(s, ErrorCode::duplicate_axis, [&](VmmMapper& m) {
    return m.step({{req('B'), 3}, {req('B'), 4}}, MappingPath::synchronous);
  });
  // 15. An unbound request (the first entry valid: nothing may be mapped).
  expect_rejected(s, ErrorCode::unknown_request, [&](VmmMapper& m) {
    return m.step({{req('C'), 4}, {req('Z'), 1}}, MappingPath::synchronous);
  });
  // 16. Rows rewinding within one slot generation.
  expect_rejected(s, ErrorCode::invalid_argument,
                  [&](VmmMapper& m) { return m.append_rows(req('B'), s.b.generation, 2); });
  // 17. Binding a request that is already bound.
  expect_rejected(s, ErrorCode::invalid_argument, [&](VmmMapper& m) { return m.alloc_reqid(req('B'), gen1(), 1); });
  // 18. Every slot active.
  REQUIRE(s.m->alloc_reqid(req('F'), gen1(), 0).ok());
  expect_rejected(s, ErrorCode::slots_exhausted, [&](VmmMapper& m) { return m.alloc_reqid(req('G'), gen1(), 0); });
  // 19. Freeing twice; shutting down with active requests.
  REQUIRE(s.m->free_reqid(req('F'), SlotGeneration{1}, ReleaseMode::retain).ok());
  expect_rejected(s, ErrorCode::unknown_request,
                  [&](VmmMapper& m) { return m.free_reqid(req('F'), SlotGeneration{1}, ReleaseMode::retain); });
  expect_rejected(s, ErrorCode::invalid_argument, [&](VmmMapper& m) { return m.shutdown(); });
}

TEST_CASE("0x06D: mapping failure is a physical-feasibility result, state unchanged", "[mapper]") {
  Scene s;
  // Pool exhausted (3 bundles mapped, none retained): B to 12 rows needs 2 more.
  const Snapshot before = snapshot(*s.m);
  auto r = s.m->step({{req('C'), 4}, {req('B'), 12}}, MappingPath::synchronous);
  REQUIRE(r.ok());
  CHECK(r->feasibility == MappingFeasibility::insufficient_handles);
  CHECK(r->bundles_needed == 2);
  CHECK(r->bundles_available == 0);
  CHECK(r->receipts.empty());
  CHECK(snapshot(*s.m) == before);
  CHECK(s.m->validate().ok());
}

TEST_CASE("0x06I: configurations the mapper cannot honour, use after shutdown", "[mapper]") {
  // 20. G not a multiple of the 16 B row; N_handle not whole bundles; a real
  //     backing below the OS page; zero slots.
  MapperConfig c = fixture_0x06f_config();
  c.page_group_bytes = 72;
  auto r1 = VmmMapper::init(c, std::make_unique<LedgerOnlyBacking>());
  REQUIRE(code_of(r1) == ErrorCode::config_field);
  CHECK(r1.error().field == "page_group_bytes");
  c = fixture_0x06f_config();
  c.handle_count = 10;
  auto r2 = VmmMapper::init(c, std::make_unique<LedgerOnlyBacking>());
  REQUIRE(code_of(r2) == ErrorCode::config_field);
  CHECK(r2.error().field == "handle_count");
  c = fixture_0x06f_config();
  auto r3 = VmmMapper::init(c, std::make_unique<MemfdBacking>());
  REQUIRE(code_of(r3) == ErrorCode::config_field);
  CHECK(r3.error().field == "page_group_bytes");
  c.request_slots = 0;
  CHECK(code_of(VmmMapper::init(c, std::make_unique<LedgerOnlyBacking>())) == ErrorCode::config_field);

  auto m = make_fixture_mapper();
  REQUIRE(m->shutdown().ok());
  CHECK(m->validate().ok());
  CHECK(code_of(m->alloc_reqid(req('A'), gen1(), 1)) == ErrorCode::mapper_shut_down);
  CHECK(code_of(m->step({}, MappingPath::synchronous)) == ErrorCode::mapper_shut_down);
  CHECK(code_of(m->shutdown()) == ErrorCode::mapper_shut_down);
}
