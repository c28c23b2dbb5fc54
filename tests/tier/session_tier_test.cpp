// [tier] The session tier of CachedAttention (services/tier, spec 0x0CC):
// a demoted history resumes bitwise with the receipt 0x0CC lists; every
// compatibility failure the spec names (adapter, weights, positions,
// quantizer, namespace rotation, incomplete save) refuses, typed, and
// falls back to recomputation; retirement, the budget and a restart; and a
// seeded random run against a model of what is saved.
#include "services/tier/session_tier.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "services/tier/session_object_file.hpp"

namespace kvrt::test {
namespace {

namespace fs = std::filesystem;

struct TierDir {
  std::string path;
  explicit TierDir(const std::string& name)
      : path((fs::temp_directory_path() / ("kvrt-tier-" + name + "-" + std::to_string(::getpid()))).string()) {
    fs::remove_all(path);
  }
  ~TierDir() { fs::remove_all(path); }
};

SessionHistoryIdentity identity(const std::string& session = "chat-1") {
  return SessionHistoryIdentity{session,
                                "tenant-a",
                                "prod/tenant-a",
                                NamespaceGeneration{3},
                                sha256(std::string_view("model-v1+adapter-none")),
                                sha256(std::string_view("fp16 layout")),
                                "absolute-positions.no-truncation"};
}

// H tokens and two cache groups of 48 and 16 bytes per row, each byte a
// function of (group, row, byte): a resumed row is checked bitwise.
SessionHistory history(const SessionHistoryIdentity& id, uint32_t H, TokenId first = 100) {
  SessionHistory h{id, {}, {{}, {}}};
  for (uint32_t t = 0; t < H; ++t) h.tokens.push_back(first + static_cast<TokenId>(t));
  const uint32_t row_bytes[2] = {48, 16};
  for (uint32_t g = 0; g < 2; ++g)
    for (uint32_t t = 0; t < H; ++t)
      for (uint32_t b = 0; b < row_bytes[g]; ++b) h.group_rows[g].push_back(static_cast<uint8_t>(g * 131 + t * 7 + b));
  return h;
}

std::vector<TokenId> prompt_after(const SessionHistory& h, uint32_t new_tokens) {
  std::vector<TokenId> p = h.tokens;
  for (uint32_t i = 0; i < new_tokens; ++i) p.push_back(9000 + static_cast<TokenId>(i));
  return p;
}

SessionTierRefusal refusal_of(const SessionResumeAnswer& a) {
  REQUIRE(std::holds_alternative<SessionResumeRefused>(a));
  return std::get<SessionResumeRefused>(a).refusal;
}

std::string only_object_file(const std::string& dir) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) return e.path().string();
  FAIL("no object file");
  return {};
}

}  // namespace

TEST_CASE("session tier: a demoted history resumes bitwise with its 0x0CC receipt", "[tier]") {
  TierDir dir("resume");
  SessionTier tier = SessionTier::open({dir.path, 1 << 20}).value();
  const SessionHistory h = history(identity(), 40);
  const SessionReuseReceipt saved = tier.demote(h).value();
  CHECK(saved.covered_interval == TokenInterval{0, 40});
  CHECK(saved.session_id == "chat-1");
  CHECK(saved.tenant_id == "tenant-a");
  CHECK(saved.namespace_id == "prod/tenant-a");
  CHECK(saved.namespace_generation == NamespaceGeneration{3});
  CHECK(saved.semantic_digest == identity().semantic_digest);
  CHECK(saved.layout_digest == identity().layout_digest);
  CHECK(saved.position_truncation_contract == "absolute-positions.no-truncation");
  CHECK(saved.covered_tokens_digest == session_tokens_digest(h.tokens));
  CHECK(saved.publication_generation == 1);
  CHECK_FALSE(saved.source_tier_object_id.empty());
  REQUIRE(tier.validate().ok());

  // The next turn: H = 40 saved, U = 9 new tokens to prefill.
  const SessionResumeAnswer a = tier.resume(identity(), prompt_after(h, 9));
  REQUIRE(std::holds_alternative<SessionResume>(a));
  const SessionResume& r = std::get<SessionResume>(a);
  CHECK(r.receipt.resume_prefill_tokens == 9);
  CHECK(r.receipt.covered_interval == TokenInterval{0, 40});
  CHECK(r.receipt.source_tier_object_id == saved.source_tier_object_id);
  CHECK(r.group_rows == h.group_rows);
  CHECK(tier.stats().resumes == 1);
  CHECK(tier.stats().resumed_rows == 40);

  // A longer history of the same session replaces the older save.
  const SessionHistory longer = history(identity(), 60);
  CHECK(tier.demote(longer).value().publication_generation == 2);
  CHECK(tier.stats().objects == 1);
  const SessionResumeAnswer b = tier.resume(identity(), prompt_after(longer, 1));
  REQUIRE(std::holds_alternative<SessionResume>(b));
  CHECK(std::get<SessionResume>(b).group_rows == longer.group_rows);
  CHECK(tier.validate().ok());
}

TEST_CASE("session tier: every identity change is a compatibility failure, not a resume", "[tier]") {
  TierDir dir("refusals");
  SessionTier tier = SessionTier::open({dir.path, 1 << 20}).value();
  const SessionHistory h = history(identity(), 32);
  REQUIRE(tier.demote(h).ok());
  const std::vector<TokenId> prompt = prompt_after(h, 5);

  SECTION("an adapter or weights change: the semantic digest differs") {
    SessionHistoryIdentity now = identity();
    now.semantic_digest = sha256(std::string_view("model-v1+adapter-legal-v2"));
    CHECK(refusal_of(tier.resume(now, prompt)) == SessionTierRefusal::semantic_changed);
    CHECK(reason_of(SessionTierRefusal::semantic_changed) == RejectionReason::semantic_mismatch);
  }
  SECTION("a quantizer change: the layout digest differs") {
    SessionHistoryIdentity now = identity();
    now.layout_digest = sha256(std::string_view("fp8 e4m3 layout"));
    CHECK(refusal_of(tier.resume(now, prompt)) == SessionTierRefusal::layout_changed);
  }
  SECTION("a position contract change") {
    SessionHistoryIdentity now = identity();
    now.position_truncation_contract = "sliding-window-4096";
    CHECK(refusal_of(tier.resume(now, prompt)) == SessionTierRefusal::position_contract_changed);
  }
  SECTION("a namespace rotation (weights update, purge)") {
    SessionHistoryIdentity now = identity();
    now.namespace_generation = NamespaceGeneration{4};
    CHECK(refusal_of(tier.resume(now, prompt)) == SessionTierRefusal::namespace_rotated);
  }
  SECTION("another tenant's session of the same name") {
    SessionHistoryIdentity now = identity();
    now.tenant_id = "tenant-b";
    now.namespace_id = "prod/tenant-b";
    // Not told apart from a session never saved: that would disclose it.
    CHECK(refusal_of(tier.resume(now, prompt)) == SessionTierRefusal::no_saved_history);
  }
  SECTION("a prompt that does not continue the history, or adds nothing") {
    std::vector<TokenId> edited = prompt;
    edited[7] += 1;
    CHECK(refusal_of(tier.resume(identity(), edited)) == SessionTierRefusal::history_not_prefix);
    CHECK(refusal_of(tier.resume(identity(), h.tokens)) == SessionTierRefusal::history_not_prefix);
  }
  SECTION("an unknown session") {
    CHECK(refusal_of(tier.resume(identity("chat-2"), prompt)) == SessionTierRefusal::no_saved_history);
  }
  // A refusal changes nothing: the history still resumes under its identity.
  CHECK(tier.stats().refusals >= 1);
  CHECK(std::holds_alternative<SessionResume>(tier.resume(identity(), prompt)));
  CHECK(tier.validate().ok());
}

TEST_CASE("session tier: an incomplete or damaged save is refused and dropped", "[tier]") {
  TierDir dir("incomplete");
  SessionTier tier = SessionTier::open({dir.path, 1 << 20}).value();
  const SessionHistory h = history(identity(), 24);
  REQUIRE(tier.demote(h).ok());
  const std::string file = only_object_file(dir.path);
  SECTION("cut short") { fs::resize_file(file, fs::file_size(file) - 10); }
  SECTION("one byte of a row changed") {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
    f.put('\x5a');
  }
  SECTION("gone") { fs::remove(file); }
  const SessionResumeAnswer a = tier.resume(identity(), prompt_after(h, 3));
  CHECK(refusal_of(a) == SessionTierRefusal::incomplete_save);
  CHECK(tier.stats().objects == 0);
  CHECK(refusal_of(tier.resume(identity(), prompt_after(h, 3))) == SessionTierRefusal::no_saved_history);
  CHECK(tier.validate().ok());
}

TEST_CASE("session tier: retirement, the budget, bad histories and a restart", "[tier]") {
  TierDir dir("budget");
  const uint64_t size = encode_session_object(history(identity("s0"), 20)).size();
  // Room for two objects of this size.
  SessionTier tier = SessionTier::open({dir.path, 2 * size + size / 2}).value();
  REQUIRE(tier.demote(history(identity("s0"), 20)).ok());
  REQUIRE(tier.demote(history(identity("s1"), 20)).ok());
  // s0 is used, so s1 is the least recently used when s2 arrives.
  REQUIRE(
      std::holds_alternative<SessionResume>(tier.resume(identity("s0"), prompt_after(history(identity("s0"), 20), 1))));
  REQUIRE(tier.demote(history(identity("s2"), 20)).ok());
  CHECK(tier.stats().evicted == 1);
  CHECK(refusal_of(tier.resume(identity("s1"), prompt_after(history(identity("s1"), 20), 1))) ==
        SessionTierRefusal::no_saved_history);
  CHECK(
      std::holds_alternative<SessionResume>(tier.resume(identity("s0"), prompt_after(history(identity("s0"), 20), 1))));
  REQUIRE(tier.validate().ok());

  // Larger than the whole budget: refused, nothing changes.
  const uint64_t before = tier.stats().bytes;
  Result<SessionReuseReceipt> huge = tier.demote(history(identity("s3"), 200));
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().field == "budget_bytes");
  CHECK(tier.stats().bytes == before);
  // Malformed histories.
  SessionHistory ragged = history(identity("s4"), 10);
  ragged.group_rows[1].pop_back();
  CHECK(tier.demote(ragged).error().field == "group_rows");
  CHECK(tier.demote(SessionHistory{identity("s5"), {}, {{1}}}).error().field == "tokens");

  // A purge's or weights update's new generation retires the older saves.
  CHECK(tier.retire("prod/tenant-a", NamespaceGeneration{4}) == 2);
  CHECK(tier.stats().objects == 0);
  CHECK(tier.validate().ok());

  // A restart: the new owner starts empty and removes what the old one left,
  // a save it did not finish included.
  REQUIRE(tier.demote(history(identity("s6"), 20)).ok());
  std::ofstream(fs::path(dir.path) / "deadbeef-9.kvses.tmp") << "half a save";
  SessionTier again = SessionTier::open({dir.path, 1 << 20}).value();
  CHECK(again.stats().objects == 0);
  CHECK(fs::is_empty(dir.path));
  CHECK(again.validate().ok());
  CHECK_FALSE(SessionTier::open({"", 1}).ok());
  CHECK_FALSE(SessionTier::open({dir.path, 0}).ok());
}

TEST_CASE("session tier property: random saves, resumes, retirements and damage follow the model", "[tier][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 16));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TierDir dir("property-" + std::to_string(seed));
  const uint64_t budget = 6 * encode_session_object(history(identity("x"), 30)).size();
  SessionTier tier = SessionTier::open({dir.path, budget}).value();
  // The model: what each session's last save was, and the generation now.
  std::map<std::string, SessionHistory> saved;
  uint64_t generation = 3;
  std::map<std::string, uint64_t> last_use;
  uint64_t clock = 0;
  for (int step = 0; step < 150; ++step) {
    const std::string session = "s" + std::to_string(rng() % 8);
    SessionHistoryIdentity id = identity(session);
    id.namespace_generation = NamespaceGeneration{generation};
    const uint32_t what = static_cast<uint32_t>(rng() % 10);
    INFO("step " << step << " op " << what << " " << session);
    if (what < 4) {
      const SessionHistory h = history(id, 5 + static_cast<uint32_t>(rng() % 26), static_cast<TokenId>(rng() % 3));
      REQUIRE(tier.demote(h).ok());
      saved[session] = h;
      last_use[session] = ++clock;
      // The model's eviction: least recently used first, never the new save.
      uint64_t bytes = 0;
      for (const auto& [s, sh] : saved) bytes += encode_session_object(sh).size();
      while (bytes > budget) {
        auto victim = saved.end();
        for (auto it = saved.begin(); it != saved.end(); ++it)
          if (it->first != session && (victim == saved.end() || last_use[it->first] < last_use[victim->first]))
            victim = it;
        bytes -= encode_session_object(victim->second).size();
        saved.erase(victim);
      }
    } else if (what < 8) {
      // Resume, sometimes under a changed identity or with another prompt.
      const auto it = saved.find(session);
      std::vector<TokenId> prompt =
          it != saved.end() ? prompt_after(it->second, 1 + rng() % 4) : std::vector<TokenId>{1, 2, 3};
      const uint32_t change = static_cast<uint32_t>(rng() % 6);
      if (change == 1) id.semantic_digest = sha256(std::string_view("other weights"));
      if (change == 2) id.position_truncation_contract = "window";
      if (change == 3 && !prompt.empty()) prompt[0] += 50;
      const SessionResumeAnswer a = tier.resume(id, prompt);
      if (it == saved.end()) {
        CHECK(refusal_of(a) == SessionTierRefusal::no_saved_history);
      } else if (it->second.identity.namespace_generation != id.namespace_generation) {
        CHECK(refusal_of(a) == SessionTierRefusal::namespace_rotated);
      } else if (change == 1) {
        CHECK(refusal_of(a) == SessionTierRefusal::semantic_changed);
      } else if (change == 2) {
        CHECK(refusal_of(a) == SessionTierRefusal::position_contract_changed);
      } else if (change == 3) {
        CHECK(refusal_of(a) == SessionTierRefusal::history_not_prefix);
      } else {
        REQUIRE(std::holds_alternative<SessionResume>(a));
        CHECK(std::get<SessionResume>(a).group_rows == it->second.group_rows);
        CHECK(std::get<SessionResume>(a).receipt.resume_prefill_tokens == prompt.size() - it->second.tokens.size());
        last_use[session] = ++clock;
      }
    } else if (what == 8) {
      // A weights update: the generation moves, older saves are retired.
      ++generation;
      const uint64_t retired = tier.retire("prod/tenant-a", NamespaceGeneration{generation});
      CHECK(retired == saved.size());
      saved.clear();
    } else if (!saved.empty()) {
      // Damage one saved object on disk: its next resume is an incomplete save.
      auto victim = std::next(saved.begin(), static_cast<long>(rng() % saved.size()));
      const SessionResumeAnswer before = tier.resume(victim->second.identity, prompt_after(victim->second, 1));
      REQUIRE(std::holds_alternative<SessionResume>(before));
      last_use[victim->first] = ++clock;
      const std::string object = std::get<SessionResume>(before).receipt.source_tier_object_id;
      fs::resize_file(fs::path(dir.path) / object, fs::file_size(fs::path(dir.path) / object) - 1);
      CHECK(refusal_of(tier.resume(victim->second.identity, prompt_after(victim->second, 1))) ==
            SessionTierRefusal::incomplete_save);
      saved.erase(victim);
    }
    REQUIRE(tier.stats().objects == saved.size());
    REQUIRE(tier.validate().ok());
  }
}

}  // namespace kvrt::test
