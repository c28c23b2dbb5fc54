// [node][mapper] The reference model's cache over a worker's view of the
// node's mapper pool (engine/virtual_model_kv_cache.hpp): every element the
// model addresses through the cache's paged views lands at the address
// 0x06C's formula gives (MapperGeometry::locate, derived independently of
// the views), canonical rows read back what was written there, and
// layouts or geometries that cannot tile into blocks are refused.
#include <random>

#include "engine/virtual_model_kv_cache.hpp"
#include "services/identity/layout_loader.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

CacheLayoutManifest layout_file(const std::string& name) {
  Result<CacheLayoutManifest> l = load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/" + name);
  REQUIRE(l.ok());
  return *l;
}

}  // namespace

TEST_CASE("virtual model cache: the views address 0x06C's bytes, and rows read back", "[node][mapper]") {
  ScratchDir dir("node-virtual-cache");
  InProcessNode n(dir, "tests/data/node/node-virtual-test.toml");
  REQUIRE(n.descriptor.mapper.has_value());
  Result<MapperPoolView> view = MapperPoolView::attach(*n.descriptor.mapper);
  REQUIRE(view.ok());
  const CacheLayoutManifest layout = layout_file("small-virtual.toml");
  auto cache = VirtualModelKvCache::create(layout, *view);
  INFO((cache.ok() ? std::string("ok") : cache.error().describe()));
  REQUIRE(cache.ok());
  VirtualModelKvCache& c = **cache;
  // T_max 128 rows in blocks of P_a = 16: 8 blocks per slot, 4 slots.
  CHECK(c.blocks_per_slot() == 8);
  CHECK(c.slot_count() == 32);
  const model::SequenceBlocks b2 = c.blocks_of(2);
  REQUIRE(b2.slots.size() == 1);
  CHECK(b2.slots[0] == std::vector<uint32_t>{16, 17, 18, 19, 20, 21, 22, 23});

  // Map slot 2 fully for a request, then write through the cache's views.
  auto client = n.connect("worker-0");
  Result<MapperBatchReceipt> r = client->call(MapperBatch{
      {}, {MapperAllocOp{RequestId{9}, RequestGeneration{1}, 128}, MapperStepOp{{StepRequest{RequestId{9}, 128}}}}});
  REQUIRE(r.ok());
  const auto& bound = std::get<SlotBinding>(r->outcomes.at(0));
  REQUIRE(view->apply(std::get<StepResult>(r->outcomes.at(1))).ok());
  const uint32_t slot = bound.slot.value;
  const MapperGeometry& geo = view->geometry();
  std::mt19937 rng(0x5107);
  for (int i = 0; i < 200; ++i) {
    const uint32_t layer = rng() % 4, token = rng() % 128, head = rng() % 2, lane = rng() % 16;
    const KvTensorKind kind = rng() % 2 == 0 ? KvTensorKind::key : KvTensorKind::value;
    INFO("layer " << layer << " token " << token << " head " << head << " lane " << lane);
    const executor::PagedKvView& v = c.layer_view(layer);
    const executor::KvTensorView& t = kind == KvTensorKind::key ? v.k : v.v;
    const uint32_t block = c.blocks_of(slot).slots[0][token / 16];
    const std::byte* through_cache = t.row(block, token % 16, head) + uint64_t{lane} * t.lane_stride * 2;
    Result<KvScalarAddress> where = geo.locate(layer, kind, slot, token, head, lane);
    REQUIRE(where.ok());
    CHECK(through_cache == view->base() + where->reservation_offset);
  }
  // A canonical row reads back what was written at its elements.
  const uint32_t token = 77, block = c.blocks_of(slot).slots[0][token / 16];
  for (uint32_t layer = 0; layer < 4; ++layer) {
    std::byte* k = c.writable_k(layer) + (c.layer_view(layer).k.row(block, token % 16, 0) - c.layer_view(layer).k.base);
    for (uint32_t x = 0; x < 2 * 16 * 2; ++x) k[x] = std::byte(layer * 64 + x);
  }
  std::vector<uint8_t> row(layout.cache_groups[0].row_bytes());
  REQUIRE(c.read_canonical_row(0, block, token % 16, row).ok());
  for (uint32_t layer = 0; layer < 4; ++layer)
    for (uint32_t x = 0; x < 64; ++x) CHECK(row[layer * 64 + x] == uint8_t(layer * 64 + x));
  CHECK(c.read_canonical_row(1, block, 0, row).error().code == ErrorCode::unknown_group);
  CHECK(c.read_canonical_row(0, 32, 0, row).error().field == "slot");
  CHECK(c.read_canonical_row(0, 0, 16, row).error().field == "row");
}

TEST_CASE("virtual model cache: layouts that cannot be the mapper's tensors are refused", "[node][mapper]") {
  ScratchDir dir("node-virtual-cache-refused");
  InProcessNode n(dir, "tests/data/node/node-virtual-test.toml");
  Result<MapperPoolView> view = MapperPoolView::attach(*n.descriptor.mapper);
  REQUIRE(view.ok());
  // Two cache groups: the mapper's tensors are one group's.
  auto two = VirtualModelKvCache::create(layout_file("small-two-group.toml"), *view);
  REQUIRE_FALSE(two.ok());
  CHECK(two.error().field == "layout");
  // Another head width than the mapper's.
  CacheLayoutManifest wide = layout_file("small-virtual.toml");
  wide.cache_groups[0].head_dim = 32;
  auto w = VirtualModelKvCache::create(wide, *view);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().field == "mapper");
  // P_a that does not divide T_max = 128: a slot would not tile into blocks.
  CacheLayoutManifest odd = layout_file("small-virtual.toml");
  odd.allocator_block_size = 48;
  auto o = VirtualModelKvCache::create(odd, *view);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error().code == ErrorCode::incompatible);
  CHECK(o.error().field == "mapper");
}

}  // namespace kvrt::test
