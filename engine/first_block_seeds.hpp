#pragma once
// Cache-aware admission, as both engine loops do it: while no request of
// this worker has yet started with a given first block (namespace, first P
// tokens), only one such request is admitted per round (one scheduler
// iteration); the others wait a round and then find its published prefix
// instead of computing the same rows side by side (SGLang's in-batch prefix
// deduplication).
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "services/common/ids.hpp"

namespace kvrt::engine {

class FirstBlockSeeds {
 public:
  // Whether a prompt of `namespace_name` waits this round: another prompt
  // with its first block of `block_tokens` tokens was admitted in this round
  // and none before it. A prompt of at most one block never waits.
  bool defers(const std::string& namespace_name, const std::vector<TokenId>& prompt, uint32_t block_tokens) {
    if (prompt.size() <= block_tokens) return false;
    Key key{namespace_name, std::vector<TokenId>(prompt.begin(), prompt.begin() + block_tokens)};
    return !seeded_.contains(key) && !round_.insert(std::move(key)).second;
  }
  // The round's first blocks count as started from now on.
  void end_round() {
    seeded_.insert(round_.begin(), round_.end());
    round_.clear();
  }
  // Forgets every seed (a new grant generation: the old rows seed nothing).
  void clear() {
    seeded_.clear();
    round_.clear();
  }

 private:
  using Key = std::pair<std::string, std::vector<TokenId>>;  // (namespace, first P tokens)
  std::set<Key> seeded_, round_;
};

}  // namespace kvrt::engine
