#include "services/reuse/reuse_funnel_counters.hpp"

#include <string>

namespace kvrt {

namespace {

constexpr RejectionReason kAuthorizationReasons[] = {
    RejectionReason::unauthenticated, RejectionReason::principal_revoked, RejectionReason::namespace_denied,
    RejectionReason::namespace_closed, RejectionReason::stale_namespace_generation};
constexpr RejectionReason kHitReasons[] = {RejectionReason::stale_candidate_generation,
                                           RejectionReason::frontier_not_valid};

void put(OwnerStats& out, const std::string& name, uint64_t value) {
  out.values.push_back(StatValue{name, static_cast<int64_t>(value)});
}

std::string refused_name(RejectionReason r) { return "reuse_refused_" + std::string(to_string(r)); }

uint64_t stat(const OwnerStats& o, const std::string& name) {
  for (const StatValue& v : o.values)
    if (v.name == name) return v.value < 0 ? 0 : static_cast<uint64_t>(v.value);
  return 0;
}

}  // namespace

std::optional<RejectionReason> hit_rejection(ErrorCode code) {
  switch (code) {
    // The block was recycled (new generation) or is no longer committed K/V.
    case ErrorCode::stale_physical:
    case ErrorCode::unknown_physical:
      return RejectionReason::stale_candidate_generation;
    case ErrorCode::row_not_valid:
      return RejectionReason::frontier_not_valid;
    default:
      return std::nullopt;
  }
}

void LookupFunnelCounters::put(OwnerStats& out) const {
  kvrt::put(out, "reuse_requests", requests_);
  kvrt::put(out, "reuse_candidates", candidates_);
  kvrt::put(out, "reuse_misses", misses_);
  for (RejectionReason r : kAuthorizationReasons) kvrt::put(out, refused_name(r), refused_[static_cast<size_t>(r)]);
}

void HitFunnelCounters::put(OwnerStats& out) const {
  kvrt::put(out, "reuse_leased", leased_);
  kvrt::put(out, "reuse_out_of_capacity", out_of_capacity_);
  kvrt::put(out, "reuse_quota_exceeded", quota_exceeded_);
  for (RejectionReason r : kHitReasons) kvrt::put(out, refused_name(r), refused_[static_cast<size_t>(r)]);
}

namespace {

// The owner itself, or one trust domain's instance of it ("<owner>@<domain>"
// on a node with pools per domain): the funnel adds up every domain's.
bool is_owner(const std::string& reported, const std::string& owner) {
  return reported == owner || reported.starts_with(owner + "@");
}

}  // namespace

uint64_t NodeReuseFunnel::compatible() const {
  uint64_t incompatible = 0;
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (bucket_of(static_cast<RejectionReason>(r)) == ReuseBucket::incompatible) incompatible += rejections[r];
  return candidates >= incompatible ? candidates - incompatible : 0;
}

NodeReuseFunnel node_reuse_funnel(const std::vector<OwnerStats>& owners) {
  NodeReuseFunnel f;
  uint64_t misses = 0, refused_auth = 0, refused_stale = 0;
  for (const OwnerStats& o : owners) {
    if (is_owner(o.owner, "prefix_index")) {
      f.requests += stat(o, "reuse_requests");
      f.candidates += stat(o, "reuse_candidates");
      misses += stat(o, "reuse_misses");
      for (RejectionReason r : kAuthorizationReasons) {
        const uint64_t n = stat(o, refused_name(r));
        f.rejections[static_cast<size_t>(r)] += n;
        refused_auth += n;
      }
    } else if (o.owner == "node") {
      // The reuse transaction's attempts refused at steps 1-2 (0x0CD): they
      // never reached the index, whose counters therefore miss them.
      for (size_t k = 0; k < kRejectionReasonCount; ++k) {
        const auto r = static_cast<RejectionReason>(k);
        if (bucket_of(r) != ReuseBucket::authorization) continue;
        const uint64_t n = stat(o, refused_name(r));
        f.requests += n;
        f.rejections[static_cast<size_t>(r)] += n;
        refused_auth += n;
      }
    } else if (is_owner(o.owner, "allocator")) {
      f.leased += stat(o, "reuse_leased");
      f.out_of_capacity += stat(o, "reuse_out_of_capacity");
      f.quota_exceeded += stat(o, "reuse_quota_exceeded");
      for (RejectionReason r : kHitReasons) {
        const uint64_t n = stat(o, refused_name(r));
        f.rejections[static_cast<size_t>(r)] += n;
        refused_stale += n;
      }
    }
  }
  f.rejections[static_cast<size_t>(RejectionReason::no_candidate)] = misses;
  f.authorized = f.requests - refused_auth;
  // An allocation may present handles no lookup of this node produced (a
  // client may build them itself); the stages never go below zero.
  f.current = f.candidates > refused_stale ? f.candidates - refused_stale : 0;
  const uint64_t settled = f.leased + f.out_of_capacity + f.quota_exceeded;
  f.unsettled = f.current > settled ? f.current - settled : 0;
  return f;
}

}  // namespace kvrt
