// [node][tier] The session tier (0x0CC) through a live node: a worker saves
// a conversation's history and resumes it in the next turn, bitwise, under
// the identity the node derives (its principal, the namespace generation,
// the model with the identity extras, the layout, the position contract);
// every change the spec names refuses the resume and the turn recomputes:
// another adapter, another position contract, a prompt that does not
// continue the history, another worker's session of the same label, a
// namespace rotation, a damaged save; and a node without [tier] refuses
// both routes, typed.
#include <filesystem>

#include "services/identity/layout_loader.hpp"
#include "services/tier/session_history.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

// node-test.toml with a [tier] in the scratch directory.
std::string tier_config(const ScratchDir& dir) {
  return test_node_config(dir, "", {}, "[tier]\ndirectory = \"" + dir.file("tier") + "\"\nbudget_mib = 4\n");
}

// B_row,g of the test node's layout, per cache group.
std::vector<uint64_t> group_row_bytes() {
  const CacheLayoutManifest layout =
      load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/small-two-group.toml").value();
  std::vector<uint64_t> out;
  for (const CacheGroupLayout& g : layout.cache_groups) out.push_back(g.row_bytes());
  return out;
}

SessionSaveRequest save_of(const std::vector<TokenId>& history, const std::string& label = "conversation-7") {
  SessionSaveRequest r;
  r.namespace_name = "test/shared";
  r.session_label = label;
  r.tokens = history;
  // Every cache group's canonical rows, a function of (group, row, byte).
  const std::vector<uint64_t> row_bytes = group_row_bytes();
  for (uint32_t g = 0; g < row_bytes.size(); ++g) {
    std::vector<uint8_t>& rows = r.group_rows.emplace_back();
    for (size_t t = 0; t < history.size(); ++t)
      for (uint64_t b = 0; b < row_bytes[g]; ++b) rows.push_back(static_cast<uint8_t>(g * 101 + t * 13 + b));
  }
  return r;
}

SessionResumeRequest resume_of(const std::vector<TokenId>& prompt, const std::string& label = "conversation-7") {
  SessionResumeRequest r;
  r.namespace_name = "test/shared";
  r.session_label = label;
  r.prompt = prompt;
  return r;
}

SessionTierRefusal refusal_of(const Result<SessionResumeReceipt>& r) {
  REQUIRE(r.ok());
  const auto* no = std::get_if<SessionResumeRefusal>(&r->outcome);
  REQUIRE(no != nullptr);
  CHECK(no->reason == reason_of(no->refusal));
  return no->refusal;
}

}  // namespace

TEST_CASE("a saved conversation resumes bitwise through the node, under the node's identity", "[node][tier]") {
  ScratchDir dir("node-tier");
  InProcessNode n(dir, tier_config(dir));
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  CHECK(n.stat("node", "reuse_tier") == 1);

  const std::vector<TokenId> history = prompt_of(5, 40);
  std::vector<TokenId> next = history;
  for (TokenId t = 0; t < 6; ++t) next.push_back(800 + t);
  const SessionSaveRequest saved_request = save_of(history);
  const Result<SessionSaveReceipt> saved = a->call(saved_request);
  INFO((saved.ok() ? std::string("ok") : saved.error().describe()));
  REQUIRE(saved.ok());
  const SessionReuseReceipt& s = saved->receipt;
  CHECK(s.session_id == "conversation-7");
  CHECK(s.namespace_id == "test/shared");
  CHECK(s.covered_interval == TokenInterval{0, 40});
  CHECK(s.position_truncation_contract == "absolute");
  CHECK(s.tenant_id.starts_with("principal-"));
  CHECK(n.stat("node", "reuse_tier_saves") == 1);

  // The next turn: H = 40 rows come back, U = 6 tokens to prefill.
  const Result<SessionResumeReceipt> resumed = a->call(resume_of(next));
  REQUIRE(resumed.ok());
  const auto* got = std::get_if<SessionResumed>(&resumed->outcome);
  REQUIRE(got != nullptr);
  CHECK(got->receipt.resume_prefill_tokens == 6);
  CHECK(got->receipt.semantic_digest == s.semantic_digest);
  CHECK(got->receipt.source_tier_object_id == s.source_tier_object_id);
  CHECK(got->group_rows == saved_request.group_rows);

  SECTION("another adapter is another semantic identity") {
    SessionResumeRequest r = resume_of(next);
    r.identity.adapter_id = "lora-legal";
    r.identity.adapter_version = "2";
    CHECK(refusal_of(a->call(r)) == SessionTierRefusal::semantic_changed);
  }
  SECTION("another position contract") {
    SessionResumeRequest r = resume_of(next);
    r.position_contract = "sliding-window-4096";
    CHECK(refusal_of(a->call(r)) == SessionTierRefusal::position_contract_changed);
  }
  SECTION("a prompt that does not continue the history") {
    std::vector<TokenId> other = next;
    other[3] += 1;
    CHECK(refusal_of(a->call(resume_of(other))) == SessionTierRefusal::history_not_prefix);
  }
  SECTION("another worker's session of the same label is not seen") {
    CHECK(refusal_of(b->call(resume_of(next))) == SessionTierRefusal::no_saved_history);
  }
  SECTION("a damaged save is an incomplete save, and dropped") {
    const std::filesystem::path file = std::filesystem::path(dir.file("tier")) / s.source_tier_object_id;
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 3);
    CHECK(refusal_of(a->call(resume_of(next))) == SessionTierRefusal::incomplete_save);
    CHECK(refusal_of(a->call(resume_of(next))) == SessionTierRefusal::no_saved_history);
  }
  SECTION("a namespace rotation (a weights update)") {
    REQUIRE(admin->call(NamespaceInvalidateRequest{{}, "test/shared", InvalidationCause::weights, ""}).ok());
    // The old grant is refused before the tier is asked; the new one finds
    // a history of the old generation.
    const Result<SessionResumeReceipt> stale = a->call(resume_of(next));
    REQUIRE_FALSE(stale.ok());
    CHECK(stale.error().code == ErrorCode::authorization_stale_generation);
    REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
    CHECK(refusal_of(a->call(resume_of(next))) == SessionTierRefusal::namespace_rotated);
  }
  SECTION("a purge deletes the generation's saves (0x0CE step 6)") {
    const Result<NamespacePurgeReceipt> purged =
        admin->call(NamespacePurgeRequest{{}, "test/shared", InvalidationCause::weights, "", 0, false});
    INFO((purged.ok() ? std::string("ok") : purged.error().describe()));
    REQUIRE(purged.ok());
    CHECK(purged->external_copies == 1);
    CHECK(n.stat("node", "reuse_tier_objects") == 0);
    REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
    CHECK(refusal_of(a->call(resume_of(next))) == SessionTierRefusal::no_saved_history);
  }
  SECTION("rows of another shape than the node's layout are refused, typed") {
    SessionSaveRequest bad = save_of(history, "conversation-8");
    bad.group_rows[0].pop_back();
    const Result<SessionSaveReceipt> refused = a->call(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::invalid_argument);
    CHECK(refused.error().field == "group_rows");
    bad.group_rows.pop_back();
    CHECK(a->call(bad).error().field == "group_rows");
  }
  SECTION("a namespace the worker was not granted") {
    SessionResumeRequest r = resume_of(next);
    r.namespace_name = "test/other";
    const Result<SessionResumeReceipt> denied = a->call(r);
    REQUIRE_FALSE(denied.ok());
    CHECK(denied.error().code == ErrorCode::authorization_namespace_denied);
  }
  CHECK(n.stat("node", "reuse_tier_resumes") >= 1);
  const Result<NodeStats> stats = read_node_stats(n.descriptor, /*validate=*/true);
  REQUIRE(stats.ok());
  for (const OwnerStats& o : stats->owners) {
    INFO(o.owner << ": " << o.validate_error);
    CHECK(o.validate_ok);
  }
}

TEST_CASE("a node without [tier] refuses the session routes, typed", "[node][tier]") {
  ScratchDir dir("node-no-tier");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const Result<SessionSaveReceipt> saved = a->call(save_of(prompt_of(1, 8)));
  REQUIRE_FALSE(saved.ok());
  CHECK(saved.error().code == ErrorCode::invalid_argument);
  CHECK(saved.error().field == "tier");
  const Result<SessionResumeReceipt> resumed = a->call(resume_of(prompt_of(1, 9)));
  REQUIRE_FALSE(resumed.ok());
  CHECK(resumed.error().field == "tier");
  CHECK(n.stat("node", "reuse_tier") == 0);
}

}  // namespace kvrt::test
