// Expands a checked WorkloadSpec into jobs. Every token id comes from a
// splitmix64 stream keyed by the workload seed (std:: distributions are
// implementation-defined, so they would make the same file expand differently
// on another standard library).
//
// Stream keys: a table's tokens are drawn from streams keyed by
//   (workload seed, kind, every size of the table, repeat)
// where `repeat` counts earlier tables of the same tenant with exactly the
// same kind and sizes. The tenant's name is NOT part of the key, so two
// tenants declaring identical tables get identical system prompts, prefixes,
// documents and questions: the run can then show that identical tokens in two
// namespaces never share K/V (spec 0x0CE). Within one tenant a repeated table
// is a fresh draw. Within a table each shared prefix and each job has its own
// sub-stream, so one prefix's tokens do not depend on how many jobs use it.
#include <algorithm>
#include <initializer_list>
#include <map>
#include <span>
#include <utility>

#include "services/common/splitmix64.hpp"
#include "tools/workload/workload_spec.hpp"

namespace kvrt::workload {
namespace {

// Folds `parts` into one 64-bit stream key, one splitmix64 step per part.
uint64_t stream_key(uint64_t base, std::initializer_list<uint64_t> parts) {
  uint64_t h = base;
  for (uint64_t p : parts) h = splitmix64(h ^ p);
  return h;
}

// Domains under the workload seed: every table's streams, and the job order.
constexpr uint64_t kTableDomain = 0x7461626c65ull;  // "table"
constexpr uint64_t kOrderDomain = 0x6f72646572ull;  // "order"
// Sub-stream labels inside one table.
constexpr uint64_t kPrefixStream = 1;  // shared prefix / fork prompt / document p
constexpr uint64_t kJobStream = 2;     // a job's own turns or questions
constexpr uint64_t kSystemStream = 3;  // a long_document or templated table's system prompt
constexpr uint64_t kToolStream = 4;    // a templated table's tool-spec variant

class TokenStream {
 public:
  explicit TokenStream(uint64_t key) : stream_{key} {}

  uint64_t next() { return stream_.next(); }
  // Uniform in [0, n) by multiply-high (Lemire); the bias, n / 2^64, is nil for n <= 2^32.
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  uint32_t between(TokenRange r) { return r.min + below(r.max - r.min + 1); }
  std::vector<TokenId> tokens(uint32_t count, uint32_t vocab) {
    std::vector<TokenId> out(count);
    for (TokenId& t : out) t = static_cast<TokenId>(below(vocab));
    return out;
  }

 private:
  SplitMix64 stream_;
};

class Generator {
 public:
  explicit Generator(const WorkloadSpec& spec) : spec_(spec) {}

  Workload run() {
    Workload w;
    w.name = spec_.name;
    w.origin = spec_.origin;
    w.seed = spec_.seed;
    w.vocab = spec_.vocab;
    w.tenants = spec_.tenants;
    for (const ChatTable& t : spec_.chats) add_chat(t);
    for (const FewShotTable& t : spec_.few_shots) add_few_shot(t);
    for (const ForkTable& t : spec_.forks) add_fork(t);
    for (const LongDocumentTable& t : spec_.long_documents) add_long_document(t);
    for (const TemplatedTable& t : spec_.templated) add_templated(t);
    // Interleave kinds, tables and tenants so that every worker of a run
    // (job i -> worker i mod n) gets a mix: seeded Fisher-Yates.
    TokenStream order(stream_key(spec_.seed, {kOrderDomain}));
    for (size_t i = jobs_.size(); i > 1; --i) std::swap(jobs_[i - 1], jobs_[order.below(static_cast<uint32_t>(i))]);
    for (size_t i = 0; i < jobs_.size(); ++i) jobs_[i].id = i;
    w.jobs = std::move(jobs_);
    w.schemas = std::move(schemas_);
    return w;
  }

 private:
  // The key every stream of one table derives from (see the file comment).
  uint64_t table_key(uint32_t tenant, JobKind kind, std::initializer_list<uint64_t> sizes) {
    return table_key(tenant, kind, std::span<const uint64_t>(sizes.begin(), sizes.size()));
  }
  uint64_t table_key(uint32_t tenant, JobKind kind, std::span<const uint64_t> sizes) {
    uint64_t sized = stream_key(spec_.seed, {kTableDomain, static_cast<uint64_t>(kind)});
    for (uint64_t s : sizes) sized = stream_key(sized, {s});
    const uint64_t repeat = repeats_[{tenant, sized}]++;
    return stream_key(sized, {repeat});
  }

  std::vector<TokenId> draw_prefix(uint64_t table, uint32_t p, uint32_t tokens) {
    return TokenStream(stream_key(table, {kPrefixStream, p})).tokens(tokens, spec_.vocab);
  }

  Job& new_job(JobKind kind, uint32_t tenant, uint32_t shared_prefix_id, std::vector<TokenId> prefix) {
    Job& j = jobs_.emplace_back();
    j.kind = kind;
    j.namespace_name = spec_.tenants[tenant].namespace_name;
    j.shared_prefix_id = shared_prefix_id;
    j.prefix = std::move(prefix);
    return j;
  }

  // Next free shared_prefix_id of `kind`, `count` of them reserved: ids
  // number a kind's prefixes across the whole workload in declaration order.
  uint32_t reserve_prefix_ids(JobKind kind, uint32_t count) {
    uint32_t& next = next_prefix_id_[static_cast<size_t>(kind)];
    const uint32_t first = next;
    next += count;
    return first;
  }

  void add_chat(const ChatTable& t) {
    const uint64_t key = table_key(t.tenant, JobKind::chat,
                                   {t.conversations, t.system_prompts, t.system_prompt_tokens, t.turns,
                                    t.user_tokens.min, t.user_tokens.max, t.decode_tokens});
    const uint32_t first_id = reserve_prefix_ids(JobKind::chat, t.system_prompts);
    std::vector<std::vector<TokenId>> prompts;
    for (uint32_t p = 0; p < t.system_prompts; ++p) prompts.push_back(draw_prefix(key, p, t.system_prompt_tokens));
    for (uint32_t c = 0; c < t.conversations; ++c) {
      const uint32_t p = c % t.system_prompts;
      Job& j = new_job(JobKind::chat, t.tenant, first_id + p, prompts[p]);
      TokenStream s(stream_key(key, {kJobStream, c}));
      for (uint32_t k = 0; k < t.turns; ++k)
        j.turns.push_back(Turn{s.tokens(s.between(t.user_tokens), spec_.vocab), t.decode_tokens});
    }
  }

  void add_few_shot(const FewShotTable& t) {
    const uint64_t key = table_key(
        t.tenant, JobKind::few_shot,
        {t.prefixes, t.prefix_tokens, t.questions, t.question_tokens.min, t.question_tokens.max, t.decode_tokens});
    const uint32_t first_id = reserve_prefix_ids(JobKind::few_shot, t.prefixes);
    for (uint32_t p = 0; p < t.prefixes; ++p) {
      const std::vector<TokenId> prefix = draw_prefix(key, p, t.prefix_tokens);
      for (uint32_t q = 0; q < t.questions; ++q) {
        Job& j = new_job(JobKind::few_shot, t.tenant, first_id + p, prefix);
        TokenStream s(stream_key(key, {kJobStream, p, q}));
        j.turns.push_back(Turn{s.tokens(s.between(t.question_tokens), spec_.vocab), t.decode_tokens});
      }
    }
  }

  void add_fork(const ForkTable& t) {
    const uint64_t key = table_key(t.tenant, JobKind::fork,
                                   {t.prompts, t.prompt_tokens.min, t.prompt_tokens.max, t.branches, t.decode_tokens});
    const uint32_t first_id = reserve_prefix_ids(JobKind::fork, t.prompts);
    for (uint32_t p = 0; p < t.prompts; ++p) {
      // The prompt is the part every branch shares: it is the job's prefix,
      // and the single turn adds no tokens before the branches decode.
      TokenStream s(stream_key(key, {kPrefixStream, p}));
      Job& j = new_job(JobKind::fork, t.tenant, first_id + p, s.tokens(s.between(t.prompt_tokens), spec_.vocab));
      j.turns.push_back(Turn{{}, t.decode_tokens});
      j.branches = t.branches;
    }
  }

  // One schema per table, "templated-<i>": generation 1 with the module
  // ranges of TemplatedTable, and generation 2 (when some prompts are
  // revised) with the document moved; then the prompts over them.
  void add_templated(const TemplatedTable& t) {
    std::vector<uint64_t> sizes{t.prompts,
                                t.system_tokens,
                                t.tool_tokens,
                                t.toolsets,
                                t.documents,
                                t.document_tokens,
                                t.name_tokens.min,
                                t.name_tokens.max,
                                t.question_tokens.min,
                                t.question_tokens.max,
                                t.decode_tokens};
    // Only a table with revised prompts names them, so the others draw the
    // tokens they always drew.
    if (t.revised_prompts > 0) sizes.push_back(t.revised_prompts);
    const uint64_t key = table_key(t.tenant, JobKind::templated, sizes);
    const uint32_t tools_at = t.system_tokens + t.name_tokens.max;
    std::string schema_id = "templated-";
    schema_id += std::to_string(next_schema_id_++);
    const uint32_t first_schema = static_cast<uint32_t>(schemas_.size());
    for (uint64_t generation = 1; generation <= (t.revised_prompts > 0 ? 2u : 1u); ++generation) {
      const uint32_t document_at = document_position(t, generation);
      // Built with += (GCC 12's -Wrestrict misreads chained literal + string).
      const auto module = [](std::string& toml, const char* id, uint32_t begin, uint32_t n, const char* parameter) {
        toml += "[[module]]\nid = \"";
        toml += id;
        toml += "\"\npositions = [";
        toml += std::to_string(begin);
        toml += ", ";
        toml += std::to_string(begin + n);
        toml += "]\n";
        if (parameter != nullptr) {
          toml += "parameters = [\"";
          toml += parameter;
          toml += "\"]\n";
        }
      };
      TemplatedSchema schema;
      schema.namespace_name = spec_.tenants[t.tenant].namespace_name;
      schema.schema_id = schema_id;
      schema.generation = generation;
      schema.toml = "schema_id = \"";
      schema.toml += schema_id;
      schema.toml += "\"\ngeneration = ";
      schema.toml += std::to_string(generation);
      schema.toml += "\n";
      module(schema.toml, "system", 0, t.system_tokens, nullptr);
      module(schema.toml, "tools", tools_at, t.tool_tokens, "toolset");
      module(schema.toml, "document", document_at, t.document_tokens, "doc_id");
      schemas_.push_back(std::move(schema));
    }
    const std::vector<TokenId> system =
        TokenStream(stream_key(key, {kSystemStream})).tokens(t.system_tokens, spec_.vocab);
    std::vector<std::vector<TokenId>> toolsets, documents;
    for (uint32_t v = 0; v < t.toolsets; ++v)
      toolsets.push_back(TokenStream(stream_key(key, {kToolStream, v})).tokens(t.tool_tokens, spec_.vocab));
    for (uint32_t d = 0; d < t.documents; ++d) documents.push_back(draw_prefix(key, d, t.document_tokens));
    const uint32_t first_id = reserve_prefix_ids(JobKind::templated, t.documents);
    for (uint32_t p = 0; p < t.prompts; ++p) {
      const bool revised = p >= t.prompts - t.revised_prompts;
      const uint32_t document_at = document_position(t, revised ? 2 : 1);
      const uint32_t question_at = document_at + t.document_tokens + kTemplatedQuestionGap;
      TokenStream s(stream_key(key, {kJobStream, p}));
      const uint32_t v = s.below(t.toolsets), d = s.below(t.documents);
      TemplatedPrompt prompt{first_schema + (revised ? 1u : 0u), {}};
      prompt.items.push_back(TemplatedItem{"system", {}, system, 0});
      prompt.items.push_back(TemplatedItem{"", {}, s.tokens(s.between(t.name_tokens), spec_.vocab), t.system_tokens});
      prompt.items.push_back(TemplatedItem{"tools", {{"toolset", std::to_string(v)}}, toolsets[v], tools_at});
      prompt.items.push_back(TemplatedItem{"document", {{"doc_id", std::to_string(d)}}, documents[d], document_at});
      std::vector<TokenId> question = s.tokens(s.between(t.question_tokens), spec_.vocab);
      prompt.items.push_back(TemplatedItem{"", {}, question, question_at});
      std::vector<TokenId> prefix;
      for (size_t i = 0; i + 1 < prompt.items.size(); ++i)
        prefix.insert(prefix.end(), prompt.items[i].tokens.begin(), prompt.items[i].tokens.end());
      Job& j = new_job(JobKind::templated, t.tenant, first_id + d, std::move(prefix));
      j.turns.push_back(Turn{std::move(question), t.decode_tokens});
      j.templated = std::move(prompt);
    }
  }

  // Where a templated table's schema generation declares the document.
  static uint32_t document_position(const TemplatedTable& t, uint64_t generation) {
    return t.system_tokens + t.name_tokens.max + t.tool_tokens + (generation > 1 ? kTemplatedRevisionShift : 0);
  }

  void add_long_document(const LongDocumentTable& t) {
    std::vector<uint64_t> sizes{t.documents,           t.document_tokens,     t.questions,
                                t.question_tokens.min, t.question_tokens.max, t.decode_tokens};
    // Only a table with a system prompt names it, so tables without one draw
    // the tokens they always drew.
    if (t.system_prompt_tokens > 0) sizes.push_back(t.system_prompt_tokens);
    const uint64_t key = table_key(t.tenant, JobKind::long_document, sizes);
    const std::vector<TokenId> system =
        TokenStream(stream_key(key, {kSystemStream})).tokens(t.system_prompt_tokens, spec_.vocab);
    const uint32_t first_id = reserve_prefix_ids(JobKind::long_document, t.documents);
    for (uint32_t d = 0; d < t.documents; ++d) {
      // System prompt, then the document: the first level of the table's
      // prefix tree is shared by every document's questions (0x0BD).
      std::vector<TokenId> prefix = system;
      const std::vector<TokenId> document = draw_prefix(key, d, t.document_tokens);
      prefix.insert(prefix.end(), document.begin(), document.end());
      Job& j = new_job(JobKind::long_document, t.tenant, first_id + d, std::move(prefix));
      TokenStream s(stream_key(key, {kJobStream, d}));
      for (uint32_t q = 0; q < t.questions; ++q)
        j.turns.push_back(Turn{s.tokens(s.between(t.question_tokens), spec_.vocab), t.decode_tokens});
    }
  }

  const WorkloadSpec& spec_;
  std::vector<Job> jobs_;
  std::vector<TemplatedSchema> schemas_;
  uint32_t next_schema_id_ = 0;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> repeats_;  // (tenant, sized key) -> tables seen
  uint32_t next_prefix_id_[5] = {0, 0, 0, 0, 0};
};

}  // namespace

Workload generate_workload(const WorkloadSpec& spec) { return Generator(spec).run(); }

}  // namespace kvrt::workload
