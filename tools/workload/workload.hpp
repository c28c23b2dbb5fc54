#pragma once
// Workloads of `kvrt run` (config/workloads/*.toml): the request
// shapes a serving node sees, each with sizes and seeds, expanded into a
// deterministic list of jobs that the run's workers replay as engine loops.
//
//   chat           multi-turn conversations over shared system prompts: turn
//                  k's prompt is the system prompt, every earlier user turn
//                  and generated answer, and user turn k (radix / hash-chain
//                  reuse of the whole history);
//   few_shot       many questions behind one shared few-shot prefix;
//   fork           parallel sampling / beam-style forks: one prompt, B
//                  branches forked copy-on-write after the prefill (0x05C);
//   long_document  many questions over one long document: the shared-prefix
//                  execution workload (0x0B);
//   templated      prompts written against a prompt schema (Prompt Cache,
//                  0x0CB): a system module, a tool-spec module and a
//                  document module with parameters, free text (a name, the
//                  question) in the schema's gaps, at declared positions;
// and tenants: every job names the namespace ("deployment/tenant") it runs
// in, so identical prompts of different tenants never share K/V (0x0CE).
//
// Token ids are drawn in [0, vocab) from the workload seed only: the same
// file always expands to the same jobs, whatever the worker count.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt::workload {

enum class JobKind : uint8_t { chat = 0, few_shot = 1, fork = 2, long_document = 3, templated = 4 };
std::string_view to_string(JobKind k);

struct TenantSpec {
  std::string namespace_name;       // "deployment/tenant"
  std::optional<std::string> salt;  // absent: the node draws one
  std::string publication_policy = "tenant_shared";
  // The namespace's block quota on the run's node (node config
  // [[namespace]] quota_blocks); absent: none.
  std::optional<uint32_t> quota_blocks{};
};

struct Turn {
  std::vector<TokenId> user_tokens;  // appended after the history [tokens]
  uint32_t decode_tokens = 0;        // generated after this turn's prompt [tokens]
};

// A templated job's prompt (0x0CB): its items in declared position order,
// the last one the question (free text). Their tokens, in that order, are
// the job's prefix then its turn's user tokens.
struct TemplatedItem {
  std::string module_id;  // empty: free text
  std::map<std::string, std::string> parameters;
  std::vector<TokenId> tokens;
  uint32_t position_begin = 0;  // declared position of its first token [positions]
};
struct TemplatedPrompt {
  uint32_t schema = 0;  // index into Workload::schemas
  std::vector<TemplatedItem> items;
};

// A prompt schema the run registers with the node for a namespace (the
// TOML of services/prompt/prompt_schema.hpp).
struct TemplatedSchema {
  std::string namespace_name;
  std::string schema_id;
  uint64_t generation = 1;
  std::string toml;
};

struct Job {
  uint64_t id = 0;  // dense, 0..jobs-1, in generation order
  JobKind kind = JobKind::chat;
  std::string namespace_name;
  uint32_t shared_prefix_id = 0;  // which system prompt / few-shot prefix / document (per kind)
  std::vector<TokenId> prefix;    // the shared part [tokens]
  // chat: turns of one conversation, in order (history carries over);
  // few_shot / long_document: independent questions, each one request over
  //   `prefix` (a long_document job's questions are meant to run together);
  // fork: exactly one turn, run as `branches` forked requests.
  std::vector<Turn> turns;
  uint32_t branches = 1;                     // fork only [requests]
  std::optional<TemplatedPrompt> templated;  // templated only
};

struct Workload {
  std::string name;
  std::string origin;  // the file it came from
  uint64_t seed = 0;
  uint32_t vocab = 0;  // [tokens]; must equal the model's vocab
  std::vector<TenantSpec> tenants;
  std::vector<Job> jobs;
  std::vector<TemplatedSchema> schemas;  // of the templated jobs

  // Requests the jobs make: chat turns, questions, fork branches [requests].
  uint64_t request_count() const;
  // Prompt plus generated tokens over every request [tokens].
  uint64_t requested_tokens() const;
  // The longest context any request reaches (prompt + decode) [tokens]: the
  // T_max of the rectangular reservation baseline (0x02).
  uint32_t max_context_tokens() const;
};

// Parses a workload file. Every error names the file, line and field
// (config_parse / config_field): unknown keys, sizes out of
// range (the ranges are documented in config/workloads/default-mix.toml), a
// job naming an undeclared tenant, a [min, max] pair with min > max, an empty
// workload. Nothing is generated on error.
Result<Workload> load_workload(const std::string& path);
Result<Workload> parse_workload(std::string_view text, const std::string& origin);

// Jobs of worker w of n (w < n): job i goes to worker i mod n, except that a
// fork or long_document job stays whole on one worker. Deterministic.
std::vector<const Job*> jobs_for_worker(const Workload& workload, uint32_t worker, uint32_t workers);

// Jobs of worker w of n when each worker serves one tenant (a node with
// pools per trust domain, where a principal maps one domain's pools):
// worker w serves tenant w mod T, and that tenant's jobs, in generation
// order, go round-robin to its workers (w, w + T, ...). Every job goes to
// exactly one worker when n >= T; a tenant without a worker (n < T) keeps
// its jobs unserved, which the caller refuses beforehand. Deterministic.
std::vector<const Job*> jobs_for_tenant_worker(const Workload& workload, uint32_t worker, uint32_t workers);
// The tenant a worker serves under that rule (index into workload.tenants).
uint32_t tenant_of_worker(const Workload& workload, uint32_t worker);

}  // namespace kvrt::workload
