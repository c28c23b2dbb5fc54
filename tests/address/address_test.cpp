// Address translation on the Loop 4 fixture (spec 0x03B-0x03I): the worked
// 0x03F address, request visibility over shared capacity (0x03G), the
// published successor (0x03H), the 0x03I rejection order, structural
// rejections and the `kvrt address` command.
#include <nlohmann/json.hpp>

#include "tests/address/address_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

ErrorCode code_of(const AddressTranslator& t, const AddressQuery& q) {
  auto r = t.translate(q);
  return r.ok() ? ErrorCode::ok : r.error().code;
}

}  // namespace

TEST_CASE("0x03F: request A token 16, layer 24, K head 1, lane 5 end to end", "[address]") {
  auto t = translator_for(loop4_snapshot());
  auto r = t.translate(query("A", 16, 24, TensorKind::K, 1, 5));
  REQUIRE(r.ok());

  // Steps 1-7 of the trace.
  CHECK(r->group.value == 1);
  CHECK(r->group_layer_start == 24);
  CHECK(r->group_layer_end == 32);
  CHECK(r->layer_local == 24 - 24);
  CHECK(r->logical_block == 16 / 16);
  CHECK(r->token_offset == 16 % 16);
  CHECK(r->table_version.value == 5);
  CHECK(r->physical_id.value == 2001);
  CHECK(r->pool_generation.value == 7);
  CHECK(r->physical_slot.value == 6);
  CHECK(r->valid_rows == 16);
  CHECK(r->slot_id == 6 * 16 + 0);
  CHECK(r->slot_id == 96);

  // Steps 8-10: shape [8 layers, 8 slots, 16 tokens, 4 heads, 128 dims] in g1's
  // layer-major order; strides are the products of the dimensions to the right.
  const std::array<uint64_t, 5> shape{8, 8, 16, 4, 128};
  const std::array<uint64_t, 5> strides{8 * 16 * 4 * 128, 16 * 4 * 128, 4 * 128, 128, 1};
  CHECK(r->geometry.shape == shape);
  CHECK(r->geometry.strides == strides);
  CHECK(strides == std::array<uint64_t, 5>{65536, 8192, 512, 128, 1});
  CHECK(r->coordinate == std::array<uint64_t, 5>{0, 6, 0, 1, 5});

  // E_1, O_1 and A_1,K exactly as the spec writes them.
  const uint64_t e = 0 * 65536 + 6 * 8192 + 0 * 512 + 1 * 128 + 5;
  CHECK(e == 49285);
  CHECK(r->element_offset == e);
  CHECK(r->scalar_bytes == 2);
  CHECK(r->byte_offset == 2 * e);
  CHECK(r->byte_offset == 98570);
  const uint64_t k_base = (uint64_t{1} << 32) + (uint64_t{1} << 24);
  CHECK(k_base == 4311744512u);
  CHECK(r->tensor_base == k_base);
  CHECK(r->tensor_end == k_base + 8ull * 8 * 16 * 4 * 128 * 2);  // 1 MiB tensor
  CHECK(r->byte_address == k_base + 98570);
  CHECK(r->byte_address == 4311843082u);
  // 0x03D: two different quantities.
  CHECK(r->slot_id != r->byte_address);

  // The V read of the same coordinate differs only in its base.
  auto v = t.translate(query("A", 16, 24, TensorKind::V, 1, 5));
  REQUIRE(v.ok());
  CHECK(v->element_offset == e);
  CHECK(v->byte_address == v->tensor_base + 98570);
  CHECK(v->tensor_base != r->tensor_base);
}

TEST_CASE("0x03E: the slot-major group g0 orders the same coordinate differently", "[address]") {
  auto t = translator_for(loop4_snapshot());
  // Layer 5 of g0, token 16 of A -> block 1001 (slot 5). g0's declared order is
  // [physical_slot, layer_local, token_offset, kv_head, head_dim].
  auto r = t.translate(query("A", 16, 5, TensorKind::K, 1, 5));
  REQUIRE(r.ok());
  CHECK(r->group.value == 0);
  CHECK(r->physical_id.value == 1001);
  CHECK(r->geometry.shape == std::array<uint64_t, 5>{8, 24, 16, 4, 128});
  const uint64_t e = 5ull * (24 * 16 * 4 * 128) + 5ull * (16 * 4 * 128) + 0 * 512 + 1 * 128 + 5;
  CHECK(r->element_offset == e);
  CHECK(r->byte_address == (uint64_t{1} << 32) + 2 * e);
  CHECK(r->slot_id == 5 * 16);
}

TEST_CASE("0x03G: request visibility dominates shared physical validity", "[address]") {
  const auto snapshot = loop4_snapshot();
  auto t = translator_for(snapshot);
  // B holds 25 tokens and shares bundle 101 (2001 in g1) with A.
  auto legal = t.translate(query("B", 24, 24));
  REQUIRE(legal.ok());
  CHECK(legal->logical_block == 1);
  CHECK(legal->token_offset == 8);
  CHECK(legal->physical_id.value == 2001);
  CHECK(legal->valid_rows == 16);

  // Token 25: offset 9 < the shared block's 16 valid rows, yet outside B.
  auto shared = t.translate(query("A", 25, 24));
  REQUIRE(shared.ok());
  CHECK(shared->physical_id.value == 2001);
  CHECK(shared->token_offset < shared->valid_rows);
  auto rejected = t.translate(query("B", 25, 24));
  REQUIRE(!rejected.ok());
  CHECK(rejected.error().code == ErrorCode::request_not_visible);
  CHECK(rejected.error().field == "token");
  // B's visible rows in its last block: 25 - 16 = 9 (offsets 0..8).
  for (uint64_t token = 16; token < 32; ++token) CHECK(t.translate(query("B", token, 24)).ok() == (token - 16 < 9));

  // The reverse failure: the request sees the row, the block has not committed it.
  auto uncommitted = snapshot;
  descriptor_of(uncommitted, 1, 2002).valid_rows = 0;
  auto u = translator_for(uncommitted);
  CHECK(code_of(u, query("A", 32, 24)) == ErrorCode::row_not_valid);
  CHECK(code_of(u, query("A", 32, 0)) == ErrorCode::ok);  // g0's 1002 still holds its row
}

TEST_CASE("0x03H: crossing a block boundary consumes the published successor", "[address]") {
  auto snapshot = loop4_snapshot();
  // Before publication only version 2 exists: token 16 is not yet C's.
  auto before = snapshot;
  std::erase_if(before.requests, [](const RequestTables& r) { return r.name == "C" && r.table_version.value == 3; });
  auto t2 = translator_for(before);
  CHECK(code_of(t2, query("C", 15, 0)) == ErrorCode::ok);
  CHECK(code_of(t2, query("C", 16, 0)) == ErrorCode::request_not_visible);

  auto t3 = translator_for(snapshot);
  auto g0 = t3.translate(query("C", 16, 0));
  auto g1 = t3.translate(query("C", 16, 24));
  REQUIRE(g0.ok());
  REQUIRE(g1.ok());
  CHECK(g0->table_version.value == 3);
  CHECK(g0->logical_block == 16 / 16);
  CHECK(g0->token_offset == 16 % 16);
  CHECK(g0->physical_id.value == 1003);
  CHECK(g0->physical_slot.value == 0);
  CHECK(g0->slot_id == 0 * 16 + 0);
  CHECK(g1->physical_id.value == 2003);
  CHECK(g1->physical_slot.value == 4);
  CHECK(g1->slot_id == 4 * 16 + 0);
  CHECK(g1->slot_id == 64);

  // A reader still planned against version 2 is told so; version 4 was never published.
  auto pinned = query("C", 16, 24);
  pinned.expected_table_version = TableVersion{2};
  CHECK(code_of(t3, pinned) == ErrorCode::stale_table_version);
  pinned.expected_table_version = TableVersion{3};
  CHECK(code_of(t3, pinned) == ErrorCode::ok);
  pinned.expected_table_version = TableVersion{4};
  CHECK(code_of(t3, pinned) == ErrorCode::stale_table_version);
}

TEST_CASE("0x03I: each read-time rejection is typed, and the earlier check wins", "[address]") {
  const auto base = loop4_snapshot();
  auto fixture = translator_for(base);

  SECTION("unknown request, then a stale version before visibility") {
    CHECK(code_of(fixture, query("Z", 0, 0)) == ErrorCode::unknown_request);
    auto q = query("C", 99, 0);  // stale pin and invisible token
    q.expected_table_version = TableVersion{2};
    CHECK(code_of(fixture, q) == ErrorCode::stale_table_version);
    q.expected_table_version.reset();
    CHECK(code_of(fixture, q) == ErrorCode::request_not_visible);
  }
  SECTION("request visibility before the layer and the table bounds") {
    auto s = base;
    for (auto& t : request_version(s, "A", 5).tables) t.blocks.resize(2);  // no drift, just short
    auto t = translator_for(s);
    CHECK(code_of(t, query("A", 40, 24)) == ErrorCode::request_not_visible);  // both fail
    CHECK(code_of(t, query("A", 40, 32)) == ErrorCode::request_not_visible);
    CHECK(code_of(t, query("A", 32, 32)) == ErrorCode::coordinate_out_of_range);
    auto tob = t.translate(query("A", 32, 24));
    REQUIRE(!tob.ok());
    CHECK(tob.error().code == ErrorCode::table_out_of_bounds);
  }
  SECTION("table bounds before physical identity") {
    auto s = base;
    auto& a = request_version(s, "A", 5);
    for (auto& t : a.tables) t.blocks.resize(2);
    a.tables[1].pool_generation = PoolGeneration{6};  // every g1 ref is now stale
    auto t = translator_for(s);
    CHECK(code_of(t, query("A", 32, 24)) == ErrorCode::table_out_of_bounds);
    CHECK(code_of(t, query("A", 16, 24)) == ErrorCode::stale_physical);
    CHECK(code_of(t, query("A", 16, 0)) == ErrorCode::ok);  // g0 untouched
  }
  SECTION("unknown versus stale physical identities") {
    auto s = base;
    request_version(s, "A", 5).tables[1].blocks[1] = PhysicalBlockId{2999};
    CHECK(code_of(translator_for(s), query("A", 16, 24)) == ErrorCode::unknown_physical);
    s = base;
    request_version(s, "A", 5).tables[1].pool_id = PoolId{10};  // g0's pool
    CHECK(code_of(translator_for(s), query("A", 16, 24)) == ErrorCode::unknown_physical);
    s = base;
    request_version(s, "A", 5).tables[1].pool_generation = PoolGeneration{8};  // not yet published
    CHECK(code_of(translator_for(s), query("A", 16, 24)) == ErrorCode::unknown_physical);
    s = base;
    pool_of(s, 1).pool_generation = PoolGeneration{8};  // pool recycled after A's tables
    for (auto& d : pool_of(s, 1).descriptors) d.pool_generation = PoolGeneration{8};
    auto stale = translator_for(s).translate(query("A", 16, 24));
    REQUIRE(!stale.ok());
    CHECK(stale.error().code == ErrorCode::stale_physical);
  }
  SECTION("physical identity before physical validity") {
    auto s = base;
    descriptor_of(s, 1, 2001).valid_rows = 0;
    auto t = translator_for(s);
    CHECK(code_of(t, query("A", 16, 24)) == ErrorCode::row_not_valid);
    request_version(s, "A", 5).tables[1].pool_generation = PoolGeneration{6};
    CHECK(code_of(translator_for(s), query("A", 16, 24)) == ErrorCode::stale_physical);
  }
  SECTION("physical validity before head and lane ranges") {
    auto s = base;
    descriptor_of(s, 1, 2001).valid_rows = 3;
    auto t = translator_for(s);
    CHECK(code_of(t, query("A", 16 + 3, 24, TensorKind::K, 4, 0)) == ErrorCode::row_not_valid);
    CHECK(code_of(t, query("A", 16 + 2, 24, TensorKind::K, 4, 0)) == ErrorCode::coordinate_out_of_range);
    auto lane = t.translate(query("A", 16 + 2, 24, TensorKind::V, 3, 128));
    REQUIRE(!lane.ok());
    CHECK(lane.error().code == ErrorCode::coordinate_out_of_range);
    CHECK(lane.error().field == "lane");
    CHECK(code_of(t, query("A", 16 + 2, 24, TensorKind::V, 3, 127)) == ErrorCode::ok);
  }
}

TEST_CASE("translation snapshot: structural rejections are typed and name the field", "[address]") {
  const auto base = loop4_snapshot();
  REQUIRE(base.validate().ok());
  auto expect = [](const TranslationSnapshot& s, ErrorCode code, const std::string& field) {
    Status st = s.validate();
    REQUIRE(!st.ok());
    CHECK(st.error().code == code);
    CHECK(st.error().field == field);
    CHECK(!AddressTranslator::create(s).ok());
  };
  auto s = base;
  s.layout.cache_groups[1].layer_start = 25;
  CHECK(s.validate().error().code == ErrorCode::layer_gap);
  s = base;
  s.layout.cache_groups[1].axis_order[4] = TensorAxis::kv_head;
  CHECK(s.validate().error().code == ErrorCode::duplicate_axis);
  s = base;
  s.layout.kernel_block_size = 12;
  CHECK(s.validate().error().code == ErrorCode::kernel_block_not_divisor);

  s = base;
  request_version(s, "A", 5).tables[1].blocks.pop_back();
  expect(s, ErrorCode::table_length_drift, "requests[0].tables[1].blocks");

  // Tensor ranges are half-open: adjacency is legal, one byte less overlaps.
  s = base;
  pool_of(s, 0).v_base = pool_of(s, 0).k_base + 3 * 1024 * 1024;
  CHECK(s.validate().ok());
  pool_of(s, 0).v_base -= 1;
  expect(s, ErrorCode::overlapping_tensors, "pools[0].v_base");
  s = base;
  pool_of(s, 1).k_base = pool_of(s, 0).v_base + 1024;  // g1 K inside g0 V, across groups
  expect(s, ErrorCode::overlapping_tensors, "pools[1].k_base");

  s = base;
  descriptor_of(s, 1, 2003).slot = PhysicalSlot{6};
  expect(s, ErrorCode::slot_reuse, "pools[1].descriptors[3].slot");
  s = base;
  descriptor_of(s, 1, 2003).slot = PhysicalSlot{8};
  expect(s, ErrorCode::coordinate_out_of_range, "pools[1].descriptors[3].slot");
  s = base;
  descriptor_of(s, 0, 1002).pool_generation = PoolGeneration{3};
  expect(s, ErrorCode::stale_physical, "pools[0].descriptors[2].pool_generation");
  s = base;
  descriptor_of(s, 0, 1002).valid_rows = 17;
  expect(s, ErrorCode::row_not_valid, "pools[0].descriptors[2].valid_rows");
  s = base;
  request_version(s, "C", 3).table_version = TableVersion{2};
  expect(s, ErrorCode::stale_table_version, "requests[3].table_version");
  s = base;
  request_version(s, "B", 3).tables[1].blocks[1] = PhysicalBlockId{2002};  // bundle 102 beside 101
  expect(s, ErrorCode::bundle_mismatch, "requests[1].tables[1].blocks[1]");
  s = base;
  s.pools.pop_back();
  expect(s, ErrorCode::unknown_group, "pools");
  s = base;
  request_version(s, "B", 3).tables[1].group = CacheGroupId{5};
  expect(s, ErrorCode::unknown_group, "requests[1].tables[1].group");
}

TEST_CASE("a bad snapshot file names the file, line and field", "[address]") {
  const auto layout = loop4_layout();
  const std::string head = "schema_version = 1\nlayout_manifest_id = \"loop4-two-group-tp0of2\"\n";
  const std::string pools =
      "[[pools]]\ngroup = 0\npool_id = 10\npool_generation = 4\nslot_count = 8\n"
      "k_base = 4294967296\nv_base = 4303355904\n"
      "descriptors = [\n  { id = 1000, slot = 2, valid_rows = 16 },\n  { id = 1001, slot = 2, valid_rows = 16 },\n]\n"
      "[[pools]]\ngroup = 1\npool_id = 11\npool_generation = 7\nslot_count = 8\n"
      "k_base = 4311744512\nv_base = 4320133120\n";

  auto reuse = parse_translation_snapshot(head + pools, "reuse.toml", layout);
  REQUIRE(!reuse.ok());
  CHECK(reuse.error().code == ErrorCode::slot_reuse);
  CHECK(reuse.error().field == "pools[0].descriptors[1].slot");
  CHECK(reuse.error().reason.rfind("reuse.toml:12:", 0) == 0);  // the second descriptor's slot

  auto typo = parse_translation_snapshot(head + "[[pools]]\ngroup = 0\npool_id = 10\npool_generaton = 4\n", "typo.toml",
                                         layout);
  REQUIRE(!typo.ok());
  CHECK(typo.error().code == ErrorCode::config_field);
  CHECK(typo.error().field == "pools[0].pool_generaton");
  CHECK(typo.error().reason.find("typo.toml:6:") != std::string::npos);

  auto wrong_type = parse_translation_snapshot(head + "[[pools]]\ngroup = \"g0\"\n", "type.toml", layout);
  REQUIRE(!wrong_type.ok());
  CHECK(wrong_type.error().field == "pools[0].group");

  auto other = parse_translation_snapshot("layout_manifest_id = \"model-wide\"\n", "other.toml", layout);
  REQUIRE(!other.ok());
  CHECK(other.error().code == ErrorCode::incompatible);
  CHECK(other.error().field == "layout_manifest_id");

  CHECK(load_translation_snapshot("/nonexistent/snapshot.toml", layout).error().code == ErrorCode::io);
}

