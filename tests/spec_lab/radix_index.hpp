#pragma once
// RadixIndex: the radix index owner of spec 0x08 (docs/architecture.md "radix index"):
// the tree, the token-slot pool partition it is accountable for (0x08A), the
// lock leases that protect paths (0x08D), the tree version, and the receipts
// that cross its boundary (RadixMutationReceipt, RadixHandoffLabReceipt).
//
// Every public transition either commits a complete successor — version + 1,
// a receipt naming the predecessor and successor digests — or returns a typed
// error and leaves the state digest, version and every ledger unchanged
// (0x04F). It proposes facts; it never schedules (0x08G).
//
// Leases. A lease is one lock reference on the path root -> terminal, held by
// one request generation. Request leases belong to running requests (0x08C);
// handoff leases back a RadixHandoffLabReceipt until M5.2 disposes of it
// by release() or admit_handoff() (exchange for a request lease). Leases are
// named by LeaseId, not by in-process handles, because they cross process
// boundaries as receipt fields (docs/architecture.md: versions and leases, never shared
// pointers).
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "services/common/digest.hpp"
#include "services/radix/radix_tree.hpp"
#include "tests/spec_lab/radix_handoff_receipt.hpp"
#include "tests/spec_lab/radix_mutation_receipt.hpp"
#include "tests/spec_lab/token_slot_pool.hpp"

namespace kvrt {

struct RadixIndexConfig {
  uint32_t pool_slots = 0;  // |Ω| [slots]
  RadixOptions tree;
  uint64_t row_bytes = 0;  // B_row of one token's K/V rows, for 0x08G estimates [bytes]
};

struct RadixRequestRef {
  RequestId id;
  RequestGeneration generation;
  friend bool operator==(const RadixRequestRef&, const RadixRequestRef&) = default;
};

struct RadixLookupArgs {
  RadixRequestRef request;
  std::vector<TokenId> tokens;
  uint64_t extra_key = 0;
};

enum class RadixPublication : uint8_t { finished, unfinished };

// 0x08C publication. The request's committed sequence is `tokens`; its lease
// (if any) already protects tokens[0:protected_len] in the tree, and
// `append_slots` hold tokens[protected_len:] (each free, or private to this
// request). Finished: the lease ends. Unfinished: the lease moves to the node
// that now ends at tokens.size().
struct RadixPublishArgs {
  RadixRequestRef request;
  RadixPublication publication = RadixPublication::finished;
  std::vector<TokenId> tokens;            // page aligned [tokens]
  std::vector<TokenSlotId> append_slots;  // one per token of tokens[protected_len:]
  uint64_t extra_key = 0;
  int64_t priority = 0;
  std::optional<LeaseId> lease;  // the request's request lease
};

struct RadixHandoffArgs {
  RadixRequestRef request;
  std::vector<TokenId> prompt;  // S_prompt tokens
  uint64_t extra_key = 0;
  uint32_t free_private_tail_slots = 0;  // writable rows the request already owns [rows]
};

struct RadixHandoff {
  RadixMutationReceipt mutation;
  RadixHandoffLabReceipt receipt;
};

enum class RadixLeaseKind : uint8_t { request, handoff };

struct RadixLease {
  LeaseId id;
  RadixRequestRef request;
  RadixLeaseKind kind = RadixLeaseKind::request;
  RadixNodeRef terminal;  // lock reference sits on root -> terminal
  uint32_t matched = 0;   // path length [tokens]
  uint64_t extra_key = 0;
  TreeVersion granted_at;
};

// Totals across the index's life (0x08F trace totals).
struct RadixCounters {
  uint64_t committed = 0;
  uint64_t splits = 0;
  uint64_t duplicate_slots_released = 0;
  uint64_t eviction_calls = 0;
  uint64_t evicted_edges = 0;
  uint64_t evicted_slots = 0;
};

class RadixIndex {
 public:
  static Result<RadixIndex> create(const RadixIndexConfig& config);

  Result<RadixMutationReceipt> probe(const RadixLookupArgs& args);
  Result<RadixMutationReceipt> acquire(const RadixLookupArgs& args);
  Result<RadixHandoff> handoff(const RadixHandoffArgs& args);
  Result<RadixMutationReceipt> publish(const RadixPublishArgs& args);
  Result<RadixMutationReceipt> release(LeaseId lease);
  // Checks a handoff receipt against the committed state without changing it.
  Status verify_handoff(const RadixHandoffLabReceipt& receipt) const;
  // M5.2 admits the request: the handoff lease becomes a request lease on the
  // same path, with no instant at which the path is unprotected.
  Result<RadixMutationReceipt> admit_handoff(const RadixHandoffLabReceipt& receipt);
  Result<RadixMutationReceipt> reserve(RadixRequestRef request, uint32_t slots);
  Result<RadixMutationReceipt> release_private(RadixRequestRef request, std::span<const TokenSlotId> slots);
  Result<RadixMutationReceipt> evict(uint64_t target_tokens);
  Result<RadixMutationReceipt> evict_leaf(RadixNodeId node);

  TreeVersion version() const { return version_; }
  StateDigest state_digest() const;
  // SHA-256 naming the committed state: (version, state digest). Carried by
  // handoff receipts as tree_state_sha256.
  Sha256Digest state_sha256() const;
  const RadixTree& tree() const { return tree_; }
  const TokenSlotPool& pool() const { return pool_; }
  const RadixLease* lease(LeaseId id) const;
  size_t lease_count() const { return leases_.size(); }
  const RadixCounters& counters() const { return counters_; }
  uint64_t row_bytes() const { return row_bytes_; }

  // Re-derives: the tree's own laws; the pool partition T + R + F = Ω with T
  // exactly the slots on the tree's edges (each token of a tree edge recorded
  // at its depth); lock(v) = leases whose path contains v; total tokens = |T|.
  Status validate() const;

 private:
  RadixIndex(RadixTree tree, uint32_t pool_slots, uint64_t row_bytes);
  RadixMutationReceipt begin(RadixMutationKind kind, RadixRequestRef request) const;
  void commit(RadixMutationReceipt& receipt);
  Status check_lease(LeaseId id, RadixRequestRef request, RadixLeaseKind kind) const;
  void fill_match(RadixMutationReceipt& receipt, const RadixMatchResult& match);
  LeaseId grant(RadixRequestRef request, RadixLeaseKind kind, const RadixMatchResult& match, uint64_t extra_key,
                RadixMutationReceipt& receipt);
  MultisetDigest::Entry lease_entry(const RadixLease& lease) const;
  void account_eviction(RadixMutationReceipt& receipt);

  RadixTree tree_;
  TokenSlotPool pool_;
  uint64_t row_bytes_ = 0;
  std::map<uint64_t, RadixLease> leases_;  // by LeaseId value
  MultisetDigest lease_digest_;
  TreeVersion version_{0};
  uint64_t next_lease_ = 1;
  RadixCounters counters_;
};

}  // namespace kvrt
