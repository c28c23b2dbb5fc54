#pragma once
// What a session receipt says about the node's prefix reuse policy (0x07D).
// A node that names no policy (an older one) serves full blocks only.
#include "schema/session_types.hpp"
#include "services/prefix/prefix_lengths.hpp"

namespace kvrt {

// Under the immutable partial-tail policy a finished request publishes its
// last, partly filled block too (PrefixPublishOp.tail_rows), and a hit that
// ends inside a block is allocated with AllocateOp.copy_tail_rows.
inline bool node_publishes_partial_tails(const SessionReceipt& session) {
  const Result<ReusePolicy> policy = reuse_policy_from_id(session.reuse_policy_id);
  return policy.ok() && *policy == ReusePolicy::immutable_partial_tail;
}

}  // namespace kvrt
