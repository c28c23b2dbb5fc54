// Reads a workload file (config/workloads/*.toml) into a checked WorkloadSpec.
// Every field goes through TomlReader, so each error names file:line:column
// and the dotted field ("chat[1].user_tokens"). Besides the per-field ranges,
// the whole workload is bounded (jobs, requests, stored tokens, longest
// context) before anything is generated: a typo such as an extra zero is a
// config_field error, not an out-of-memory.
#include <initializer_list>
#include <map>

#include "services/common/toml_reader.hpp"
#include "tools/workload/workload_spec.hpp"

namespace kvrt::workload {
namespace {

std::string at(std::string_view list, size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

std::string joined(std::initializer_list<std::string_view> names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// A misspelt optional key would otherwise be ignored silently.
Status known_keys(const TomlReader& r, const toml::table& t, const std::string& where,
                  std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, node] : t) {
    bool ok = false;
    for (auto a : allowed) ok = ok || key.str() == a;
    if (!ok)
      return r.field_error(&node, where, std::string(key.str()), "unknown key; expected one of " + joined(allowed));
  }
  return Status::success();
}

// The tables of root array `key` ([[key]]); absent is an empty list.
Result<std::vector<const toml::table*>> table_array(const TomlReader& r, const char* key) {
  std::vector<const toml::table*> out;
  const toml::node* node = r.root().get(key);
  if (node == nullptr) return out;
  const toml::array* arr = node->as_array();
  if (arr == nullptr) return r.field_error(node, "", key, std::string("must be an array of tables ([[") + key + "]])");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table* t = arr->get(i)->as_table();
    if (t == nullptr) return r.field_error(arr->get(i), "", at(key, i), "must be a table");
    out.push_back(t);
  }
  return out;
}

Result<uint32_t> count(const TomlReader& r, const toml::table& t, const std::string& where, const std::string& field,
                       int64_t min, int64_t max) {
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, r.integer(t, where, field, std::nullopt, min, max));
  return static_cast<uint32_t>(v);
}

// `field = [min, max]`, both in [lo, hi], min <= max [tokens].
Result<TokenRange> token_range(const TomlReader& r, const toml::table& t, const std::string& where,
                               const std::string& field, int64_t lo, int64_t hi) {
  std::vector<int64_t> pair;
  KVRT_TRY_ASSIGN(pair, r.integer_array(t, where, field));
  const toml::node* node = t.get(field);
  if (pair.size() != 2) return r.field_error(node, where, field, "must be [min, max] (two integers)");
  const toml::array& arr = *node->as_array();
  for (size_t i = 0; i < 2; ++i)
    if (pair[i] < lo || pair[i] > hi)
      return r.field_error(
          arr.get(i), where, at(field, i),
          "value " + std::to_string(pair[i]) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  if (pair[0] > pair[1])
    return r.field_error(node, where, field,
                         "min " + std::to_string(pair[0]) + " is greater than max " + std::to_string(pair[1]));
  return TokenRange{static_cast<uint32_t>(pair[0]), static_cast<uint32_t>(pair[1])};
}

bool valid_workload_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

// "deployment/tenant" (config/node.toml, spec 0x01A): exactly one '/', both
// parts non-empty, no spaces or control characters.
std::string namespace_problem(std::string_view s) {
  if (s.size() > kMaxNameLength) return "is longer than " + std::to_string(kMaxNameLength) + " characters";
  for (char c : s)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return "contains a space or control character";
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos || s.find('/', slash + 1) != std::string_view::npos)
    return "must be \"deployment/tenant\" with exactly one '/'";
  if (slash == 0 || slash + 1 == s.size()) return "must be \"deployment/tenant\" with both parts non-empty";
  return {};
}

// What a table adds to the workload, from its largest sizes.
struct Footprint {
  uint64_t jobs = 0;
  uint64_t requests = 0;
  uint64_t stored_tokens = 0;  // token ids the jobs hold [tokens]
  uint64_t max_context = 0;    // longest prompt + decode of one request [tokens]
};

class SpecReader {
 public:
  explicit SpecReader(const TomlReader& r) : r_(r) {}

  Result<WorkloadSpec> read() {
    KVRT_TRY(known_keys(r_, r_.root(), "",
                        {"workload", "tenant", "chat", "few_shot", "fork", "long_document", "templated"}));
    KVRT_TRY(read_header());
    KVRT_TRY(read_tenants());
    std::vector<const toml::table*> tables;
    KVRT_TRY_ASSIGN(tables, table_array(r_, "chat"));
    for (size_t i = 0; i < tables.size(); ++i) KVRT_TRY(read_chat(*tables[i], at("chat", i)));
    KVRT_TRY_ASSIGN(tables, table_array(r_, "few_shot"));
    for (size_t i = 0; i < tables.size(); ++i) KVRT_TRY(read_few_shot(*tables[i], at("few_shot", i)));
    KVRT_TRY_ASSIGN(tables, table_array(r_, "fork"));
    for (size_t i = 0; i < tables.size(); ++i) KVRT_TRY(read_fork(*tables[i], at("fork", i)));
    KVRT_TRY_ASSIGN(tables, table_array(r_, "long_document"));
    for (size_t i = 0; i < tables.size(); ++i) KVRT_TRY(read_long_document(*tables[i], at("long_document", i)));
    KVRT_TRY_ASSIGN(tables, table_array(r_, "templated"));
    for (size_t i = 0; i < tables.size(); ++i) KVRT_TRY(read_templated(*tables[i], at("templated", i)));
    if (totals_.jobs == 0)
      return r_.field_error(header_, "", "workload",
                            "declares no jobs: add a [[chat]], [[few_shot]], [[fork]], [[long_document]] or "
                            "[[templated]] table");
    return std::move(spec_);
  }

 private:
  Status read_header() {
    const toml::node* node = r_.root().get("workload");
    if (node == nullptr) return r_.field_error(&r_.root(), "", "workload", "is required (a [workload] table)");
    header_ = node->as_table();
    if (header_ == nullptr) return r_.field_error(node, "", "workload", "must be a table ([workload])");
    const toml::table& t = *header_;
    KVRT_TRY(known_keys(r_, t, "workload", {"name", "seed", "vocab"}));
    KVRT_TRY_ASSIGN(spec_.name, r_.string(t, "workload", "name"));
    if (!valid_workload_name(spec_.name))
      return r_.field_error(t.get("name"), "workload", "name",
                            "must be 1.." + std::to_string(kMaxNameLength) + " characters of [A-Za-z0-9._-]");
    int64_t v = 0;
    KVRT_TRY_ASSIGN(v, r_.integer(t, "workload", "seed", std::nullopt, 0, INT64_MAX));
    spec_.seed = static_cast<uint64_t>(v);
    KVRT_TRY_ASSIGN(v, r_.integer(t, "workload", "vocab", kDefaultVocab, kMinVocab, kMaxVocab));
    spec_.vocab = static_cast<uint32_t>(v);
    return Status::success();
  }

  Status read_tenants() {
    std::vector<const toml::table*> tables;
    KVRT_TRY_ASSIGN(tables, table_array(r_, "tenant"));
    if (tables.empty()) {
      const toml::node* node = r_.root().get("tenant");
      return r_.field_error(node != nullptr ? node : header_, "", "tenant",
                            "is required: declare at least one [[tenant]] with a namespace");
    }
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table& t = *tables[i];
      const std::string where = at("tenant", i);
      KVRT_TRY(known_keys(r_, t, where, {"namespace", "salt", "publication_policy", "quota_blocks"}));
      TenantSpec tenant;
      KVRT_TRY_ASSIGN(tenant.namespace_name, r_.string(t, where, "namespace"));
      if (std::string problem = namespace_problem(tenant.namespace_name); !problem.empty())
        return r_.field_error(t.get("namespace"), where, "namespace", problem);
      auto [it, fresh] = tenant_index_.emplace(tenant.namespace_name, static_cast<uint32_t>(i));
      if (!fresh)
        return r_.field_error(t.get("namespace"), where, "namespace",
                              "\"" + tenant.namespace_name + "\" is already declared by " + at("tenant", it->second));
      if (t.get("salt") != nullptr) {
        std::string salt;
        KVRT_TRY_ASSIGN(salt, r_.string(t, where, "salt"));
        if (salt.empty())
          return r_.field_error(t.get("salt"), where, "salt", "must not be empty (omit it to draw one)");
        // The run writes the salt into a generated node config (services/run):
        // control characters would have to survive a second TOML round trip.
        for (char ch : salt)
          if (static_cast<unsigned char>(ch) < ' ' || ch == 0x7f)
            return r_.field_error(t.get("salt"), where, "salt", "must not contain control characters");
        tenant.salt = std::move(salt);
      }
      KVRT_TRY_ASSIGN(tenant.publication_policy, r_.string(t, where, "publication_policy", "tenant_shared"));
      const std::string& p = tenant.publication_policy;
      if (p != "private_to_request" && p != "tenant_shared" && p != "deployment_shared")
        return r_.field_error(
            t.get("publication_policy"), where, "publication_policy",
            "unknown value \"" + p + "\"; expected private_to_request, tenant_shared or deployment_shared");
      if (t.get("quota_blocks") != nullptr) {
        int64_t quota = 0;
        KVRT_TRY_ASSIGN(quota, r_.integer(t, where, "quota_blocks", std::nullopt, 1, int64_t{1} << 31));
        tenant.quota_blocks = static_cast<uint32_t>(quota);
      }
      spec_.tenants.push_back(std::move(tenant));
    }
    return Status::success();
  }

  Result<uint32_t> tenant_of(const toml::table& t, const std::string& where) {
    std::string name;
    KVRT_TRY_ASSIGN(name, r_.string(t, where, "tenant"));
    auto it = tenant_index_.find(name);
    if (it == tenant_index_.end()) {
      std::string declared;
      for (const TenantSpec& s : spec_.tenants) declared += (declared.empty() ? "" : ", ") + s.namespace_name;
      return r_.field_error(t.get("tenant"), where, "tenant",
                            "names undeclared tenant \"" + name + "\"; declared: " + declared);
    }
    return it->second;
  }

  // Adds a table's footprint to the running totals; the first table that
  // pushes a total past its bound is named (count_field for job/request counts).
  Status account(const toml::table& t, const std::string& where, const char* count_field, const Footprint& f) {
    if (f.max_context > static_cast<uint64_t>(kMaxContextTokens))
      return r_.field_error(&t, "", where,
                            "a request can reach " + std::to_string(f.max_context) + " tokens of context, more than " +
                                std::to_string(kMaxContextTokens));
    totals_.jobs += f.jobs;
    totals_.requests += f.requests;
    totals_.stored_tokens += f.stored_tokens;
    if (totals_.jobs > static_cast<uint64_t>(kMaxJobs))
      return r_.field_error(
          t.get(count_field), where, count_field,
          "brings the workload to " + std::to_string(totals_.jobs) + " jobs, more than " + std::to_string(kMaxJobs));
    if (totals_.requests > static_cast<uint64_t>(kMaxRequests))
      return r_.field_error(t.get(count_field), where, count_field,
                            "brings the workload to " + std::to_string(totals_.requests) + " requests, more than " +
                                std::to_string(kMaxRequests));
    if (totals_.stored_tokens > static_cast<uint64_t>(kMaxStoredTokens))
      return r_.field_error(&t, "", where,
                            "brings the workload to " + std::to_string(totals_.stored_tokens) +
                                " stored prompt tokens, more than " + std::to_string(kMaxStoredTokens));
    return Status::success();
  }

  Status read_chat(const toml::table& t, const std::string& where) {
    KVRT_TRY(known_keys(r_, t, where,
                        {"tenant", "conversations", "system_prompts", "system_prompt_tokens", "turns", "user_tokens",
                         "decode_tokens"}));
    ChatTable c;
    KVRT_TRY_ASSIGN(c.tenant, tenant_of(t, where));
    KVRT_TRY_ASSIGN(c.conversations, count(r_, t, where, "conversations", 1, kMaxJobs));
    KVRT_TRY_ASSIGN(c.system_prompts, count(r_, t, where, "system_prompts", 1, kMaxSharedPrefixes));
    if (c.system_prompts > c.conversations)
      return r_.field_error(t.get("system_prompts"), where, "system_prompts",
                            std::to_string(c.system_prompts) + " prompts for " + std::to_string(c.conversations) +
                                " conversations: some would never be used");
    KVRT_TRY_ASSIGN(c.system_prompt_tokens, count(r_, t, where, "system_prompt_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(c.turns, count(r_, t, where, "turns", 1, kMaxTurns));
    KVRT_TRY_ASSIGN(c.user_tokens, token_range(r_, t, where, "user_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(c.decode_tokens, count(r_, t, where, "decode_tokens", 1, kMaxDecodeTokens));
    // The last turn carries every earlier user turn and answer (workload.hpp).
    const uint64_t user_max = uint64_t{c.turns} * c.user_tokens.max;
    const uint64_t history_max = user_max + uint64_t{c.turns} * c.decode_tokens;
    KVRT_TRY(account(
        t, where, "conversations",
        Footprint{c.conversations, uint64_t{c.conversations} * c.turns,
                  c.conversations * (c.system_prompt_tokens + user_max), c.system_prompt_tokens + history_max}));
    spec_.chats.push_back(c);
    return Status::success();
  }

  Status read_few_shot(const toml::table& t, const std::string& where) {
    KVRT_TRY(known_keys(r_, t, where,
                        {"tenant", "prefixes", "prefix_tokens", "questions", "question_tokens", "decode_tokens"}));
    FewShotTable f;
    KVRT_TRY_ASSIGN(f.tenant, tenant_of(t, where));
    KVRT_TRY_ASSIGN(f.prefixes, count(r_, t, where, "prefixes", 1, kMaxSharedPrefixes));
    KVRT_TRY_ASSIGN(f.prefix_tokens, count(r_, t, where, "prefix_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(f.questions, count(r_, t, where, "questions", 1, kMaxJobs));
    KVRT_TRY_ASSIGN(f.question_tokens, token_range(r_, t, where, "question_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(f.decode_tokens, count(r_, t, where, "decode_tokens", 1, kMaxDecodeTokens));
    const uint64_t jobs = uint64_t{f.prefixes} * f.questions;
    KVRT_TRY(account(t, where, "questions",
                     Footprint{jobs, jobs, jobs * (f.prefix_tokens + uint64_t{f.question_tokens.max}),
                               uint64_t{f.prefix_tokens} + f.question_tokens.max + f.decode_tokens}));
    spec_.few_shots.push_back(f);
    return Status::success();
  }

  Status read_fork(const toml::table& t, const std::string& where) {
    KVRT_TRY(known_keys(r_, t, where, {"tenant", "prompts", "prompt_tokens", "branches", "decode_tokens"}));
    ForkTable f;
    KVRT_TRY_ASSIGN(f.tenant, tenant_of(t, where));
    KVRT_TRY_ASSIGN(f.prompts, count(r_, t, where, "prompts", 1, kMaxJobs));
    KVRT_TRY_ASSIGN(f.prompt_tokens, token_range(r_, t, where, "prompt_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(f.branches, count(r_, t, where, "branches", kMinBranches, kMaxBranches));
    KVRT_TRY_ASSIGN(f.decode_tokens, count(r_, t, where, "decode_tokens", 1, kMaxDecodeTokens));
    KVRT_TRY(account(t, where, "prompts",
                     Footprint{f.prompts, uint64_t{f.prompts} * f.branches, uint64_t{f.prompts} * f.prompt_tokens.max,
                               uint64_t{f.prompt_tokens.max} + f.decode_tokens}));
    spec_.forks.push_back(f);
    return Status::success();
  }

  Status read_long_document(const toml::table& t, const std::string& where) {
    KVRT_TRY(known_keys(r_, t, where,
                        {"tenant", "documents", "document_tokens", "system_prompt_tokens", "questions",
                         "question_tokens", "decode_tokens"}));
    LongDocumentTable d;
    KVRT_TRY_ASSIGN(d.tenant, tenant_of(t, where));
    KVRT_TRY_ASSIGN(d.documents, count(r_, t, where, "documents", 1, kMaxSharedPrefixes));
    KVRT_TRY_ASSIGN(d.document_tokens, count(r_, t, where, "document_tokens", 1, kMaxSegmentTokens));
    if (t.contains("system_prompt_tokens"))
      KVRT_TRY_ASSIGN(d.system_prompt_tokens, count(r_, t, where, "system_prompt_tokens", 0, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(d.questions, count(r_, t, where, "questions", 1, kMaxDocumentQuestions));
    KVRT_TRY_ASSIGN(d.question_tokens, token_range(r_, t, where, "question_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(d.decode_tokens, count(r_, t, where, "decode_tokens", 1, kMaxDecodeTokens));
    const uint64_t questions_max = uint64_t{d.questions} * d.question_tokens.max;
    KVRT_TRY(account(
        t, where, "documents",
        Footprint{d.documents, uint64_t{d.documents} * d.questions,
                  d.documents * (uint64_t{d.system_prompt_tokens} + d.document_tokens + questions_max),
                  uint64_t{d.system_prompt_tokens} + d.document_tokens + d.question_tokens.max + d.decode_tokens}));
    spec_.long_documents.push_back(d);
    return Status::success();
  }

  Status read_templated(const toml::table& t, const std::string& where) {
    KVRT_TRY(known_keys(r_, t, where,
                        {"tenant", "prompts", "system_tokens", "tool_tokens", "toolsets", "documents",
                         "document_tokens", "name_tokens", "question_tokens", "decode_tokens", "revised_prompts"}));
    TemplatedTable m;
    KVRT_TRY_ASSIGN(m.tenant, tenant_of(t, where));
    KVRT_TRY_ASSIGN(m.prompts, count(r_, t, where, "prompts", 1, kMaxJobs));
    KVRT_TRY_ASSIGN(m.system_tokens, count(r_, t, where, "system_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(m.tool_tokens, count(r_, t, where, "tool_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(m.toolsets, count(r_, t, where, "toolsets", 1, kMaxSharedPrefixes));
    KVRT_TRY_ASSIGN(m.documents, count(r_, t, where, "documents", 1, kMaxSharedPrefixes));
    KVRT_TRY_ASSIGN(m.document_tokens, count(r_, t, where, "document_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(m.name_tokens, token_range(r_, t, where, "name_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(m.question_tokens, token_range(r_, t, where, "question_tokens", 1, kMaxSegmentTokens));
    KVRT_TRY_ASSIGN(m.decode_tokens, count(r_, t, where, "decode_tokens", 1, kMaxDecodeTokens));
    if (t.contains("revised_prompts"))
      KVRT_TRY_ASSIGN(m.revised_prompts, count(r_, t, where, "revised_prompts", 0, m.prompts));
    const uint64_t prompt_max =
        uint64_t{m.system_tokens} + m.name_tokens.max + m.tool_tokens + m.document_tokens + m.question_tokens.max;
    KVRT_TRY(account(t, where, "prompts",
                     Footprint{m.prompts, m.prompts, m.prompts * prompt_max, prompt_max + m.decode_tokens}));
    spec_.templated.push_back(m);
    return Status::success();
  }

  const TomlReader& r_;
  const toml::table* header_ = nullptr;
  std::map<std::string, uint32_t, std::less<>> tenant_index_;
  Footprint totals_;
  WorkloadSpec spec_;
};

}  // namespace

Result<WorkloadSpec> parse_workload_spec(const TomlReader& reader) {
  Result<WorkloadSpec> spec = SpecReader(reader).read();
  if (spec.ok()) spec->origin = reader.path();
  return spec;
}

}  // namespace kvrt::workload
