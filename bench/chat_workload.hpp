#pragma once
// A generated chat workload for `kvrt bench index`: requests share
// a few system prompts, prompts are 1-4K tokens, and about half of the
// requests continue an earlier conversation (its prompt + response + a new
// user turn), so prefixes are reused both across users (system prompt) and
// within a conversation (history). Deterministic for a seed.
#include <cstdint>
#include <span>
#include <vector>

#include "services/radix/radix_options.hpp"

namespace kvrt::bench {

struct ChatWorkloadShape {
  uint32_t requests = 4000;
  uint32_t system_prompts = 16;
  uint32_t system_prompt_min = 256, system_prompt_max = 1024;  // [tokens]
  uint32_t prompt_min = 1024, prompt_max = 4096;               // [tokens]
  uint32_t turn_min = 64, turn_max = 512;                      // follow-up user turn [tokens]
  uint32_t response_min = 32, response_max = 256;              // generated tokens [tokens]
  uint32_t continue_percent = 50;                              // requests that extend a conversation
  uint32_t vocabulary = 32000;
};

struct ChatRequest {
  uint32_t prompt_len = 0;        // prompt = sequence[0:prompt_len] [tokens]
  std::vector<TokenId> sequence;  // prompt + generated response, as cached after the request
  std::span<const TokenId> prompt() const { return {sequence.data(), prompt_len}; }
};

struct ChatWorkload {
  std::vector<ChatRequest> requests;
  uint64_t prompt_tokens = 0;    // sum of prompt lengths [tokens]
  uint64_t sequence_tokens = 0;  // sum of cached sequence lengths [tokens]
};

ChatWorkload make_chat_workload(const ChatWorkloadShape& shape, uint64_t seed);

}  // namespace kvrt::bench
