#pragma once
// SessionHoldings: which worker session owns each object an owner handed out
// ("Worker death"). An owner's actor records a holding when a
// receipt creates one and forgets it when a receipt ends it; a session may
// act only on what it holds; when the session ends (the worker disconnected,
// was killed or hung past its heartbeat) the owner ends every remaining
// holding through its normal operations.
//
// Session 0 is the node itself (owner-to-owner calls, e.g. the prefix index
// reading a table to publish it): it may act on any object.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/result.hpp"

namespace kvrt {

inline constexpr SessionId kNodeSession{0};

template <class ObjectKey>
class SessionHoldings {
 public:
  // `kind` names the object in errors ("request", "lease").
  explicit SessionHoldings(std::string kind) : kind_(std::move(kind)) {}

  void record(SessionId session, ObjectKey key) {
    owner_[key] = session;
    by_session_[session.value].insert(key);
  }
  void forget(ObjectKey key) {
    const auto it = owner_.find(key);
    if (it == owner_.end()) return;
    const auto s = by_session_.find(it->second.value);
    if (s != by_session_.end()) {
      s->second.erase(key);
      if (s->second.empty()) by_session_.erase(s);
    }
    owner_.erase(it);
  }
  // Ok when `session` may act on `key`: it holds it, or it is the node. An
  // unknown key passes through to the owner core, which answers its own
  // typed error (stale id, unknown request) without disclosing ownership.
  Status check(SessionId session, ObjectKey key, const char* field) const {
    if (session == kNodeSession) return Status::success();
    const auto it = owner_.find(key);
    if (it == owner_.end() || it->second == session) return Status::success();
    return make_error(ErrorCode::not_owner, kind_ + " " + std::to_string(key) + " belongs to another session", field);
  }
  std::vector<ObjectKey> held_by(SessionId session) const {
    const auto s = by_session_.find(session.value);
    if (s == by_session_.end()) return {};
    return std::vector<ObjectKey>(s->second.begin(), s->second.end());
  }
  bool holds_any(SessionId session) const { return by_session_.contains(session.value); }
  std::vector<ObjectKey> keys() const {
    std::vector<ObjectKey> out;
    out.reserve(owner_.size());
    for (const auto& [key, session] : owner_) out.push_back(key);
    return out;
  }
  size_t size() const { return owner_.size(); }
  size_t sessions() const { return by_session_.size(); }

  // Every key is held by exactly the session that indexes it.
  Status validate() const {
    size_t n = 0;
    for (const auto& [session, keys] : by_session_) {
      if (keys.empty())
        return make_error(ErrorCode::invariant_violated, kind_ + " holdings keep an empty session entry");
      for (const ObjectKey& k : keys) {
        const auto it = owner_.find(k);
        if (it == owner_.end() || it->second.value != session)
          return make_error(ErrorCode::invariant_violated,
                            kind_ + " " + std::to_string(k) + " is indexed under the wrong session");
      }
      n += keys.size();
    }
    if (n != owner_.size())
      return make_error(ErrorCode::invariant_violated, kind_ + " holdings disagree between indexes");
    return Status::success();
  }

 private:
  std::string kind_;
  std::map<ObjectKey, SessionId> owner_;
  std::map<uint64_t, std::set<ObjectKey>> by_session_;
};

}  // namespace kvrt
