// Seeded randomised test of the reuse funnel (spec 0x0CF) against a
// brute-force reference: every outcome is kept, and each stage count is
// recomputed by asking, attempt by attempt, whether it passed that stage.
#include <catch2/catch.hpp>
#include <random>

#include "services/telemetry/reuse_funnel.hpp"

using namespace kvrt;

TEST_CASE("random funnel outcomes match a brute-force stage count", "[telemetry][property]") {
  const uint64_t seed = 0xf0e1d2c3ull;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  ReuseFunnel funnel;
  std::vector<FunnelOutcome> outcomes;
  for (int n = 0; n < 5000; ++n) {
    const bool hit = rng() % 4 == 0;
    const auto reason = static_cast<RejectionReason>(rng() % kRejectionReasonCount);
    const FunnelOutcome o = hit ? FunnelOutcome::hit() : FunnelOutcome::rejected(reason);
    funnel.record(o);
    outcomes.push_back(o);
    REQUIRE(funnel.validate().ok());
    if (n % 500 != 499) continue;
    // Reference: attempt passed stage k iff it executed or its bucket index >= k.
    for (size_t k = 0; k < kFunnelStageCount; ++k) {
      uint64_t passed = 0;
      for (const FunnelOutcome& x : outcomes) passed += x.executed || static_cast<size_t>(bucket_of(x.reason)) >= k;
      INFO("stage " << to_string(static_cast<FunnelStage>(k)));
      CHECK(funnel.counts().stage[k] == passed);
    }
    for (size_t r = 0; r < kRejectionReasonCount; ++r) {
      uint64_t count = 0;
      for (const FunnelOutcome& x : outcomes) count += !x.executed && static_cast<size_t>(x.reason) == r;
      CHECK(funnel.rejections(static_cast<RejectionReason>(r)) == count);
    }
  }
  // Every reason names exactly one bucket, and every bucket has a reason.
  std::array<int, kReuseBucketCount> reasons_per_bucket{};
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    ++reasons_per_bucket[static_cast<size_t>(bucket_of(static_cast<RejectionReason>(r)))];
  for (size_t b = 0; b < kReuseBucketCount; ++b) CHECK(reasons_per_bucket[b] > 0);
}
