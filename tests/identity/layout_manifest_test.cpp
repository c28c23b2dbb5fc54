// CacheLayoutManifest: loading, structural validation and the canonical digest
// (spec 0x01A, 0x02A, 0x03B, 0x03C, 0x0AC).
#include <catch2/catch.hpp>

#include "services/identity/layout_loader.hpp"

using namespace kvrt;

namespace {
std::string layout_path(const char* name) { return std::string(KVRT_SOURCE_DIR) + "/config/layouts/" + name; }

CacheLayoutManifest default_layout() {
  auto m = load_layout_manifest(layout_path("two-group-tp2.toml"));
  REQUIRE(m.ok());
  return *m;
}
}  // namespace

TEST_CASE("row bytes of the shipped layouts follow 0x02A", "[identity][layout]") {
  // B_row,g = L_g * H_kv * d_h * (b_K + b_V), derived here independently.
  auto two = default_layout();
  REQUIRE(two.cache_groups.size() == 2);
  CHECK(two.cache_groups[0].row_bytes() == 24u * 4 * 128 * (2 + 2));  // 48 KiB
  CHECK(two.cache_groups[1].row_bytes() == 8u * 4 * 128 * (2 + 2));   // 16 KiB
  CHECK(two.row_bytes() == 65536);                                    // 64 KiB/token/rank
  CHECK(two.row_bytes() * two.allocator_block_size == 1024 * 1024);   // 1 MiB bundle (0x03B)

  auto one = load_layout_manifest(layout_path("single-group-tp2.toml"));
  REQUIRE(one.ok());
  CHECK(one->row_bytes() == 65536);
  auto wide = load_layout_manifest(layout_path("model-wide.toml"));
  REQUIRE(wide.ok());
  CHECK(wide->row_bytes() == 32u * 2 * 8 * 128 * 2);  // 131,072 bytes = 128 KiB
}

TEST_CASE("every model layer resolves to exactly one cache group (0x03C)", "[identity][layout]") {
  auto m = default_layout();
  for (uint32_t layer = 0; layer < 32; ++layer) {
    const auto* g = m.group_for_layer(layer);
    REQUIRE(g != nullptr);
    CHECK(g->group_id.value == (layer < 24 ? 0u : 1u));
  }
  CHECK(m.group_for_layer(32) == nullptr);
}

TEST_CASE("structural rejections are typed and name the field", "[identity][layout]") {
  auto base = default_layout();
  REQUIRE(base.validate().ok());

  auto gap = base;
  gap.cache_groups[1].layer_start = 25;  // layer 24 belongs to no group
  CHECK(gap.validate().error().code == ErrorCode::layer_gap);

  auto overlap = base;
  overlap.cache_groups[1].layer_start = 23;
  CHECK(overlap.validate().error().code == ErrorCode::layer_gap);

  auto dup = base;
  dup.cache_groups[0].axis_order[1] = TensorAxis::physical_slot;
  CHECK(dup.validate().error().code == ErrorCode::duplicate_axis);

  auto split = base;
  split.kernel_block_size = 12;  // 0x0AC: P_k must divide P_a
  CHECK(split.validate().error().code == ErrorCode::kernel_block_not_divisor);
  CHECK(split.validate().error().field == "kernel_block_size");

  auto rank = base;
  rank.tp_rank = 2;
  CHECK(rank.validate().error().field == "tp_rank");
}

TEST_CASE("the canonical digest changes with every equality-bearing field", "[identity][layout]") {
  auto base = default_layout();
  const auto d0 = base.digest();
  CHECK(d0 == default_layout().digest());  // deterministic across loads
  std::vector<CacheLayoutManifest> variants(10, base);
  variants[0].tp_rank = 1;
  variants[1].cache_groups[0].k_dtype = ScalarType::bf16;
  variants[2].quantization_schema = "fp8-per-tensor";
  variants[3].cache_groups[1].axis_order = base.cache_groups[0].axis_order;
  variants[4].position_contract_id = "rope-other";
  variants[5].allocator_block_size = 32;
  variants[6].cache_groups[0].group_id = CacheGroupId{7};
  variants[7].hash_family = HashFamily::xxh3_bits128;
  variants[8].model_generation = 2;
  variants[9].kernel_block_size = 8;
  for (size_t i = 0; i < variants.size(); ++i) {
    INFO("variant " << i);
    CHECK(variants[i].digest() != d0);
  }
}

TEST_CASE("a bad layout file names the file, line and field", "[identity][layout]") {
  auto bad_syntax = parse_layout_manifest("manifest_id = \n", "bad.toml");
  REQUIRE(!bad_syntax.ok());
  CHECK(bad_syntax.error().code == ErrorCode::config_parse);
  CHECK(bad_syntax.error().reason.find("bad.toml:1:") != std::string::npos);

  const char* wrong_type = R"(manifest_id = "x"
logical_cache_abi_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
model_generation = 1
allocator_block_size = "sixteen"
)";
  auto r = parse_layout_manifest(wrong_type, "wrong.toml");
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::config_field);
  CHECK(r.error().field == "allocator_block_size");
  CHECK(r.error().reason.find("wrong.toml:4:") != std::string::npos);

  auto missing = load_layout_manifest("/nonexistent/layout.toml");
  CHECK(missing.error().code == ErrorCode::io);
}
