#include "services/reuse/open_reuse_attempts.hpp"

#include <string>

namespace kvrt {

size_t OpenReuseAttempts::room(SessionId session) const {
  const auto it = per_session_.find(session.value);
  const size_t held = it == per_session_.end() ? 0 : it->second;
  return held >= kPerSession ? 0 : kPerSession - held;
}

Status OpenReuseAttempts::hold(SessionId session, ReuseAttempt attempt) {
  if (attempt.phase() != ReusePhase::open || attempt.next_step() != ReuseStep::execute || !attempt.receipt())
    return make_error(ErrorCode::invalid_argument, "only an attempt that produced its receipt is held open", "attempt");
  const uint64_t snapshot = attempt.receipt()->execution_snapshot_version.value;
  const auto [it, inserted] = attempts_.try_emplace(std::pair{session.value, snapshot}, std::move(attempt));
  if (!inserted)
    return make_error(ErrorCode::invalid_argument, "snapshot " + std::to_string(snapshot) + " is already held open",
                      "snapshot");
  ++per_session_[session.value];
  return Status::success();
}

std::optional<ReuseAttempt> OpenReuseAttempts::take(SessionId session, ExecutionSnapshotVersion snapshot) {
  const auto it = attempts_.find(std::pair{session.value, snapshot.value});
  if (it == attempts_.end()) return std::nullopt;
  std::optional<ReuseAttempt> out(std::move(it->second));
  attempts_.erase(it);
  if (--per_session_[session.value] == 0) per_session_.erase(session.value);
  return out;
}

size_t OpenReuseAttempts::end_session(SessionId session) {
  const auto first = attempts_.lower_bound(std::pair{session.value, uint64_t{0}});
  const auto last = attempts_.upper_bound(std::pair{session.value, UINT64_MAX});
  const size_t n = static_cast<size_t>(std::distance(first, last));
  attempts_.erase(first, last);
  per_session_.erase(session.value);
  revoked_.erase(revoked_.lower_bound(std::pair{session.value, uint64_t{0}}),
                 revoked_.upper_bound(std::pair{session.value, UINT64_MAX}));
  return n;
}

namespace {
bool of_generation(const ReuseAttempt& a, const std::string& name, NamespaceGeneration g) {
  return a.receipt() && a.receipt()->namespace_id == name && a.receipt()->namespace_generation == g;
}
}  // namespace

size_t OpenReuseAttempts::count_generation(const std::string& name, NamespaceGeneration g) const {
  size_t n = 0;
  for (const auto& [key, attempt] : attempts_) n += of_generation(attempt, name, g) ? 1 : 0;
  return n;
}

std::vector<std::pair<SessionId, std::vector<LeaseId>>> OpenReuseAttempts::revoke_generation(const std::string& name,
                                                                                             NamespaceGeneration g) {
  std::vector<std::pair<SessionId, std::vector<LeaseId>>> leases;
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    if (!of_generation(it->second, name, g)) {
      ++it;
      continue;
    }
    leases.emplace_back(SessionId{it->first.first}, it->second.acquired_leases());
    revoked_.insert(it->first);
    if (--per_session_[it->first.first] == 0) per_session_.erase(it->first.first);
    it = attempts_.erase(it);
  }
  return leases;
}

bool OpenReuseAttempts::was_revoked(SessionId session, ExecutionSnapshotVersion snapshot) {
  return revoked_.erase(std::pair{session.value, snapshot.value}) > 0;
}

Status OpenReuseAttempts::validate() const {
  std::map<uint64_t, size_t> counted;
  for (const auto& [key, attempt] : attempts_) {
    if (attempt.phase() != ReusePhase::open || attempt.next_step() != ReuseStep::execute || !attempt.receipt())
      return make_error(ErrorCode::invariant_violated,
                        "open attempt " + std::to_string(key.second) + " is not waiting for step 9");
    if (attempt.receipt()->execution_snapshot_version.value != key.second)
      return make_error(ErrorCode::invariant_violated,
                        "open attempt " + std::to_string(key.second) + " is held under another receipt's key");
    KVRT_TRY(attempt.validate());
    ++counted[key.first];
  }
  if (counted != per_session_)
    return make_error(ErrorCode::invariant_violated, "open attempts per session disagree with the attempts");
  return Status::success();
}

}  // namespace kvrt
