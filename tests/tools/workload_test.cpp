// Workload files (tools/workload/workload.hpp): every shipped file
// loads; expansion is deterministic and independent of the worker count; the
// figures a run reports (requests, requested tokens, T_max) match a closed-form
// derivation from the file's sizes; shared prefixes are shared exactly where
// the format promises; bad files give typed errors naming file, line and
// field; and randomly mutated files never crash the loader.
#include "tools/workload/workload.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

using namespace kvrt;
using namespace kvrt::workload;

namespace {

const std::string kWorkloadDir = std::string(KVRT_SOURCE_DIR) + "/config/workloads";
const std::string kBadDir = std::string(KVRT_SOURCE_DIR) + "/tests/data/workloads";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Workload load_ok(const std::string& path) {
  Result<Workload> w = load_workload(path);
  INFO(path << ": " << (w.ok() ? std::string() : w.error().describe()));
  REQUIRE(w.ok());
  return std::move(w).value();
}

Workload parse_ok(const std::string& text) {
  Result<Workload> w = parse_workload(text, "inline.toml");
  INFO((w.ok() ? std::string() : w.error().describe()));
  REQUIRE(w.ok());
  return std::move(w).value();
}

bool same_job(const Job& a, const Job& b) {
  if (a.id != b.id || a.kind != b.kind || a.namespace_name != b.namespace_name ||
      a.shared_prefix_id != b.shared_prefix_id || a.prefix != b.prefix || a.branches != b.branches ||
      a.turns.size() != b.turns.size())
    return false;
  for (size_t i = 0; i < a.turns.size(); ++i)
    if (a.turns[i].user_tokens != b.turns[i].user_tokens || a.turns[i].decode_tokens != b.turns[i].decode_tokens)
      return false;
  return true;
}

bool same_jobs(const Workload& a, const Workload& b) {
  if (a.jobs.size() != b.jobs.size()) return false;
  for (size_t i = 0; i < a.jobs.size(); ++i)
    if (!same_job(a.jobs[i], b.jobs[i])) return false;
  return true;
}

// Structural facts every loaded workload must satisfy, whatever its file.
void check_invariants(const Workload& w) {
  std::set<std::string> declared;
  for (const TenantSpec& t : w.tenants) declared.insert(t.namespace_name);
  REQUIRE(!w.jobs.empty());
  REQUIRE(w.vocab >= 2);
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    const Job& j = w.jobs[i];
    INFO("job " << i << " kind " << to_string(j.kind));
    CHECK(j.id == i);
    CHECK(declared.count(j.namespace_name) == 1);
    CHECK(!j.prefix.empty());
    CHECK(!j.turns.empty());
    CHECK(j.branches == (j.kind == JobKind::fork ? j.branches : 1u));
    if (j.kind == JobKind::fork) {
      CHECK(j.turns.size() == 1);
      CHECK(j.turns[0].user_tokens.empty());
      CHECK(j.branches >= 2);
    }
    for (TokenId t : j.prefix) REQUIRE((t >= 0 && static_cast<uint32_t>(t) < w.vocab));
    for (const Turn& turn : j.turns) {
      CHECK(turn.decode_tokens >= 1);
      for (TokenId t : turn.user_tokens) REQUIRE((t >= 0 && static_cast<uint32_t>(t) < w.vocab));
    }
  }
}

std::vector<std::string> shipped_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kWorkloadDir))
    if (e.path().extension() == ".toml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Jobs of one kind in one namespace.
std::vector<const Job*> select(const Workload& w, JobKind kind, const std::string& ns) {
  std::vector<const Job*> out;
  for (const Job& j : w.jobs)
    if (j.kind == kind && j.namespace_name == ns) out.push_back(&j);
  return out;
}

}  // namespace

TEST_CASE("every shipped workload file loads and is well formed", "[workload]") {
  const std::vector<std::string> files = shipped_files();
  std::set<std::string> names;
  for (const std::string& f : files) names.insert(std::filesystem::path(f).stem().string());
  for (const char* expected : {"default-mix", "chat", "few-shot", "fork", "long-document", "tenants"})
    CHECK(names.count(expected) == 1);
  for (const std::string& f : files) {
    INFO(f);
    Workload w = load_ok(f);
    CHECK(w.name == std::filesystem::path(f).stem().string());  // convention: name = file stem
    CHECK(w.origin == f);
    check_invariants(w);
    CHECK(w.request_count() >= w.jobs.size());
    CHECK(w.max_context_tokens() > 0);
  }
}

TEST_CASE("the default mix has every kind, two tenants and a quick size", "[workload]") {
  Workload w = load_ok(kWorkloadDir + "/default-mix.toml");
  std::set<std::pair<JobKind, std::string>> seen;
  for (const Job& j : w.jobs) seen.insert({j.kind, j.namespace_name});
  for (JobKind k : {JobKind::chat, JobKind::few_shot, JobKind::fork}) {
    CHECK(seen.count({k, "run/alpha"}) == 1);
    CHECK(seen.count({k, "run/beta"}) == 1);
  }
  CHECK(select(w, JobKind::long_document, "run/alpha").size() == 2);
  CHECK(select(w, JobKind::long_document, "run/beta").size() == 1);
  // Sized for a run of seconds on two CPU cores with the tiny reference
  // model (well under a minute): 300..600 requests, 100k..200k
  // requested token rows.
  CHECK(w.request_count() >= 300);
  CHECK(w.request_count() <= 600);
  CHECK(w.requested_tokens() >= 100000);
  CHECK(w.requested_tokens() <= 200000);
  // The shuffle interleaves kinds: the first quarter of the jobs already holds three kinds.
  std::set<JobKind> early;
  for (size_t i = 0; i < w.jobs.size() / 4; ++i) early.insert(w.jobs[i].kind);
  CHECK(early.size() >= 3);
}

TEST_CASE("expansion is deterministic and independent of the origin", "[workload]") {
  for (const std::string& f : shipped_files()) {
    INFO(f);
    Workload a = load_ok(f);
    Workload b = load_ok(f);
    CHECK(same_jobs(a, b));
    Result<Workload> c = parse_workload(read_text(f), "elsewhere.toml");
    REQUIRE(c.ok());
    CHECK(same_jobs(a, *c));
    CHECK(c->origin == "elsewhere.toml");
  }
}

TEST_CASE("a different seed draws different tokens with the same shapes", "[workload]") {
  std::string text = read_text(kWorkloadDir + "/default-mix.toml");
  Workload a = parse_ok(text);
  const std::string from = "seed = 20240601";
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), "seed = 20240602");
  Workload b = parse_ok(text);
  REQUIRE(a.jobs.size() == b.jobs.size());
  CHECK(a.request_count() == b.request_count());
  CHECK(!same_jobs(a, b));
}

TEST_CASE("jobs_for_worker partitions the jobs for every worker count", "[workload]") {
  const Workload w = load_ok(kWorkloadDir + "/default-mix.toml");
  for (uint32_t n = 1; n <= 7; ++n) {
    INFO("workers " << n);
    std::vector<int> owners(w.jobs.size(), 0);
    for (uint32_t worker = 0; worker < n; ++worker) {
      for (const Job* j : jobs_for_worker(w, worker, n)) {
        REQUIRE(j >= w.jobs.data());
        REQUIRE(j < w.jobs.data() + w.jobs.size());
        CHECK(j->id % n == worker);  // the documented rule: job i on worker i mod n
        ++owners[j->id];
      }
    }
    for (size_t i = 0; i < owners.size(); ++i) CHECK(owners[i] == 1);  // union = all, disjoint
    CHECK(jobs_for_worker(w, n, n).empty());                           // outside w < n: nothing
  }
  CHECK(jobs_for_worker(w, 0, 0).empty());
}

TEST_CASE("jobs_for_tenant_worker gives each worker one tenant's jobs, every job once", "[workload]") {
  const Workload w = load_ok(kWorkloadDir + "/default-mix.toml");
  const auto tenants = static_cast<uint32_t>(w.tenants.size());
  REQUIRE(tenants >= 2);
  for (uint32_t n = tenants; n <= tenants + 5; ++n) {
    INFO("workers " << n);
    std::vector<int> owners(w.jobs.size(), 0);
    for (uint32_t worker = 0; worker < n; ++worker) {
      const uint32_t t = tenant_of_worker(w, worker);
      CHECK(t == worker % tenants);
      for (const Job* j : jobs_for_tenant_worker(w, worker, n)) {
        CHECK(j->namespace_name == w.tenants[t].namespace_name);  // only its tenant's jobs
        ++owners[j->id];
      }
    }
    for (size_t i = 0; i < owners.size(); ++i) CHECK(owners[i] == 1);  // union = all, disjoint
    CHECK(jobs_for_tenant_worker(w, n, n).empty());
  }
  // Fewer workers than tenants: the tenants without one keep their jobs.
  size_t served = 0;
  for (uint32_t worker = 0; worker + 1 < tenants; ++worker)
    served += jobs_for_tenant_worker(w, worker, tenants - 1).size();
  CHECK(served < w.jobs.size());
}

TEST_CASE("request and token counts match a hand derivation from the sizes", "[workload]") {
  // Fixed lengths ([x, x]) so every figure follows from the file by arithmetic.
  const uint64_t C = 3, S = 2, SP = 40, T = 4, U = 7, D1 = 3;  // chat
  const uint64_t P = 2, PT = 50, Q = 5, QT = 9, D2 = 4;        // few_shot
  const uint64_t F = 3, FT = 30, B = 5, D3 = 6;                // fork
  const uint64_t DOC = 2, DT = 200, DQ = 6, DQT = 11, D4 = 2;  // long_document
  std::ostringstream s;
  s << "[workload]\nname = \"hand\"\nseed = 5\nvocab = 97\n"
    << "[[tenant]]\nnamespace = \"d/t\"\n"
    << "[[chat]]\ntenant = \"d/t\"\nconversations = " << C << "\nsystem_prompts = " << S
    << "\nsystem_prompt_tokens = " << SP << "\nturns = " << T << "\nuser_tokens = [" << U << ", " << U
    << "]\ndecode_tokens = " << D1 << "\n"
    << "[[few_shot]]\ntenant = \"d/t\"\nprefixes = " << P << "\nprefix_tokens = " << PT << "\nquestions = " << Q
    << "\nquestion_tokens = [" << QT << ", " << QT << "]\ndecode_tokens = " << D2 << "\n"
    << "[[fork]]\ntenant = \"d/t\"\nprompts = " << F << "\nprompt_tokens = [" << FT << ", " << FT
    << "]\nbranches = " << B << "\ndecode_tokens = " << D3 << "\n"
    << "[[long_document]]\ntenant = \"d/t\"\ndocuments = " << DOC << "\ndocument_tokens = " << DT
    << "\nquestions = " << DQ << "\nquestion_tokens = [" << DQT << ", " << DQT << "]\ndecode_tokens = " << D4 << "\n";
  const Workload w = parse_ok(s.str());
  check_invariants(w);

  CHECK(w.jobs.size() == C + P * Q + F + DOC);
  CHECK(w.request_count() == C * T + P * Q + F * B + DOC * DQ);
  // Chat turn k (1-based) reaches SP + k (U + D1) tokens: sum over k = T SP + (U + D1) T (T + 1) / 2.
  const uint64_t chat = C * (T * SP + (U + D1) * T * (T + 1) / 2);
  const uint64_t few_shot = P * Q * (PT + QT + D2);
  const uint64_t fork = F * B * (FT + D3);
  const uint64_t document = DOC * DQ * (DT + DQT + D4);
  CHECK(w.requested_tokens() == chat + few_shot + fork + document);
  CHECK(w.max_context_tokens() == std::max({SP + T * (U + D1), PT + QT + D2, FT + D3, DT + DQT + D4}));

  // Per-kind shapes.
  std::map<JobKind, std::map<uint32_t, int>> jobs_per_prefix;
  for (const Job& j : w.jobs) ++jobs_per_prefix[j.kind][j.shared_prefix_id];
  CHECK(jobs_per_prefix[JobKind::chat].size() == S);
  CHECK(jobs_per_prefix[JobKind::chat][0] + jobs_per_prefix[JobKind::chat][1] == static_cast<int>(C));
  CHECK(jobs_per_prefix[JobKind::chat][0] == static_cast<int>((C + 1) / 2));  // c mod S == 0 for c = 0, 2
  for (uint32_t p = 0; p < P; ++p) CHECK(jobs_per_prefix[JobKind::few_shot][p] == static_cast<int>(Q));
  CHECK(jobs_per_prefix[JobKind::fork].size() == F);
  CHECK(jobs_per_prefix[JobKind::long_document].size() == DOC);
  for (const Job& j : w.jobs) {
    if (j.kind == JobKind::chat) CHECK((j.prefix.size() == SP && j.turns.size() == T));
    if (j.kind == JobKind::few_shot) CHECK((j.prefix.size() == PT && j.turns.size() == 1));
    if (j.kind == JobKind::fork) CHECK((j.prefix.size() == FT && j.branches == B));
    if (j.kind == JobKind::long_document) CHECK((j.prefix.size() == DT && j.turns.size() == DQ));
  }
}

TEST_CASE("shared prefixes are identical where promised and distinct elsewhere", "[workload]") {
  const Workload w = load_ok(kWorkloadDir + "/default-mix.toml");
  // (kind, shared_prefix_id) -> the one prefix and namespace of that id.
  std::map<std::pair<JobKind, uint32_t>, const Job*> first;
  for (const Job& j : w.jobs) {
    auto [it, fresh] = first.emplace(std::make_pair(j.kind, j.shared_prefix_id), &j);
    if (fresh) continue;
    INFO(to_string(j.kind) << " prefix " << j.shared_prefix_id);
    CHECK(j.prefix == it->second->prefix);
    CHECK(j.namespace_name == it->second->namespace_name);
  }
  // Within one namespace and kind, different ids are independent draws of at
  // least 128 tokens over a vocabulary of 256: they must differ.
  for (const auto& [a_key, a] : first)
    for (const auto& [b_key, b] : first)
      if (a_key.first == b_key.first && a_key.second < b_key.second && a->namespace_name == b->namespace_name) {
        INFO(to_string(a_key.first) << " prefixes " << a_key.second << " and " << b_key.second);
        CHECK(a->prefix != b->prefix);
      }
  // Job counts per shared prefix follow from the file: 24 conversations over
  // 3 system prompts; 24 (alpha) or 32 (beta) questions per few-shot prefix.
  std::map<std::pair<JobKind, uint32_t>, int> uses;
  for (const Job& j : w.jobs) ++uses[{j.kind, j.shared_prefix_id}];
  for (const auto& [key, n] : uses) {
    if (key.first == JobKind::chat) CHECK(n == 24 / 3);
    if (key.first == JobKind::few_shot) CHECK((n == 24 || n == 32));
    if (key.first == JobKind::fork || key.first == JobKind::long_document) CHECK(n == 1);
  }
}

TEST_CASE("a long_document table's system prompt opens every document, and only that table's", "[workload]") {
  const std::string head = "[workload]\nname = \"t\"\nseed = 3\nvocab = 256\n[[tenant]]\nnamespace = \"a/b\"\n";
  const std::string table =
      "[[long_document]]\ntenant = \"a/b\"\ndocuments = 3\ndocument_tokens = 40\n"
      "questions = 2\nquestion_tokens = [2, 4]\ndecode_tokens = 2\n";
  const Workload plain = parse_ok(head + table);
  const Workload with = parse_ok(head + table + "system_prompt_tokens = 24\n");
  REQUIRE(with.jobs.size() == 3);
  std::set<std::vector<TokenId>> documents;
  for (const Job& j : with.jobs) {
    REQUIRE(j.prefix.size() == 24 + 40);
    // The same 24 tokens first, then a document of the job's own.
    CHECK(std::equal(j.prefix.begin(), j.prefix.begin() + 24, with.jobs[0].prefix.begin()));
    documents.emplace(j.prefix.begin() + 24, j.prefix.end());
  }
  CHECK(documents.size() == 3);
  // Requested tokens count the system prompt and the document once per question.
  uint64_t requested = 0;
  for (const Job& j : with.jobs)
    for (const Turn& t : j.turns) requested += 24 + 40 + t.user_tokens.size() + t.decode_tokens;
  CHECK(with.requested_tokens() == requested);
  // Zero is no system prompt, and draws what a table without the key draws.
  const Workload zero = parse_ok(head + table + "system_prompt_tokens = 0\n");
  REQUIRE(zero.jobs.size() == plain.jobs.size());
  for (size_t i = 0; i < zero.jobs.size(); ++i) CHECK(same_job(zero.jobs[i], plain.jobs[i]));
  Result<Workload> bad = parse_workload(head + table + "system_prompt_tokens = -1\n", "bad.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().field.find("system_prompt_tokens") != std::string::npos);
}

TEST_CASE("identical tables in two tenants get identical tokens", "[workload]") {
  const Workload w = load_ok(kWorkloadDir + "/tenants.toml");
  std::vector<const Job*> alpha = select(w, JobKind::chat, "run/alpha");
  std::vector<const Job*> beta = select(w, JobKind::chat, "run/beta");
  REQUIRE(alpha.size() == 6);
  REQUIRE(beta.size() == 6);
  // The shuffle reorders jobs, so compare as multisets of (prefix, turns).
  auto contents = [](const std::vector<const Job*>& jobs) {
    std::multiset<std::vector<TokenId>> out;
    for (const Job* j : jobs) {
      std::vector<TokenId> all = j->prefix;
      for (const Turn& t : j->turns) {
        all.push_back(-1);  // turn separator, never a token id
        all.insert(all.end(), t.user_tokens.begin(), t.user_tokens.end());
      }
      out.insert(all);
    }
    return out;
  };
  CHECK(contents(alpha) == contents(beta));
  CHECK(alpha[0]->prefix == beta[0]->prefix);  // one system prompt per tenant: the same tokens
  CHECK(alpha[0]->shared_prefix_id != beta[0]->shared_prefix_id);
  // The default mix repeats its chat tables across tenants in the same way.
  const Workload mix = load_ok(kWorkloadDir + "/default-mix.toml");
  CHECK(contents(select(mix, JobKind::chat, "run/alpha")) == contents(select(mix, JobKind::chat, "run/beta")));
  CHECK(contents(select(mix, JobKind::fork, "run/alpha")) != contents(select(mix, JobKind::fork, "run/beta")));
}

TEST_CASE("a table repeated within one tenant is a fresh draw", "[workload]") {
  const std::string table =
      "[[few_shot]]\ntenant = \"d/t\"\nprefixes = 1\nprefix_tokens = 64\nquestions = 2\n"
      "question_tokens = [4, 8]\ndecode_tokens = 2\n";
  const Workload w = parse_ok("[workload]\nname = \"x\"\nseed = 3\n[[tenant]]\nnamespace = \"d/t\"\n" + table + table);
  CHECK(w.vocab == 256);  // the documented default
  std::map<uint32_t, std::vector<TokenId>> prefixes;
  for (const Job& j : w.jobs) prefixes[j.shared_prefix_id] = j.prefix;
  REQUIRE(prefixes.size() == 2);
  CHECK(prefixes[0] != prefixes[1]);
}

TEST_CASE("token ids and lengths stay inside their declared ranges", "[workload]") {
  const uint32_t vocab = 5, lo = 3, hi = 6;
  std::ostringstream s;
  s << "[workload]\nname = \"ranges\"\nseed = 99\nvocab = " << vocab << "\n[[tenant]]\nnamespace = \"d/t\"\n"
    << "[[chat]]\ntenant = \"d/t\"\nconversations = 40\nsystem_prompts = 3\nsystem_prompt_tokens = 16\n"
    << "turns = 5\nuser_tokens = [" << lo << ", " << hi << "]\ndecode_tokens = 1\n"
    << "[[fork]]\ntenant = \"d/t\"\nprompts = 40\nprompt_tokens = [" << lo << ", " << hi
    << "]\nbranches = 2\ndecode_tokens = 1\n";
  const Workload w = parse_ok(s.str());
  check_invariants(w);
  std::set<size_t> user_lengths, prompt_lengths;
  std::set<TokenId> ids;
  for (const Job& j : w.jobs) {
    ids.insert(j.prefix.begin(), j.prefix.end());
    if (j.kind == JobKind::fork) prompt_lengths.insert(j.prefix.size());
    for (const Turn& t : j.turns) {
      if (j.kind == JobKind::chat) user_lengths.insert(t.user_tokens.size());
      ids.insert(t.user_tokens.begin(), t.user_tokens.end());
    }
  }
  // 200 user turns and 40 prompts over 4 lengths: every length occurs, none outside.
  for (const auto* lengths : {&user_lengths, &prompt_lengths}) {
    REQUIRE(!lengths->empty());
    CHECK(*lengths->begin() == lo);
    CHECK(*lengths->rbegin() == hi);
    CHECK(lengths->size() == hi - lo + 1);
  }
  CHECK(ids.size() == vocab);  // every id of [0, vocab) is drawn, and only those
  CHECK(*ids.begin() == 0);
  CHECK(*ids.rbegin() == static_cast<TokenId>(vocab - 1));
}

TEST_CASE("bad workload files give typed errors naming file, line and field", "[workload]") {
  struct Case {
    const char* file;
    ErrorCode code;
    const char* field;  // the Error's field; for config_parse TomlReader puts the file there
  };
  const Case cases[] = {
      {"malformed.toml", ErrorCode::config_parse, nullptr},
      {"unknown-key.toml", ErrorCode::config_field, "fork[0].branch"},
      {"missing-field.toml", ErrorCode::config_field, "few_shot[0].prefix_tokens"},
      {"min-greater-than-max.toml", ErrorCode::config_field, "chat[0].user_tokens"},
      {"out-of-range.toml", ErrorCode::config_field, "fork[0].branches"},
      {"vocab-out-of-range.toml", ErrorCode::config_field, "workload.vocab"},
      {"undeclared-tenant.toml", ErrorCode::config_field, "long_document[0].tenant"},
      {"bad-namespace.toml", ErrorCode::config_field, "tenant[1].namespace"},
      {"duplicate-tenant.toml", ErrorCode::config_field, "tenant[1].namespace"},
      {"bad-policy.toml", ErrorCode::config_field, "tenant[0].publication_policy"},
      {"bad-salt.toml", ErrorCode::config_field, "tenant[0].salt"},
      {"empty.toml", ErrorCode::config_field, "workload"},
      {"no-tenant.toml", ErrorCode::config_field, "tenant"},
      {"too-many-tokens.toml", ErrorCode::config_field, "chat[0]"},
      {"too-long-context.toml", ErrorCode::config_field, "chat[0]"},
      {"range-not-a-pair.toml", ErrorCode::config_field, "few_shot[0].question_tokens"},
  };
  for (const Case& c : cases) {
    const std::string path = kBadDir + "/" + c.file;
    // The expected line is the one the file marks, found independently of the loader.
    const std::string text = read_text(path);
    REQUIRE(!text.empty());
    size_t line = 0, n = 0;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);) {
      ++n;
      if (l.find("# <- error") != std::string::npos) line = n;
    }
    REQUIRE(line > 0);
    Result<Workload> w = load_workload(path);
    INFO(c.file << " -> " << (w.ok() ? std::string("loaded") : w.error().describe()));
    REQUIRE(!w.ok());
    CHECK(w.error().code == c.code);
    CHECK(w.error().reason.find(path + ":" + std::to_string(line) + ":") != std::string::npos);
    const std::string field = c.field != nullptr ? c.field : path;
    CHECK(w.error().field == field);
    if (c.field != nullptr) CHECK(w.error().reason.find("'" + field + "'") != std::string::npos);
  }
  Result<Workload> missing = load_workload(kBadDir + "/no-such-file.toml");
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
}

TEST_CASE("randomly mutated workload files load or fail with a typed error", "[workload]") {
  // std::mt19937_64's output sequence is fixed by the standard; only raw
  // outputs are used (distributions are implementation-defined).
  const char* replacements[] = {
      "0",      "1",     "2",   "-1",  "17", "65537", "100001", "9223372036854775807", "99999999999999999999",
      "[1, 2]", "\"x\"", "1.5", "true"};
  const char inserts[] = {'[', ']', '"', '=', ',', '#', '\n', '/', '0'};
  int loaded = 0, rejected = 0;
  for (const std::string& f : shipped_files()) {
    std::vector<std::string> base;
    {
      std::istringstream in(read_text(f));
      for (std::string l; std::getline(in, l);) base.push_back(l);
    }
    REQUIRE(!base.empty());
    for (uint64_t k = 0; k < 40; ++k) {
      const uint64_t seed = 0x5EED0000 + k * 131 + base.size();
      INFO("file " << f << " mutation seed " << seed);
      std::mt19937_64 rng(seed);
      std::vector<std::string> lines = base;
      const int mutations = 1 + static_cast<int>(rng() % 3);
      for (int m = 0; m < mutations; ++m) {
        const size_t i = rng() % lines.size();
        switch (rng() % 5) {
          case 0:
            lines.erase(lines.begin() + static_cast<long>(i));
            break;  // delete a line
          case 1:
            lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
            break;   // duplicate it
          case 2: {  // change the number (or value) after '='
            const size_t eq = lines[i].find('=');
            if (eq != std::string::npos)
              lines[i] = lines[i].substr(0, eq + 1) + " " +
                         replacements[rng() % (sizeof(replacements) / sizeof(replacements[0]))];
            break;
          }
          case 3: {  // change one digit
            std::vector<size_t> digits;
            for (size_t c = 0; c < lines[i].size(); ++c)
              if (lines[i][c] >= '0' && lines[i][c] <= '9') digits.push_back(c);
            if (!digits.empty()) lines[i][digits[rng() % digits.size()]] = static_cast<char>('0' + rng() % 10);
            break;
          }
          default:  // insert a TOML metacharacter
            lines[i].insert(rng() % (lines[i].size() + 1), 1, inserts[rng() % sizeof(inserts)]);
        }
        if (lines.empty()) lines.push_back("");
      }
      std::string text;
      for (const std::string& l : lines) text += l + "\n";
      Result<Workload> w = parse_workload(text, "mutant.toml");
      if (w.ok()) {
        ++loaded;
        check_invariants(*w);
        CHECK(w->max_context_tokens() <= 65536u);
      } else {
        ++rejected;
        const ErrorCode code = w.error().code;
        CHECK((code == ErrorCode::config_parse || code == ErrorCode::config_field));
        CHECK(w.error().reason.find("mutant.toml:") != std::string::npos);
      }
    }
  }
  // Both outcomes occur, so the mutations neither all break nor all miss.
  CHECK(loaded > 0);
  CHECK(rejected > 0);
}

TEST_CASE("templated prompts: items at their schema's declared positions, revised prompts on generation 2",
          "[workload][prompt]") {
  // config/workloads/templated.toml: S = 96, name [2, 6], T = 64, D = 160,
  // 48 prompts of which the last 12 are revised (the document 32 later).
  const Workload w = load_ok(kWorkloadDir + "/templated.toml");
  REQUIRE(w.jobs.size() == 48);
  REQUIRE(w.schemas.size() == 2);
  CHECK(w.schemas[0].schema_id == w.schemas[1].schema_id);
  CHECK(w.schemas[0].generation == 1);
  CHECK(w.schemas[1].generation == 2);
  std::map<std::string, std::vector<TokenId>> document_text;
  uint32_t revised = 0;
  for (const Job& j : w.jobs) {
    REQUIRE(j.kind == JobKind::templated);
    REQUIRE(j.templated.has_value());
    const TemplatedSchema& schema = w.schemas.at(j.templated->schema);
    revised += schema.generation == 2 ? 1 : 0;
    const uint32_t shift = schema.generation == 2 ? 32 : 0;
    const auto& items = j.templated->items;
    REQUIRE(items.size() == 5);
    CHECK(items[0].module_id == "system");
    CHECK(items[0].position_begin == 0);
    CHECK(items[0].tokens.size() == 96);
    CHECK(items[1].module_id.empty());
    CHECK(items[1].position_begin == 96);
    CHECK(items[1].tokens.size() >= 2);
    CHECK(items[1].tokens.size() <= 6);
    CHECK(items[2].module_id == "tools");
    CHECK(items[2].position_begin == 96 + 6);
    CHECK(items[3].module_id == "document");
    CHECK(items[3].position_begin == 96 + 6 + 64 + shift);
    CHECK(items[4].module_id.empty());
    CHECK(items[4].position_begin == 96 + 6 + 64 + shift + 160 + 16);
    // The schema's TOML declares the same ranges.
    for (const TemplatedItem& item : items)
      if (!item.module_id.empty()) {
        const std::string range = "id = \"" + item.module_id + "\"\npositions = [" +
                                  std::to_string(item.position_begin) + ", " +
                                  std::to_string(item.position_begin + item.tokens.size()) + "]";
        CHECK(schema.toml.find(range) != std::string::npos);
      }
    // The prompt is the items in declared order: prefix, then the question.
    std::vector<TokenId> prefix;
    for (size_t i = 0; i < 4; ++i) prefix.insert(prefix.end(), items[i].tokens.begin(), items[i].tokens.end());
    CHECK(j.prefix == prefix);
    REQUIRE(j.turns.size() == 1);
    CHECK(j.turns[0].user_tokens == items[4].tokens);
    // One text per document, whatever prompt renders it.
    auto [it, fresh] = document_text.emplace(items[3].parameters.at("doc_id"), items[3].tokens);
    if (!fresh) CHECK(it->second == items[3].tokens);
  }
  CHECK(revised == 12);
  CHECK(document_text.size() <= 4);
}

TEST_CASE("templated tables: revised_prompts above prompts is refused, naming the field", "[workload][prompt]") {
  const std::string base =
      "[workload]\nname = \"t\"\nseed = 1\n[[tenant]]\nnamespace = \"a/b\"\n[[templated]]\ntenant = \"a/b\"\n"
      "prompts = 4\nsystem_tokens = 8\ntool_tokens = 8\ntoolsets = 1\ndocuments = 1\ndocument_tokens = 8\n"
      "name_tokens = [1, 2]\nquestion_tokens = [1, 2]\ndecode_tokens = 2\n";
  const Workload ok = parse_ok(base + "revised_prompts = 4\n");
  CHECK(ok.schemas.size() == 2);
  CHECK(parse_ok(base).schemas.size() == 1);
  Result<Workload> bad = parse_workload(base + "revised_prompts = 5\n", "inline.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().field == "templated[0].revised_prompts");
}
