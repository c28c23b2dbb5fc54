#pragma once
// Private to services/workload: a workload file as parsed and checked, before
// any token is drawn. parse_workload_spec() enforces every range and bound
// below, so generate_workload() can neither fail nor exhaust memory. The
// ranges are documented for users at the top of config/workloads/default-mix.toml;
// keep the two in step.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt {
class TomlReader;
}

namespace kvrt::workload {

// Limits that keep a typo from exhausting memory or time.
inline constexpr int64_t kMinVocab = 2;                        // [tokens]
inline constexpr int64_t kMaxVocab = 65536;                    // [tokens]
inline constexpr int64_t kDefaultVocab = 256;                  // [tokens]
inline constexpr int64_t kMaxSegmentTokens = 16384;            // one prefix, prompt, user turn or question [tokens]
inline constexpr int64_t kMaxDecodeTokens = 4096;              // generated per request [tokens]
inline constexpr int64_t kMaxContextTokens = 65536;            // longest context one request may reach [tokens]
inline constexpr int64_t kMaxJobs = 100000;                    // whole workload [jobs]
inline constexpr int64_t kMaxRequests = 1000000;               // whole workload [requests]
inline constexpr int64_t kMaxStoredTokens = int64_t{1} << 24;  // token ids held by all jobs (64 MiB) [tokens]
inline constexpr int64_t kMaxTurns = 64;                       // chat turns per conversation
inline constexpr int64_t kMaxSharedPrefixes = 1024;            // system prompts / prefixes / documents per table
inline constexpr int64_t kMaxDocumentQuestions = 1024;         // questions per long document
inline constexpr int64_t kMinBranches = 2;                     // a fork of one branch is no fork [requests]
inline constexpr int64_t kMaxBranches = 16;                    // [requests]
inline constexpr size_t kMaxNameLength = 128;                  // workload name, namespace [characters]

// A length drawn uniformly in [min, max] [tokens].
struct TokenRange {
  uint32_t min = 0;
  uint32_t max = 0;
};

// [[chat]]: `conversations` jobs of `turns` turns; conversation c runs over
// system prompt c mod system_prompts.
struct ChatTable {
  uint32_t tenant = 0;  // index into WorkloadSpec::tenants
  uint32_t conversations = 0;
  uint32_t system_prompts = 0;
  uint32_t system_prompt_tokens = 0;
  uint32_t turns = 0;
  TokenRange user_tokens;
  uint32_t decode_tokens = 0;
};

// [[few_shot]]: `prefixes` shared prefixes, `questions` one-turn jobs behind each.
struct FewShotTable {
  uint32_t tenant = 0;
  uint32_t prefixes = 0;
  uint32_t prefix_tokens = 0;
  uint32_t questions = 0;  // per prefix
  TokenRange question_tokens;
  uint32_t decode_tokens = 0;
};

// [[fork]]: `prompts` jobs, each one prompt decoded by `branches` forks.
struct ForkTable {
  uint32_t tenant = 0;
  uint32_t prompts = 0;
  TokenRange prompt_tokens;
  uint32_t branches = 0;
  uint32_t decode_tokens = 0;
};

// [[long_document]]: `documents` jobs, each one document and its questions.
struct LongDocumentTable {
  uint32_t tenant = 0;
  uint32_t documents = 0;
  uint32_t document_tokens = 0;
  uint32_t system_prompt_tokens = 0;  // opening every document of the table; 0 = none [tokens]
  uint32_t questions = 0;             // per document
  TokenRange question_tokens;
  uint32_t decode_tokens = 0;
};

// [[templated]]: `prompts` jobs written against one prompt schema (0x0CB).
// The schema declares, in position order: "system" [0, S); a gap of
// name_tokens.max positions for free text (a user name); "tools" with
// parameter "toolset" (T tokens); "document" with parameter "doc_id" (D
// tokens); then, after a gap of kTemplatedQuestionGap positions, the
// question. Each prompt draws its toolset, document, name and question.
// The last `revised_prompts` prompts are written against generation 2 of
// the schema, which moves "document" (and the question) kTemplatedRevisionShift
// positions later: a schema revision during serving, whose prompts find the
// modules stored under generation 1 at the old positions (misses of S and Pi).
struct TemplatedTable {
  uint32_t tenant = 0;
  uint32_t prompts = 0;
  uint32_t system_tokens = 0;
  uint32_t tool_tokens = 0;
  uint32_t toolsets = 0;
  uint32_t documents = 0;
  uint32_t document_tokens = 0;
  TokenRange name_tokens;
  TokenRange question_tokens;
  uint32_t decode_tokens = 0;
  uint32_t revised_prompts = 0;  // 0..prompts
};
inline constexpr uint32_t kTemplatedQuestionGap = 16;    // declared positions left free before the question
inline constexpr uint32_t kTemplatedRevisionShift = 32;  // positions generation 2 moves the document by

struct WorkloadSpec {
  std::string name;
  std::string origin;
  uint64_t seed = 0;
  uint32_t vocab = 0;
  std::vector<TenantSpec> tenants;
  std::vector<ChatTable> chats;
  std::vector<FewShotTable> few_shots;
  std::vector<ForkTable> forks;
  std::vector<LongDocumentTable> long_documents;
  std::vector<TemplatedTable> templated;
};

// Reads and checks every field (workload_parse.cpp). Errors are config_parse
// or config_field and name file:line:column and the dotted field.
Result<WorkloadSpec> parse_workload_spec(const TomlReader& reader);

// Draws the jobs (workload_generate.cpp). Total: the spec is already checked.
Workload generate_workload(const WorkloadSpec& spec);

}  // namespace kvrt::workload
