#pragma once
// `kvrt replay prefix`: drives a PrefixIndex over a BlockAllocator from a
// JSON-lines trace as docs/replay-format.md specifies (section "prefix").
//
// Profiles. `vllm` is vLLM v0.23.0's v1 prefix cache, field for field: one
// free queue holding free and zero-ref cached blocks in release order
// (FreeQueuePolicy::single_lru_queue), no de-duplication of published blocks,
// no collision witness. The kvrt default prints the same fields and follows
// the same admission, hit and publication rules, except that
//   - allocation takes truly free blocks before evicting a cached one
//     (FreeQueuePolicy::free_first_then_oldest_evictable), so cached
//     prefixes survive while uncached capacity remains;
//   - a full block whose digest is already indexed is not tagged again: the
//     duplicate returns to the free pool at release (cached == hash_keys);
//   - the 0x07F token witness is on.
//
// Choices where FORMAT.md is silent (both profiles):
//   - config fields default to block_size 16 and num_blocks 64, and the
//     replay starts with that configuration;
//   - a prompt longer than max_model_len is not admitted (vLLM rejects it
//     before scheduling); decode stops at max_model_len tokens, so `decoded`
//     counts the tokens accepted and the request keeps running;
//   - an empty `tokens` list is an InvalidValue error (a logits-producing
//     request needs S_prompt >= 1, spec 0x07A); so is a `request` whose id is
//     already running;
//   - a preempted decode prints no `block_ids` (the request holds none), as
//     a request that is not admitted;
//   - "" as salt or lora is the same as absent (vLLM tests truthiness).
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/common/result.hpp"
#include "services/prefix/prefix_index.hpp"
#include "tools/replay/replay_common.hpp"

namespace kvrt {

enum class PrefixReplayProfile : uint8_t { kvrt, vllm };
// "vllm" (and "kvrt", the default) -> profile; anything else is an error.
Result<PrefixReplayProfile> parse_prefix_replay_profile(std::string_view name);

struct PrefixReplayOptions {
  PrefixReplayProfile profile = PrefixReplayProfile::kvrt;
  bool ids = true;  // print block_ids (--no-ids turns them off)
};

// The state fields printed after every op (FORMAT.md).
struct PrefixReplayState {
  uint64_t free = 0;       // free-queue length, cached free blocks included [blocks]
  uint64_t cached = 0;     // blocks with a hash, in use or not [blocks]
  uint64_t evictable = 0;  // cached blocks with no user [blocks]
  uint64_t hash_keys = 0;  // distinct hashes indexed
  uint64_t running = 0;    // admitted requests not yet freed or preempted
};

class PrefixReplay {
 public:
  explicit PrefixReplay(const PrefixReplayOptions& options);

  // Applies one trace op; on error nothing changes.
  replay::OpOutcome apply(const std::string& op, const nlohmann::json& line);

  PrefixReplayState state() const;
  bool running(const std::string& id) const { return running_.count(id) != 0; }
  uint32_t block_size() const { return block_size_; }
  uint32_t usable_blocks() const { return num_blocks_ - 1; }
  const BlockAllocator& allocator() const { return *allocator_; }
  const PrefixIndex& index() const { return *index_; }
  // Allocator and index laws, the weak identities agreeing both ways, and the
  // replay's own ledger: every running request's context equals its tokens,
  // free + in-use blocks == usable blocks, evictable <= cached, evictable <= free.
  Status validate() const;

 private:
  struct Running {
    RequestId allocator_id;
    std::vector<TokenId> tokens;  // prompt + decoded
    uint32_t prompt_tokens = 0;
    BlockExtrasPlan extras;
    std::vector<BlockHash> hashes;  // full-block chain so far (vLLM request.block_hashes)
  };

  // A new empty cache (FORMAT.md config); false with `error` set when the
  // values are out of range.
  bool configure(uint32_t block_size, uint32_t num_blocks, uint32_t max_model_len, replay::ReplayError& error);
  replay::OpOutcome config(replay::FieldReader& f);
  replay::OpOutcome request(replay::FieldReader& f);
  replay::OpOutcome decode(replay::FieldReader& f);
  replay::OpOutcome free_request(replay::FieldReader& f);
  replay::OpOutcome probe(replay::FieldReader& f);
  replay::OpOutcome reset();
  void append_state(replay::OutFields& out) const;
  void absorb_evictions();
  nlohmann::ordered_json block_ids(RequestId id) const;
  // Trace token values (any 64-bit integer) as dense 32-bit ids; equal values
  // get equal ids, so every hash comparison is the same as on the raw values.
  std::vector<TokenId> token_ids(const std::vector<int64_t>& values);
  BlockExtrasPlan extras_plan(const std::optional<std::string>& salt, const std::optional<std::string>& lora) const;
  // Full blocks of `tokens` that hit, capped at floor((len - 1) / P) (the logits cap).
  uint32_t hit_blocks(const std::vector<TokenId>& tokens, const std::vector<BlockHash>& hashes,
                      std::vector<PhysicalBlockHandle>* handles) const;

  PrefixReplayOptions options_;
  uint32_t block_size_ = 16;
  uint32_t num_blocks_ = 64;
  uint32_t max_model_len_ = 16 * 64;
  std::optional<BlockAllocator> allocator_;
  std::optional<PrefixIndex> index_;
  std::optional<PrefixScope> scope_;
  std::map<std::string, Running> running_;
  std::unordered_map<int64_t, TokenId> token_ids_;
};

// Runs a whole trace: one output line per op line.
replay::ReplaySummary run_prefix_replay(std::istream& in, std::ostream& out, const PrefixReplayOptions& options);

}  // namespace kvrt
