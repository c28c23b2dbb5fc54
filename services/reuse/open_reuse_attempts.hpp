#pragma once
// OpenReuseAttempts: the executable-reuse attempts (spec 0x0CD) whose
// receipt a session holds, between step 8 (the receipt was handed out) and
// the release op that reports step 9 (did the work that read the rows run)
// and performs step 10 (every lease back). Keyed per session by the
// receipt's execution_snapshot_version, which the executor issues once.
//
// A session may hold at most kPerSession open attempts: a worker that never
// releases cannot grow the node without bound; further acquires get a typed
// error until it releases some. A session's end drops its attempts (the
// owners reclaim the leases themselves, each through its own end_session).
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/ids.hpp"
#include "services/reuse/reuse_attempt.hpp"

namespace kvrt {

class OpenReuseAttempts {
 public:
  static constexpr size_t kPerSession = 4096;

  // How many more attempts the session may hold open. The limit is
  // applied when a batch starts (ReuseBatchRun::bind); hold() accepts what
  // was admitted then, so batches of one session in flight together may
  // pass it by at most their acquires.
  size_t room(SessionId session) const;
  // Holds an attempt that produced its receipt (phase open, next step
  // execute). Errors: invalid_argument for any other attempt or a second
  // attempt under one snapshot version.
  Status hold(SessionId session, ReuseAttempt attempt);
  // Removes and returns the session's attempt for `snapshot`, or nullopt.
  std::optional<ReuseAttempt> take(SessionId session, ExecutionSnapshotVersion snapshot);
  // Drops every attempt of the session, and its revocations; returns how
  // many attempts.
  size_t end_session(SessionId session);

  // A purge of (namespace, generation), 0x0CE step 4: how many attempts of
  // that generation are open, and revoking them. A revoked attempt's
  // leases are the caller's to return; its session's release op for it
  // then answers reuse_receipt_revoked (was_revoked), once.
  size_t count_generation(const std::string& namespace_name, NamespaceGeneration generation) const;
  // Each revoked attempt's leases, under the session that holds them.
  std::vector<std::pair<SessionId, std::vector<LeaseId>>> revoke_generation(const std::string& namespace_name,
                                                                            NamespaceGeneration generation);
  bool was_revoked(SessionId session, ExecutionSnapshotVersion snapshot);

  size_t size() const { return attempts_.size(); }
  // Every held attempt awaits step 9 under the key of its own receipt, and
  // the per-session counts agree with the attempts.
  Status validate() const;

 private:
  std::map<std::pair<uint64_t, uint64_t>, ReuseAttempt> attempts_;  // (session, snapshot) -> attempt
  std::map<uint64_t, size_t> per_session_;
  std::set<std::pair<uint64_t, uint64_t>> revoked_;  // (session, snapshot) revoked by a purge, not yet named
};

}  // namespace kvrt
