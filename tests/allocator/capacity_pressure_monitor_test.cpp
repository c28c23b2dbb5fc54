// [allocator][pressure] CapacityPressureMonitor
// (services/allocator/capacity_pressure_monitor.hpp): work refused for
// capacity with no release in between is reported once per kStuckRefusals
// refusals, with the most blocks per group any of them lacked; a release
// starts the count again. Exact cases, then a seeded random stream against a
// plain replay of the rule.
#include "services/allocator/capacity_pressure_monitor.hpp"

#include <catch2/catch.hpp>
#include <random>

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 16;  // tokens per block

AllocationReceipt refused() {
  AllocationReceipt r;
  r.outcome = AllocationOutcome::out_of_capacity;
  return r;
}

// One op and its outcome as one batch.
struct Step {
  AllocatorBatch batch;
  AllocatorBatchReceipt receipt;
};
Step refused_allocate(uint32_t rows) { return {{{}, {AllocateOp{rows, {}, std::nullopt}}}, {{}, {refused()}}}; }
Step refused_append() { return {{{}, {AppendOp{}}}, {{}, {refused()}}}; }
Step release() { return {{{}, {ReleaseOp{}}}, {{}, {ReleaseResult{}}}}; }
Step committed() { return {{{}, {AllocateOp{16, {}, std::nullopt}}}, {{}, {AllocationReceipt{}}}}; }

}  // namespace

TEST_CASE("capacity pressure: reported once the refusals pile up, with the largest shortfall",
          "[allocator][pressure]") {
  CapacityPressureMonitor m;
  const uint32_t n = CapacityPressureMonitor::kStuckRefusals;
  for (uint32_t i = 0; i + 1 < n; ++i) {
    const Step s = i == 3 ? refused_allocate(70) : refused_append();  // 70 rows lack 5 blocks per group
    CHECK_FALSE(m.observe(s.batch, s.receipt, kP).has_value());
  }
  const Step last = refused_append();
  CHECK(m.observe(last.batch, last.receipt, kP) == std::optional<uint32_t>(5));
  // Counting starts again; the shortfall stays until a release.
  CHECK(m.refusals_since_release() == 0);
  for (uint32_t i = 0; i + 1 < n; ++i) CHECK_FALSE(m.observe(last.batch, last.receipt, kP).has_value());
  CHECK(m.observe(last.batch, last.receipt, kP) == std::optional<uint32_t>(5));
}

TEST_CASE("capacity pressure: a release or committed work in between is progress", "[allocator][pressure]") {
  CapacityPressureMonitor m;
  const Step r = refused_append(), rel = release(), ok = committed();
  for (uint32_t i = 0; i + 1 < CapacityPressureMonitor::kStuckRefusals; ++i)
    CHECK_FALSE(m.observe(r.batch, r.receipt, kP));
  CHECK_FALSE(m.observe(rel.batch, rel.receipt, kP).has_value());
  CHECK(m.refusals_since_release() == 0);
  // Committed work does not reset the count (it may be the stuck work's
  // neighbours racing for the last blocks), but it is not a refusal either.
  CHECK_FALSE(m.observe(ok.batch, ok.receipt, kP).has_value());
  CHECK(m.refusals_since_release() == 0);
  // A batch of several ops counts each.
  Step mixed = refused_append();
  mixed.batch.ops.push_back(ReleaseOp{});
  mixed.receipt.outcomes.push_back(ReleaseResult{});
  mixed.batch.ops.push_back(AppendOp{});
  mixed.receipt.outcomes.push_back(refused());
  CHECK_FALSE(m.observe(mixed.batch, mixed.receipt, kP).has_value());
  CHECK(m.refusals_since_release() == 1);  // the release in the middle reset the first
}

TEST_CASE("capacity pressure property: a random stream agrees with a replay of the rule",
          "[allocator][pressure][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 21));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  CapacityPressureMonitor m;
  uint64_t refusals = 0;  // the reference: refusals and the largest shortfall since the last release
  uint32_t worst = 0;
  for (int step = 0; step < 2000; ++step) {
    Step s;
    for (size_t k = 0, n = 1 + rng() % 4; k < n; ++k) {
      switch (rng() % 5) {
        case 0: {
          const uint32_t rows = 1 + rng() % 200;
          s.batch.ops.push_back(AllocateOp{rows, {}, std::nullopt});
          s.receipt.outcomes.push_back(refused());
          ++refusals;
          worst = std::max(worst, (rows + kP - 1) / kP);
          break;
        }
        case 1:
          s.batch.ops.push_back(AppendOp{});
          s.receipt.outcomes.push_back(refused());
          ++refusals;
          worst = std::max(worst, 1u);
          break;
        case 2:
          s.batch.ops.push_back(AllocateOp{16, {}, std::nullopt});
          s.receipt.outcomes.push_back(make_error(ErrorCode::invalid_argument, "a caller error is not pressure"));
          break;
        case 3:
          s.batch.ops.push_back(AllocateOp{16, {}, std::nullopt});
          s.receipt.outcomes.push_back(AllocationReceipt{});
          break;
        default:
          if (rng() % 3 != 0) break;  // releases are rarer than refusals in a stuck node
          s.batch.ops.push_back(ReleaseOp{});
          s.receipt.outcomes.push_back(ReleaseResult{});
          refusals = 0;
          worst = 0;
      }
    }
    std::optional<uint32_t> expected;
    if (refusals >= CapacityPressureMonitor::kStuckRefusals) {
      expected = worst;
      refusals = 0;
    }
    INFO("step " << step);
    REQUIRE(m.observe(s.batch, s.receipt, kP) == expected);
    REQUIRE(m.refusals_since_release() == refusals);
  }
}

}  // namespace kvrt::test
