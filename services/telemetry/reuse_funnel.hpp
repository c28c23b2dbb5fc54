#pragma once
// The reuse funnel of spec 0x0CF: one count per stage of the executable-reuse
// transaction (0x0CD), so a falling hit rate names the contract that failed
// instead of hiding it in one ratio. Each finished attempt is recorded once:
// as executed, or as one rejection reason (which names its bucket). The
// stage counts are maintained incrementally and re-derived by validate():
//
//   N_stage(k) = N_exec + sum over buckets b >= k of rejections(b)
//
// which makes the funnel monotone and every difference one bucket.
#include <array>
#include <cstdint>
#include <string_view>

#include "services/common/result.hpp"
#include "services/telemetry/reuse_rejection.hpp"

namespace kvrt {

enum class FunnelStage : uint8_t {
  requests = 0,            // N_req
  authorized = 1,          // N_auth
  candidates = 2,          // N_cand
  compatible = 3,          // N_compat
  current_generation = 4,  // N_gen
  leased = 5,              // N_lease
  mapping_ready = 6,       // N_map
  current_snapshot = 7,    // N_snap
  executed = 8,            // N_exec
};
inline constexpr size_t kFunnelStageCount = 9;
std::string_view to_string(FunnelStage s);

// The stage after which bucket b rejects: bucket b separates stage b from b+1.
inline FunnelStage last_stage_passed(ReuseBucket b) { return static_cast<FunnelStage>(static_cast<uint8_t>(b)); }

struct FunnelCounts {
  std::array<uint64_t, kFunnelStageCount> stage{};  // indexed by FunnelStage [attempts]

  uint64_t at(FunnelStage s) const { return stage[static_cast<size_t>(s)]; }
  friend bool operator==(const FunnelCounts&, const FunnelCounts&) = default;
};

// How one attempt ended, for the funnel.
struct FunnelOutcome {
  bool executed = false;
  RejectionReason reason = RejectionReason::no_candidate;  // meaningful only when !executed

  static FunnelOutcome hit() { return FunnelOutcome{true, RejectionReason::no_candidate}; }
  static FunnelOutcome rejected(RejectionReason r) { return FunnelOutcome{false, r}; }
};

class ReuseFunnel {
 public:
  void record(const FunnelOutcome& outcome);

  FunnelCounts counts() const { return counts_; }
  uint64_t rejections(ReuseBucket b) const { return buckets_[static_cast<size_t>(b)]; }
  uint64_t rejections(RejectionReason r) const { return reasons_[static_cast<size_t>(r)]; }
  uint64_t executed() const { return counts_.at(FunnelStage::executed); }
  // Alert families of 0x0CF, summed over their reasons.
  uint64_t cross_namespace_rejects() const;
  uint64_t stale_namespace_rejects() const;
  uint64_t generation_version_rejects() const;

  // Re-derives bucket totals from the reasons and every stage count from the
  // buckets; monotone by construction. ErrorCode::invariant_violated if not.
  Status validate() const;

 private:
  std::array<uint64_t, kRejectionReasonCount> reasons_{};
  std::array<uint64_t, kReuseBucketCount> buckets_{};
  FunnelCounts counts_{};
};

}  // namespace kvrt
