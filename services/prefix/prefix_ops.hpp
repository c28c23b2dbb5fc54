#pragma once
// The prefix-index owner's wire operations (issue 5; core: services/prefix).
//
// A lookup names the cache namespace it reads; the node answers it only for a
// principal that the authorization owner granted that namespace at its
// current generation, and checks that before the index sees the tokens
// (0x0CE "Authorization Before Lookup").
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/ids.hpp"
#include "services/common/trace_context.hpp"
#include "services/prefix/prefix_match_receipt.hpp"

namespace kvrt {

struct PrefixMatchOp {
  std::string namespace_name;  // the granted cache namespace
  RequestId request;           // the request the match is for (receipt provenance)
  RequestGeneration request_generation;
  std::vector<TokenId> tokens;  // the prompt, S_prompt tokens
  LogitsPath logits_path = LogitsPath::logits_required;
  friend bool operator==(const PrefixMatchOp&, const PrefixMatchOp&) = default;
};

// Publishes the full blocks [first_block, end_block) of an allocator request
// the same session owns; their rows must be committed (issue 4).
struct PrefixPublishOp {
  std::string namespace_name;
  RequestId request;
  std::vector<TokenId> tokens;  // the request's tokens from position 0
  uint32_t first_block = 0;     // [blocks]
  uint32_t end_block = 0;       // [blocks]
  friend bool operator==(const PrefixPublishOp&, const PrefixPublishOp&) = default;
};

using PrefixOp = std::variant<PrefixMatchOp, PrefixPublishOp>;

struct PrefixPublishReceipt {
  RequestId request;
  uint32_t published = 0;               // (block, group) entries added
  uint32_t duplicates = 0;              // left untagged: the digest was present already
  uint32_t already = 0;                 // already tagged with this digest
  uint64_t publication_generation = 0;  // the index's publication generation after
  friend bool operator==(const PrefixPublishReceipt&, const PrefixPublishReceipt&) = default;
};

using PrefixOutcome = std::variant<Error, PrefixMatchReceipt, PrefixPublishReceipt>;

struct PrefixBatch {
  TraceContext trace;
  std::vector<PrefixOp> ops;
  friend bool operator==(const PrefixBatch&, const PrefixBatch&) = default;
};

struct PrefixBatchReceipt {
  TraceContext trace;
  std::vector<PrefixOutcome> outcomes;  // outcomes[i] answers ops[i]
  friend bool operator==(const PrefixBatchReceipt&, const PrefixBatchReceipt&) = default;
};

}  // namespace kvrt
