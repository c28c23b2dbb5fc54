// The 0x06F checked VMM lifecycle and the 0x06C address, on the teaching
// fixture L=2, B=3, T_max=12, H_kv=2, d_h=4, b=2 B, G=64 B, N_handle=12.
//
// The spec's trace table was lost; it is rebuilt here from the 0x06E/0x06F
// text ("24 operations, five page-bundle maps and five unmaps, two new
// requests benefit from retained mappings, D's growth from eight to nine
// tokens finds no free handles, reclaims B's inactive page bundle, maps it as
// D's page q=2") and from 0x06C ((slot 0, V1, q=2) -> H11). One token across
// the 2L = 4 tensors is 4 * 16 = 64 B; one page bundle is 256 B; pool 768 B.
//
// Rebuilt trace (requests A..E; slot chosen by alloc_reqid's fitting rule):
//   1 init                 2 alloc A->slot0       3 step{A:8} maps q0,q1
//   4 A rows [0,8)         5 alloc E->slot1       6 step{A:8,E:2} maps E q0 (H8-H11)
//   7 E rows [0,2)         8 free E, unmap now    9 alloc B->slot1 gen 2 (empty)
//  10 step{A:8,B:3} maps B q0 (H8-H11 again)     11 B rows [0,3)
//  12 free A, retain      13 alloc C->slot0 gen 2 (retained reuse #1, 0 valid rows)
//  14 step{B:3,C:4} maps nothing                 15 C rows [0,4)
//  16 free B, retain      17 free C, retain      18 alloc D->slot0 gen 3 (reuse #2)
//  19 step{D:8} maps nothing                     20 D rows [0,8)
//  21 step{D:9} async: no free handle, unmap B's q0 bundle, map it as D's q2
//  22 D commits row 8     23 free D, retain      24 shutdown unmaps 3 bundles
// Maps: op 3 (two bundles), 6, 10, 21 = 5; unmaps: op 8, 21, 24 (three) = 5.
// Op 21 records MappingPath::asynchronous. The background mapping thread
// (prefetching_backing.hpp) changes timing only, not this trace: the
// mapper_async_*_test.cpp suites check that against the synchronous path.
// The per-operation ledgers (kTrace below) are derived by hand from 64 B per
// token over 2L tensors and 256 B per bundle: mapped = valid + slack +
// retained and 768 = mapped + free hold on every row.
#include <vector>

#include "schema/codecs.hpp"
#include "tests/mapper/mapper_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct Expected {
  const char* op;
  uint64_t maps, unmaps, mapped, valid, slack, retained, free;
};

// Hand-derived ledger after each of the 24 operations [bytes]; see the header.
const std::vector<Expected> kTrace = {
    {"init", 0, 0, 0, 0, 0, 0, 768},
    {"alloc A", 0, 0, 0, 0, 0, 0, 768},
    {"step A:8", 2, 0, 512, 0, 512, 0, 256},
    {"A rows 8", 2, 0, 512, 512, 0, 0, 256},
    {"alloc E", 2, 0, 512, 512, 0, 0, 256},
    {"step A:8 E:2", 3, 0, 768, 512, 256, 0, 0},
    {"E rows 2", 3, 0, 768, 640, 128, 0, 0},
    {"free E unmap", 3, 1, 512, 512, 0, 0, 256},
    {"alloc B", 3, 1, 512, 512, 0, 0, 256},
    {"step A:8 B:3", 4, 1, 768, 512, 256, 0, 0},
    {"B rows 3", 4, 1, 768, 704, 64, 0, 0},
    {"free A retain", 4, 1, 768, 192, 64, 512, 0},
    {"alloc C reuse", 4, 1, 768, 192, 576, 0, 0},  // C owns slot 0's 512 B as slack, 0 valid rows
    {"step B:3 C:4", 4, 1, 768, 192, 576, 0, 0},
    {"C rows 4", 4, 1, 768, 448, 320, 0, 0},
    {"free B retain", 4, 1, 768, 256, 256, 256, 0},
    {"free C retain", 4, 1, 768, 0, 0, 768, 0},
    {"alloc D reuse", 4, 1, 768, 0, 512, 256, 0},
    {"step D:8", 4, 1, 768, 0, 512, 256, 0},
    {"D rows 8", 4, 1, 768, 512, 0, 256, 0},
    {"step D:9 reclaim", 5, 2, 768, 512, 256, 0, 0},
    {"D rows 9", 5, 2, 768, 576, 192, 0, 0},
    {"free D retain", 5, 2, 768, 0, 0, 768, 0},
    {"shutdown", 5, 5, 0, 0, 0, 0, 0},
};

void check_row(const VmmMapper& m, size_t index) {
  const Expected& e = kTrace.at(index);
  INFO("operation " << index + 1 << ": " << e.op);
  REQUIRE(m.validate().ok());
  const MappingLedger l = m.ledger();
  CHECK(m.bundle_maps() == e.maps);
  CHECK(m.bundle_unmaps() == e.unmaps);
  CHECK(l.mapped_bytes == e.mapped);
  CHECK(l.active_valid_bytes == e.valid);
  CHECK(l.active_slack_bytes == e.slack);
  CHECK(l.inactive_retained_bytes == e.retained);
  CHECK(l.free_handle_bytes == e.free);
  if (m.phase() == MapperPhase::va_reserved) {
    CHECK(l.virtual_reserved_bytes == 2304);  // M_VA never enters the two reconciliations
    CHECK(l.physical_pool_bytes == 768);
  }
}

}  // namespace

TEST_CASE("0x06F fixture geometry: 16 B rows, 4 tokens/page, R=192, M_VA=2304", "[mapper]") {
  auto g = MapperGeometry::make(fixture_0x06f_config());
  REQUIRE(g.ok());
  CHECK(g->row_bytes() == 2 * 4 * 2);
  CHECK(g->tokens_per_page() == 64 / 16);
  CHECK(g->slot_range_bytes() == 192);  // ceil(12*16/64)*64
  CHECK(g->virtual_reserved_bytes() == 2 * 2 * 3 * 192);
  CHECK(g->physical_pool_bytes() == 12 * 64);
  CHECK(g->bundle_bytes() == 2 * 2 * 64);
  CHECK(g->pages_for_tokens(8) == 2);
  CHECK(g->pages_for_tokens(9) == 3);
}

TEST_CASE("0x06F 24-operation trace: 5 maps, 5 unmaps, retained reuse, D reclaims B", "[mapper]") {
  auto m = make_fixture_mapper();
  size_t op = 0;
  check_row(*m, op++);  // 1 init

  auto a = m->alloc_reqid(req('A'), gen1(), 8);  // 2
  REQUIRE(a.ok());
  CHECK(a->slot.value == 0);
  CHECK(a->generation.value == 1);
  check_row(*m, op++);
  auto s3 = m->step({{req('A'), 8}}, MappingPath::synchronous);  // 3
  REQUIRE(s3.ok());
  REQUIRE(s3->feasibility == MappingFeasibility::ready);
  CHECK(s3->receipts.at(0).new_mappings.size() == 2 * 4);  // two pages x 2L tensors, one receipt
  CHECK(m->verify_receipt(s3->receipts.at(0)).ok());
  check_row(*m, op++);
  REQUIRE(m->append_rows(req('A'), a->generation, 8).ok());  // 4
  check_row(*m, op++);

  auto e = m->alloc_reqid(req('E'), gen1(), 2);  // 5
  REQUIRE(e.ok());
  CHECK(e->slot.value == 1);
  check_row(*m, op++);
  auto s6 = m->step({{req('A'), 8}, {req('E'), 2}}, MappingPath::synchronous);  // 6
  REQUIRE(s6.ok());
  CHECK(s6->receipts.at(0).new_mappings.empty());
  CHECK(s6->receipts.at(1).new_mappings.at(0).handle.value == 8);
  check_row(*m, op++);
  REQUIRE(m->append_rows(req('E'), e->generation, 2).ok());  // 7
  check_row(*m, op++);
  REQUIRE(m->free_reqid(req('E'), e->generation, ReleaseMode::unmap_now).ok());  // 8
  check_row(*m, op++);

  auto b = m->alloc_reqid(req('B'), gen1(), 3);  // 9
  REQUIRE(b.ok());
  CHECK(b->slot.value == 1);
  CHECK(b->generation.value == 2);
  CHECK_FALSE(b->retained_mapping_reused);  // E unmapped now: nothing retained
  check_row(*m, op++);
  REQUIRE(m->step({{req('A'), 8}, {req('B'), 3}}, MappingPath::synchronous).ok());  // 10
  check_row(*m, op++);
  REQUIRE(m->append_rows(req('B'), b->generation, 3).ok());  // 11
  check_row(*m, op++);
  REQUIRE(m->free_reqid(req('A'), a->generation, ReleaseMode::retain).ok());  // 12
  check_row(*m, op++);

  auto c = m->alloc_reqid(req('C'), gen1(), 4);  // 13: 0x06E C@2 receives slot 0
  REQUIRE(c.ok());
  CHECK(c->slot.value == 0);
  CHECK(c->generation.value == 2);
  CHECK(c->retained_mapping_reused);
  CHECK(c->retained_pages == 2);
  CHECK(m->slot(0).valid_tokens == 0);  // capacity reused, K/V not
  check_row(*m, op++);
  auto s14 = m->step({{req('B'), 3}, {req('C'), 4}}, MappingPath::synchronous);  // 14: no new mapping
  REQUIRE(s14.ok());
  CHECK(s14->receipts.at(1).new_mappings.empty());
  CHECK(s14->receipts.at(1).retained_mapping_reused);
  CHECK_FALSE(s14->receipts.at(1).old_kv_semantically_valid);
  check_row(*m, op++);
  REQUIRE(m->append_rows(req('C'), c->generation, 4).ok());  // 15
  check_row(*m, op++);
  REQUIRE(m->free_reqid(req('B'), b->generation, ReleaseMode::retain).ok());  // 16
  check_row(*m, op++);
  REQUIRE(m->free_reqid(req('C'), c->generation, ReleaseMode::retain).ok());  // 17
  check_row(*m, op++);

  auto d = m->alloc_reqid(req('D'), gen1(), 8);  // 18: prefers slot 0 (2 retained pages cover 8)
  REQUIRE(d.ok());
  CHECK(d->slot.value == 0);
  CHECK(d->generation.value == 3);
  CHECK(d->retained_mapping_reused);
  check_row(*m, op++);
  REQUIRE(m->step({{req('D'), 8}}, MappingPath::synchronous).ok());  // 19
  check_row(*m, op++);
  REQUIRE(m->append_rows(req('D'), d->generation, 8).ok());  // 20
  check_row(*m, op++);
  // Before the growth step, row 8 lies beyond the frontier: map before use.
  CHECK(code_of(m->append_rows(req('D'), d->generation, 9)) == ErrorCode::page_not_mapped);

  auto s21 = m->step({{req('D'), 9}}, MappingPath::asynchronous);  // 21
  REQUIRE(s21.ok());
  REQUIRE(s21->feasibility == MappingFeasibility::ready);
  const MappedFrontierReceipt& grow = s21->receipts.at(0);
  REQUIRE(grow.reclaimed_bundles.size() == 1);
  CHECK(grow.reclaimed_bundles[0].from_slot.value == 1);             // B's slot
  CHECK(grow.reclaimed_bundles[0].from_slot_generation.value == 2);  // B's generation
  CHECK(grow.reclaimed_bundles[0].from_page_index == 0);
  CHECK(grow.reclaimed_bundles[0].to_page_index == 2);
  CHECK(grow.new_mappings.size() == 4);
  CHECK(grow.mapping_path == MappingPath::asynchronous);
  CHECK(covers(grow, RequestGeneration{1}, 9));
  CHECK(m->verify_receipt(grow).ok());
  // The published receipt survives the wire unchanged (schema/codec.hpp).
  const std::vector<uint8_t> wire = codec::encode(grow);
  auto decoded = codec::decode<MappedFrontierReceipt>(wire);
  REQUIRE(decoded.ok());
  CHECK(decoded.value() == grow);
  check_row(*m, op++);

  // 0x06C: D@3 / V1 / (t=8, h=1, d=3), checked right after the q=2 mapping.
  auto loc = m->translate(req('D'), d->generation, 1, KvTensorKind::value, 8, 1, 3);
  REQUIRE(loc.ok());
  CHECK(loc->address.offset_in_slot == 8 * 16 + 1 * 4 * 2 + 3 * 2);  // u = 142
  CHECK(loc->address.offset_in_slot == 142);
  CHECK(loc->address.page_index == 2);
  CHECK(loc->address.offset_in_page == 14);
  CHECK(loc->address.reservation_offset == 3 * (3 * 192) + 0 * 192 + 142);  // 1870
  CHECK(loc->address.reservation_offset == 1870);
  CHECK(loc->handle.value == 11);           // (slot 0, V1, q=2) -> H11
  CHECK(loc->pool_offset == 11 * 64 + 14);  // H11 + 14 B

  REQUIRE(m->append_rows(req('D'), d->generation, 9).ok());  // 22: only now row 8 commits
  check_row(*m, op++);
  REQUIRE(m->free_reqid(req('D'), d->generation, ReleaseMode::retain).ok());  // 23
  check_row(*m, op++);
  REQUIRE(m->shutdown().ok());  // 24
  check_row(*m, op++);
  CHECK(op == 24);
  CHECK(m->handle(11).state == HandleState::released);
}

TEST_CASE("0x06C address arithmetic without a mapper", "[mapper]") {
  auto g = MapperGeometry::make(fixture_0x06f_config());
  REQUIRE(g.ok());
  auto a = g->locate(1, KvTensorKind::value, 0, 8, 1, 3);
  REQUIRE(a.ok());
  CHECK(a->tensor_index == 3);
  CHECK(a->offset_in_slot == 142);
  CHECK(a->page_index == 2);
  CHECK(a->offset_in_page == 14);
  CHECK(a->reservation_offset == 1870);
  CHECK(code_of(g->locate(1, KvTensorKind::value, 0, 12, 0, 0)) == ErrorCode::coordinate_out_of_range);
}
