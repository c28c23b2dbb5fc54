#pragma once
// `kvrt replay radix`: drives a RadixTree from a JSON-lines trace as
// docs/replay-format.md specifies (section "radix").
//
// Profiles. `sglang` is SGLang v0.5.11 RadixCache's observable behaviour,
// field for field: page size 1 only; hit counts are never incremented (so
// lfu and slru rank exactly like lru, as in RadixCache); a negative evict
// `n` or trim `max_total` evicts nothing. The kvrt default prints the same
// fields and agrees on every trace the profile accepts, except that it
//   - counts one hit per node a match walks (lfu and slru rank by use),
//   - accepts page_size >= 1, storing and matching only whole pages,
//   - rejects a negative `n` / `max_total` as InvalidValue.
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <unordered_map>

#include "services/common/result.hpp"
#include "services/radix/radix_tree.hpp"
#include "tools/replay/replay_common.hpp"

namespace kvrt {

enum class RadixReplayProfile : uint8_t { kvrt, sglang };
// "sglang" (and "kvrt", the default) -> profile; anything else is an error.
Result<RadixReplayProfile> parse_radix_replay_profile(std::string_view name);

struct RadixReplayOptions {
  RadixReplayProfile profile = RadixReplayProfile::kvrt;
  bool indices = false;  // print the matched slot ids ("indices") for match and lock
};

// The replay state machine: one tree, the slot counter, lock handles.
class RadixReplay {
 public:
  explicit RadixReplay(const RadixReplayOptions& options);

  // Applies one trace op; on error nothing changes.
  replay::OpOutcome apply(const std::string& op, const nlohmann::json& line);

  const RadixTree& tree() const { return tree_; }
  size_t live_handles() const { return handles_.size(); }
  // The tree's own laws, plus: every handle's node is live and the lock
  // counts equal the handles whose path passes through each node (0x08D).
  Status validate() const;

 private:
  struct Handle {
    RadixNodeRef terminal;
    std::vector<int64_t> tokens;  // the lock op's tokens as written (for unlock by tokens)
    uint64_t extra_key = 0;
    uint64_t sequence = 0;  // lock order, for "the most recent lock"
  };

  replay::OpOutcome config(replay::FieldReader& f);
  replay::OpOutcome insert(replay::FieldReader& f);
  replay::OpOutcome match(replay::FieldReader& f);
  replay::OpOutcome lock(replay::FieldReader& f);
  replay::OpOutcome unlock(replay::FieldReader& f);
  replay::OpOutcome evict(replay::FieldReader& f, bool trim);
  replay::OpOutcome reset();
  void append_state(replay::OutFields& out) const;
  uint64_t extra_key_id(const std::optional<std::string>& extra);
  // Trace token values (any 64-bit integer) as dense tree token ids; equal
  // values get equal ids, so every match is the same as on the raw values.
  std::vector<TokenId> token_ids(const std::vector<int64_t>& values);

  RadixReplayOptions options_;
  RadixTree tree_;
  uint64_t next_slot_ = 1;  // slot ids are numbered from 1 over the whole trace
  std::map<std::string, Handle> handles_;
  uint64_t handle_sequence_ = 0;
  uint64_t auto_handles_ = 0;
  std::unordered_map<std::string, uint64_t> extra_keys_;  // extra key -> id >= 1
  std::unordered_map<int64_t, TokenId> token_ids_;        // trace token value -> tree token id
};

// Runs a whole trace: one output line per op line.
replay::ReplaySummary run_radix_replay(std::istream& in, std::ostream& out, const RadixReplayOptions& options);

}  // namespace kvrt
