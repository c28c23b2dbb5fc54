// Greedy and ranked token choice over a row of logits. One order
// serves both: a larger logit first, the lower token id on a tie, and a NaN
// after every number (a NaN logit never wins over a real one), so
// greedy_token(l) == ranked_tokens(l, 1)[0] and the choice is a pure
// function of the logits' bits.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/model/reference_model.hpp"
#include "services/common/assert.hpp"

namespace kvrt::model {
namespace {

// Strict weak order "token a ranks before token b".
struct RanksBefore {
  std::span<const float> logits;
  bool operator()(uint32_t a, uint32_t b) const {
    const float x = logits[a], y = logits[b];
    const bool x_nan = std::isnan(x), y_nan = std::isnan(y);
    if (x_nan != y_nan) return y_nan;
    if (!x_nan && x != y) return x > y;
    return a < b;
  }
};

}  // namespace

TokenId greedy_token(std::span<const float> logits) {
  KVRT_ASSERT(!logits.empty(), "greedy_token of an empty logit row (the model's vocab is at least 1)");
  const RanksBefore before{logits};
  uint32_t best = 0;
  for (uint32_t t = 1; t < logits.size(); ++t)
    if (before(t, best)) best = t;
  return static_cast<TokenId>(best);
}

std::vector<TokenId> ranked_tokens(std::span<const float> logits, uint32_t k) {
  const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(k, logits.size()));
  std::vector<uint32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0u);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), RanksBefore{logits});
  return std::vector<TokenId>(ids.begin(), ids.begin() + n);
}

}  // namespace kvrt::model
