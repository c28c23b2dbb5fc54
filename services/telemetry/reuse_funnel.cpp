#include "services/telemetry/reuse_funnel.hpp"

#include <string>

namespace kvrt {

std::string_view to_string(FunnelStage s) {
  switch (s) {
    case FunnelStage::requests:
      return "requests";
    case FunnelStage::authorized:
      return "authorized";
    case FunnelStage::candidates:
      return "candidates";
    case FunnelStage::compatible:
      return "compatible";
    case FunnelStage::current_generation:
      return "current_generation";
    case FunnelStage::leased:
      return "leased";
    case FunnelStage::mapping_ready:
      return "mapping_ready";
    case FunnelStage::current_snapshot:
      return "current_snapshot";
    case FunnelStage::executed:
      return "executed";
  }
  return "unknown_stage";
}

void ReuseFunnel::record(const FunnelOutcome& outcome) {
  // An attempt that executed passed every stage; one rejected in bucket b
  // passed stages 0..b (bucket b lies between stage b and stage b+1).
  size_t passed = kFunnelStageCount;
  if (!outcome.executed) {
    const ReuseBucket b = bucket_of(outcome.reason);
    ++reasons_[static_cast<size_t>(outcome.reason)];
    ++buckets_[static_cast<size_t>(b)];
    passed = static_cast<size_t>(last_stage_passed(b)) + 1;
  }
  for (size_t k = 0; k < passed; ++k) ++counts_.stage[k];
}

uint64_t ReuseFunnel::cross_namespace_rejects() const {
  uint64_t n = 0;
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (is_cross_namespace(static_cast<RejectionReason>(r))) n += reasons_[r];
  return n;
}

uint64_t ReuseFunnel::stale_namespace_rejects() const {
  uint64_t n = 0;
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (is_stale_namespace(static_cast<RejectionReason>(r))) n += reasons_[r];
  return n;
}

uint64_t ReuseFunnel::generation_version_rejects() const {
  uint64_t n = 0;
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (is_generation_or_version(static_cast<RejectionReason>(r))) n += reasons_[r];
  return n;
}

Status ReuseFunnel::validate() const {
  std::array<uint64_t, kReuseBucketCount> from_reasons{};
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    from_reasons[static_cast<size_t>(bucket_of(static_cast<RejectionReason>(r)))] += reasons_[r];
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    if (from_reasons[b] != buckets_[b])
      return make_error(
          ErrorCode::invariant_violated,
          "bucket holds " + std::to_string(buckets_[b]) + " rejections, its reasons " + std::to_string(from_reasons[b]),
          std::string(to_string(static_cast<ReuseBucket>(b))));
  uint64_t expected = executed();
  for (size_t k = kFunnelStageCount; k-- > 0;) {
    if (k < kReuseBucketCount) expected += buckets_[k];
    if (counts_.stage[k] != expected)
      return make_error(ErrorCode::invariant_violated,
                        "stage count " + std::to_string(counts_.stage[k]) +
                            " is not executed + later rejections = " + std::to_string(expected),
                        std::string(to_string(static_cast<FunnelStage>(k))));
    if (k + 1 < kFunnelStageCount && counts_.stage[k] < counts_.stage[k + 1])
      return make_error(ErrorCode::invariant_violated, "funnel is not monotone",
                        std::string(to_string(static_cast<FunnelStage>(k))));
  }
  return Status::success();
}

}  // namespace kvrt
