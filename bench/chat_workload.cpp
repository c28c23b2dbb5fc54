#include "bench/chat_workload.hpp"

#include <random>

namespace kvrt::bench {

ChatWorkload make_chat_workload(const ChatWorkloadShape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint32_t lo, uint32_t hi) { return lo + static_cast<uint32_t>(rng() % (hi - lo + 1)); };
  auto append_random = [&](std::vector<TokenId>& out, uint32_t n) {
    for (uint32_t k = 0; k < n; ++k) out.push_back(static_cast<TokenId>(rng() % shape.vocabulary));
  };

  std::vector<std::vector<TokenId>> systems(shape.system_prompts);
  for (auto& s : systems) append_random(s, uniform(shape.system_prompt_min, shape.system_prompt_max));

  ChatWorkload w;
  w.requests.reserve(shape.requests);
  for (uint32_t i = 0; i < shape.requests; ++i) {
    ChatRequest r;
    bool continued = false;
    if (!w.requests.empty() && rng() % 100 < shape.continue_percent) {
      const ChatRequest& earlier = w.requests[rng() % w.requests.size()];
      const uint32_t turn = uniform(shape.turn_min, shape.turn_max);
      if (earlier.sequence.size() + turn <= shape.prompt_max) {
        r.sequence = earlier.sequence;  // history: prompt + response
        append_random(r.sequence, turn);
        continued = true;
      }
    }
    if (!continued) {
      const std::vector<TokenId>& system = systems[rng() % systems.size()];
      const uint32_t total = uniform(shape.prompt_min, shape.prompt_max);
      r.sequence = system;
      append_random(r.sequence, total > system.size() + shape.turn_min ? total - static_cast<uint32_t>(system.size())
                                                                       : shape.turn_min);
    }
    r.prompt_len = static_cast<uint32_t>(r.sequence.size());
    append_random(r.sequence, uniform(shape.response_min, shape.response_max));
    w.prompt_tokens += r.prompt_len;
    w.sequence_tokens += r.sequence.size();
    w.requests.push_back(std::move(r));
  }
  return w;
}

}  // namespace kvrt::bench
