// [mapper][node] The mapper owner as the node serves it
// (services/mapper/mapper_service.hpp): batches answered in order with one outcome each,
// sessions confined to their own slots with the state digest unchanged by a
// refusal, a dead session's slots freed, and the page offer a worker maps
// showing the node's bytes at the node's offsets.
#include "services/mapper/mapper_service.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "services/mapper/memfd_backing.hpp"

namespace kvrt::test {
namespace {

// L = 2, B = 3, T_max = 512, H_kv 2, d_h 8, fp16: 32-byte rows, G = one OS
// page (128 tokens per page on 4 KiB pages), 12 bundles of 2L = 4 handles.
MapperConfig service_config() {
  MapperConfig c;
  c.local_layers = 2;
  c.request_slots = 3;
  c.max_tokens = 512;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.element_bytes = 2;
  c.page_group_bytes = MemfdBacking::os_page_bytes();
  c.handle_count = 48;
  return c;
}

std::unique_ptr<MapperService> make_service() {
  auto s = MapperService::create(service_config(), PoolGeneration{1});
  REQUIRE(s.ok());
  return std::move(s).value();
}

template <class T>
const T& outcome_as(const MapperOutcome& o) {
  if (const auto* e = std::get_if<Error>(&o)) FAIL(e->describe());
  REQUIRE(std::holds_alternative<T>(o));
  return std::get<T>(o);
}

ErrorCode error_of(const MapperOutcome& o) {
  const auto* e = std::get_if<Error>(&o);
  return e == nullptr ? ErrorCode::ok : e->code;
}

}  // namespace

TEST_CASE("mapper service: a batch answers every operation in order, failures alone", "[mapper][node]") {
  auto svc = make_service();
  const SessionId a{1};
  MapperBatch batch;
  batch.trace = TraceContext{7, 8, 0};
  batch.ops = {MapperAllocOp{RequestId{10}, RequestGeneration{1}, 200},
               MapperAllocOp{RequestId{11}, RequestGeneration{1}, 9999},  // above T_max: refused alone
               MapperStepOp{{StepRequest{RequestId{10}, 200}}, MappingPath::synchronous}};
  const MapperBatchReceipt r = svc->apply(a, batch);
  REQUIRE(r.trace == batch.trace);
  REQUIRE(r.outcomes.size() == 3);
  const SlotBinding& bound = outcome_as<SlotBinding>(r.outcomes[0]);
  REQUIRE(error_of(r.outcomes[1]) == ErrorCode::coordinate_out_of_range);
  const StepResult& step = outcome_as<StepResult>(r.outcomes[2]);
  REQUIRE(step.feasibility == MappingFeasibility::ready);
  REQUIRE(step.receipts.size() == 1);
  // 200 tokens at 128 per page: 2 pages of each of the 2L = 4 tensors.
  REQUIRE(step.receipts[0].mapped_pages == 2);
  REQUIRE(step.receipts[0].new_mappings.size() == 8);
  REQUIRE(svc->validate().ok());

  MapperBatch rest;
  rest.ops = {MapperAppendOp{RequestId{10}, bound.generation, 150},
              MapperFreeOp{RequestId{10}, bound.generation, ReleaseMode::unmap_now}};
  const MapperBatchReceipt r2 = svc->apply(a, rest);
  outcome_as<MapperDone>(r2.outcomes[0]);
  outcome_as<MapperDone>(r2.outcomes[1]);
  REQUIRE(svc->core().ledger().mapped_bytes == 0);
  REQUIRE(svc->validate().ok());
}

TEST_CASE("mapper service: a session never touches another's slot, and a refusal changes nothing", "[mapper][node]") {
  auto svc = make_service();
  const SessionId a{1}, b{2};
  const SlotBinding x =
      outcome_as<SlotBinding>(svc->apply_one(a, MapperAllocOp{RequestId{1}, RequestGeneration{1}, 100}));
  outcome_as<StepResult>(svc->apply_one(a, MapperStepOp{{StepRequest{RequestId{1}, 100}}}));
  const StateDigest before = svc->core().state_digest();
  CHECK(error_of(svc->apply_one(b, MapperStepOp{{StepRequest{RequestId{1}, 300}}})) == ErrorCode::not_owner);
  CHECK(error_of(svc->apply_one(b, MapperAppendOp{RequestId{1}, x.generation, 50})) == ErrorCode::not_owner);
  CHECK(error_of(svc->apply_one(b, MapperFreeOp{RequestId{1}, x.generation})) == ErrorCode::not_owner);
  CHECK(error_of(svc->apply_one(b, MapperAllocOp{RequestId{1}, RequestGeneration{2}, 10})) == ErrorCode::not_owner);
  // A step naming one own and one foreign request is refused whole.
  outcome_as<SlotBinding>(svc->apply_one(b, MapperAllocOp{RequestId{2}, RequestGeneration{1}, 10}));
  const StateDigest with_b = svc->core().state_digest();
  CHECK(error_of(svc->apply_one(b, MapperStepOp{{StepRequest{RequestId{2}, 10}, StepRequest{RequestId{1}, 400}}})) ==
        ErrorCode::not_owner);
  CHECK(svc->core().state_digest() == with_b);
  CHECK(before != with_b);  // b's own alloc did change it
  REQUIRE(svc->validate().ok());
}

TEST_CASE("mapper service: ending a session frees its slots as retained capacity", "[mapper][node]") {
  auto svc = make_service();
  const SessionId dead{5}, alive{6};
  for (uint64_t r = 1; r <= 2; ++r) {
    outcome_as<SlotBinding>(svc->apply_one(dead, MapperAllocOp{RequestId{r}, RequestGeneration{1}, 300}));
    outcome_as<StepResult>(svc->apply_one(dead, MapperStepOp{{StepRequest{RequestId{r}, 300}}}));
  }
  outcome_as<SlotBinding>(svc->apply_one(alive, MapperAllocOp{RequestId{3}, RequestGeneration{1}, 10}));
  REQUIRE(svc->end_session(dead) == 2);
  REQUIRE(svc->end_session(dead) == 0);  // idempotent
  const MappingLedger l = svc->core().ledger();
  CHECK(l.active_valid_bytes == 0);
  CHECK(l.inactive_retained_bytes > 0);  // capacity kept, never K/V (0x06E)
  REQUIRE(svc->validate().ok());
  const OwnerStats st = svc->stats();
  auto value = [&](const std::string& name) {
    for (const auto& v : st.values)
      if (v.name == name) return v.value;
    FAIL("no stat " << name);
    return int64_t{0};
  };
  CHECK(value("active_slots") == 1);
  CHECK(value("bound_requests") == 1);
  CHECK(value("sessions_reclaimed") == 1);
  // The survivor's request still works; the dead session's ids are free again.
  outcome_as<StepResult>(svc->apply_one(alive, MapperStepOp{{StepRequest{RequestId{3}, 10}}}));
  outcome_as<SlotBinding>(svc->apply_one(alive, MapperAllocOp{RequestId{1}, RequestGeneration{2}, 10}));
}

TEST_CASE("mapper service: the page offer rebuilds the node's view byte for byte", "[mapper][node]") {
  auto svc = make_service();
  const SessionId a{1};
  std::vector<SlotBinding> bound;
  for (uint64_t r = 1; r <= 3; ++r)
    bound.push_back(outcome_as<SlotBinding>(
        svc->apply_one(a, MapperAllocOp{RequestId{r}, RequestGeneration{1}, static_cast<uint32_t>(100 * r)})));
  outcome_as<StepResult>(svc->apply_one(a, MapperStepOp{{StepRequest{RequestId{1}, 100}, StepRequest{RequestId{2}, 200},
                                                         StepRequest{RequestId{3}, 300}}}));
  // The node writes seeded bytes into every mapped page of its reservation.
  const uint64_t g = svc->geometry().config().page_group_bytes;
  const PagePoolOffer offer = svc->page_offer();
  REQUIRE(offer.pages.size() == 4 * (1 + 2 + 3));  // pages per tensor x 2L tensors
  std::mt19937_64 rng(0x0FFE);
  for (const ViewPage& p : offer.pages)
    for (uint64_t i = 0; i < g; i += 8) {
      const uint64_t word = rng();
      std::memcpy(svc->core().reservation_base() + uint64_t{p.virtual_page} * g + i, &word, 8);
    }
  // A second mapping of the same memfd from the offer alone (what a worker
  // process builds) shows the same bytes at the same offsets.
  auto view = PoolView::map(svc->pool_fd(), offer.identity, offer.view_pages, offer.pages);
  REQUIRE(view.ok());
  REQUIRE(view->bytes() == svc->geometry().virtual_reserved_bytes());
  for (const ViewPage& p : offer.pages)
    REQUIRE(std::memcmp(view->base() + uint64_t{p.virtual_page} * g,
                        svc->core().reservation_base() + uint64_t{p.virtual_page} * g, g) == 0);
}

}  // namespace kvrt::test

namespace kvrt::test {

TEST_CASE("mapper view: a step's pages map in one call beyond the socket message's entry bound", "[mapper][node]") {
  // 64 slots of 4096 tokens: 8192 view pages. A view maps 5000 of them at
  // once (more than kPagePoolMaxEntries, which bounds only the SCM_RIGHTS
  // message), all onto the pool's 48 handles, and each shows its handle.
  MapperConfig c = service_config();
  c.request_slots = 64;
  c.max_tokens = 4096;
  auto svc = MapperService::create(c, PoolGeneration{1});
  REQUIRE(svc.ok());
  const uint64_t g = c.page_group_bytes;
  const PagePoolOffer empty = [&] {
    PagePoolOffer o = (*svc)->page_offer();
    o.pages.clear();
    return o;
  }();
  REQUIRE(empty.view_pages == 8192);
  auto view = PoolView::map((*svc)->pool_fd(), empty.identity, empty.view_pages, {});
  REQUIRE(view.ok());
  std::vector<ViewPage> pages;
  for (uint32_t v = 0; v < 5000; ++v) pages.push_back(ViewPage{v, v % c.handle_count});
  REQUIRE(pages.size() > kPagePoolMaxEntries);
  REQUIRE(view->map_pages((*svc)->pool_fd(), empty.identity, pages).ok());
  // Write through virtual page h (handle h) and read through virtual page
  // h + 48 (the same handle).
  for (uint32_t h = 0; h < c.handle_count; ++h) std::memset(view->base() + uint64_t{h} * g, int(h + 1), 16);
  for (uint32_t h = 0; h < c.handle_count; ++h)
    CHECK(std::to_integer<int>(view->base()[uint64_t{h + 48} * g]) == int(h + 1));
  // A bad entry anywhere refuses the whole table, mapping nothing.
  pages.back().handle = c.handle_count;
  CHECK(view->map_pages((*svc)->pool_fd(), empty.identity, pages).error().field == "handle");
}

}  // namespace kvrt::test

namespace kvrt::test {

// unmap_now refused by the OS part-way (the "os_unmap" fault point): the
// core freed the slot first, so the free answers os_mapping_failed, the pages
// it could not unmap stay as retained capacity, and the request is no longer
// the session's: a later binding of the same id by another session is not
// refused as not_owner, and validate() holds.
TEST_CASE("mapper service: a free whose unmap the OS refuses leaves the request unbound", "[mapper][node]") {
  auto svc = make_service();
  const SessionId a{1}, b{2};
  const SlotBinding x =
      outcome_as<SlotBinding>(svc->apply_one(a, MapperAllocOp{RequestId{7}, RequestGeneration{1}, 300}));
  outcome_as<StepResult>(svc->apply_one(a, MapperStepOp{{StepRequest{RequestId{7}, 300}}}));
  svc->faults().arm("os_unmap", 2);  // the second unmap of the free
  CHECK(error_of(svc->apply_one(a, MapperFreeOp{RequestId{7}, x.generation, ReleaseMode::unmap_now})) ==
        ErrorCode::os_mapping_failed);
  REQUIRE(svc->validate().ok());
  CHECK(svc->core().ledger().inactive_retained_bytes > 0);  // what stayed mapped is capacity
  const OwnerStats stats = svc->stats();
  for (const StatValue& v : stats.values)
    if (v.name == "bound_requests") CHECK(v.value == 0);
  // Unbound: any session may bind the id again.
  outcome_as<SlotBinding>(svc->apply_one(b, MapperAllocOp{RequestId{7}, RequestGeneration{2}, 10}));
  REQUIRE(svc->validate().ok());
}

}  // namespace kvrt::test
