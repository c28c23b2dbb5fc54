// canonical_row_difference (engine/model/kv_row_compare.hpp), the
// closeness measure of the shared-prefix decode checks
// (tests/model_shared_prefix_test.cpp), against hand-made rows whose answer
// is a known power of two.
#include <cmath>
#include <cstring>

#include "tests/engine/model_fixture.hpp"
#include "engine/model/kv_row_compare.hpp"

using namespace kvrt;
using namespace kvrt::model;
using namespace kvrt::model::test;

TEST_CASE("canonical_row_difference: hand-made rows, per dtype, and its argument checks", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  // Group 0: 3 layers x 2 heads x 16 lanes = 96 fp16 K scalars, then 96 V.
  const auto fp16_row = [](uint16_t fill) {
    std::vector<uint8_t> row(384);
    for (size_t i = 0; i < row.size(); i += 2) std::memcpy(&row[i], &fill, 2);
    return row;
  };
  const auto set16 = [](std::vector<uint8_t>& row, size_t scalar, uint16_t bits) {
    std::memcpy(&row[2 * scalar], &bits, 2);
  };
  const std::vector<uint8_t> ones = fp16_row(0x3C00);  // 1.0
  CHECK(*canonical_row_difference(layout, 0, ones, ones) == 0.0);
  std::vector<uint8_t> a = ones;
  set16(a, 96 + 95, 0x3C01);  // the last V lane: 1 + 2^-10, one ulp above 1
  CHECK(*canonical_row_difference(layout, 0, a, ones) == std::ldexp(1.0, -10));
  // Below 1 the figure is absolute: one ulp of 0.5 is 2^-11.
  std::vector<uint8_t> halves = fp16_row(0x3800), h = halves;
  set16(h, 7, 0x3801);
  CHECK(*canonical_row_difference(layout, 0, h, halves) == std::ldexp(1.0, -11));
  // Above 1 it is relative: one ulp of 4 is 2^-8, over 4.
  std::vector<uint8_t> fours = fp16_row(0x4400), f = fours;
  set16(f, 0, 0x43FF);  // one ulp below 4: 4 - 2^-9
  CHECK(*canonical_row_difference(layout, 0, f, fours) == std::ldexp(1.0, -11));
  set16(f, 0, 0x4401);
  CHECK(*canonical_row_difference(layout, 0, f, fours) == std::ldexp(1.0, -10));
  // The largest lane wins; a NaN or a lone infinity is an infinite difference.
  set16(a, 3, 0x3C02);
  CHECK(*canonical_row_difference(layout, 0, a, ones) == std::ldexp(1.0, -9));
  set16(a, 5, 0x7E00);
  CHECK(std::isinf(*canonical_row_difference(layout, 0, a, ones)));
  std::vector<uint8_t> inf = ones;
  set16(inf, 9, 0x7C00);
  CHECK(*canonical_row_difference(layout, 0, inf, inf) == 0.0);
  CHECK(std::isinf(*canonical_row_difference(layout, 0, ones, inf)));

  SECTION("K fp32 and V bf16: each part widened by its own dtype, V after 96 * 4 bytes of K") {
    CacheLayoutManifest mixed = layout;
    mixed.cache_groups[0].k_dtype = ScalarType::fp32;
    mixed.cache_groups[0].v_dtype = ScalarType::bf16;
    std::vector<uint8_t> row(96 * 4 + 96 * 2, 0);
    const float one = 1.0f;
    const uint16_t bf_one = 0x3F80;
    for (size_t i = 0; i < 96; ++i) std::memcpy(&row[4 * i], &one, 4);
    for (size_t i = 0; i < 96; ++i) std::memcpy(&row[384 + 2 * i], &bf_one, 2);
    std::vector<uint8_t> k = row, v = row;
    const float next_one = std::nextafter(1.0f, 2.0f);
    std::memcpy(&k[4 * 95], &next_one, 4);  // the last K lane, one fp32 ulp
    CHECK(*canonical_row_difference(mixed, 0, k, row) == std::ldexp(1.0, -23));
    const uint16_t bf_next = 0x3F81;
    std::memcpy(&v[384], &bf_next, 2);  // the first V lane, one bf16 ulp
    CHECK(*canonical_row_difference(mixed, 0, v, row) == std::ldexp(1.0, -7));
    CHECK(canonical_row_difference(mixed, 0, ones, ones).error().field == "a");  // 384 bytes, 576 wanted
  }
  SECTION("sizes and group") {
    const std::vector<uint8_t> short_row(383), g1(128);
    CHECK(canonical_row_difference(layout, 0, short_row, ones).error().code == ErrorCode::invalid_argument);
    CHECK(canonical_row_difference(layout, 0, short_row, ones).error().field == "a");
    CHECK(canonical_row_difference(layout, 0, ones, short_row).error().field == "b");
    CHECK(canonical_row_difference(layout, 1, g1, g1).ok());  // group 1 rows are 128 bytes
    CHECK(canonical_row_difference(layout, 1, ones, ones).error().field == "a");
    CHECK(canonical_row_difference(layout, 2, g1, g1).error().code == ErrorCode::unknown_group);
    CacheLayoutManifest fp8 = layout;
    fp8.cache_groups[1].v_dtype = ScalarType::fp8_e4m3;
    CHECK(canonical_row_difference(fp8, 1, g1, g1).error().code == ErrorCode::executor_unsupported_dtype);
  }
}
