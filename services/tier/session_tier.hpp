#pragma once
// SessionTier: the secondary tier of CachedAttention (spec 0x0CC) for a CPU
// node: inactive sessions' histories as files on local disk, under a byte
// budget.
//
//   demote   a session went inactive: its history [0, H) (tokens and every
//            cache group's rows) is saved under its full identity, replacing
//            an older save of the same session. The answer is the
//            SessionReuseReceipt of 0x0CC: what the rows are, not where.
//   resume   the session's next turn: the identity it runs under now and
//            its whole prompt. The object is found by (tenant, namespace,
//            session); then the identity is compared field by field
//            (namespace generation, semantic digest,
//            layout digest, position contract), the saved tokens must be a
//            proper prefix of the prompt (the last prompt token is always
//            computed, 0x07A), and the object must read back complete. Then
//            the receipt (resume_prefill_tokens = U) and the rows; otherwise
//            a refusal naming the first field that differs, and the turn
//            recomputes [0, H + U). An object that fails to read back is
//            dropped.
//   retire   a namespace moved to generation g (a weights update, a purge's
//            last step, 0x0CE step 6): every object saved under an older
//            generation is deleted.
//
// The tier starts empty: objects a previous owner left in the directory
// are removed at open (nothing of the cache survives a restart, by design).
// Over its budget, a save evicts the least recently used objects first; an
// object larger than the whole budget is not saved (a typed refusal).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "schema/reuse_types.hpp"
#include "services/common/result.hpp"
#include "services/tier/session_history.hpp"

namespace kvrt {

struct SessionTierConfig {
  std::string directory;      // created if missing; kvrt's object files in it are the tier's
  uint64_t budget_bytes = 0;  // bytes of saved objects kept at most, > 0
};

// A resume that may use the saved rows.
struct SessionResume {
  SessionReuseReceipt receipt;
  std::vector<std::vector<uint8_t>> group_rows;  // per cache group: H rows, canonical order
};
struct SessionResumeRefused {
  SessionTierRefusal refusal = SessionTierRefusal::no_saved_history;
  std::string detail;  // the field and both values' short forms; never tokens
};
using SessionResumeAnswer = std::variant<SessionResume, SessionResumeRefused>;

struct SessionTierStats {
  uint64_t objects = 0, bytes = 0;                     // held now [objects], [bytes]
  uint64_t demotions = 0, demoted_bytes = 0;           // saves since open
  uint64_t resumes = 0, resumed_rows = 0;              // resumes that may use the rows; rows they cover
  uint64_t refusals = 0;                               // resumes refused, any reason
  uint64_t refused_by[kSessionTierRefusalCount] = {};  // by SessionTierRefusal
  uint64_t evicted = 0, retired = 0;                   // objects removed by the budget, by retire()
};

class SessionTier {
 public:
  // Errors: invalid_argument (no directory, budget 0), io (the directory
  // cannot be created or cleaned).
  static Result<SessionTier> open(const SessionTierConfig& config);

  // Errors: invalid_argument (no tokens, no groups, a group whose bytes are
  // not H rows of one size, an object larger than the budget), io. On an
  // error the tier is unchanged (an older save of the session stays).
  Result<SessionReuseReceipt> demote(const SessionHistory& history);
  SessionResumeAnswer resume(const SessionHistoryIdentity& now, std::span<const TokenId> prompt);
  // Objects of `namespace_id` saved under a generation below `current`; returns how many left.
  uint64_t retire(const std::string& namespace_id, NamespaceGeneration current);

  SessionTierStats stats() const;
  // The index against the directory: every object's file exists with the
  // recorded size, no other object file is there, the byte total is the
  // sum and within the budget.
  Status validate() const;

 private:
  struct ObjectRecord {
    SessionHistoryIdentity identity;
    uint64_t history_tokens = 0;  // H
    uint64_t bytes = 0;           // the file's size
    std::string file;             // name inside the directory: the object id
    uint64_t publication_generation = 0;
    uint64_t last_use = 0;
    Sha256Digest tokens_digest;
  };
  explicit SessionTier(SessionTierConfig config) : config_(std::move(config)) {}
  static std::string key_of(const SessionHistoryIdentity& id);
  std::string path_of(const std::string& file) const;
  void remove(std::map<std::string, ObjectRecord>::iterator it);
  SessionResumeAnswer refuse(SessionTierRefusal r, std::string detail);

  SessionTierConfig config_;
  std::map<std::string, ObjectRecord> objects_;  // by key_of(identity)
  uint64_t bytes_ = 0;
  uint64_t clock_ = 0;         // last_use stamps
  uint64_t publications_ = 0;  // publication generation of the last save
  SessionTierStats stats_;
};

// The receipt's SHA-256 of the covered token ids (as the reuse transaction
// computes it, services/reuse/reuse_evidence.hpp).
Sha256Digest session_tokens_digest(std::span<const TokenId> tokens);

}  // namespace kvrt
