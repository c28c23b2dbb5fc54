// [node][identity] Per-request identity extras on the wire (0x07B, 0x07D):
// a lookup, a publication and a reuse acquire carry the request's adapter
// and version, multimodal inputs with their positions, prompt-embedding
// digests and its own salt, and both index owners key blocks with them.
// Expected hits are derived from the blocks each change touches (P = 16,
// a 40-token prompt has two full blocks): the hash chain keys per block, so
// a change confined to block 1 keeps block 0's hit; the radix index keys the
// whole subtree, so any change loses everything. Same extras reuse across
// workers; malformed extras are refused by field, after authorization.
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

RequestIdentity base_identity() {
  return RequestIdentity{"lora-fr", "3", {{"image-1", 20, 4}}, {std::string(64, 'a'), std::string(64, 'b')}, "user-9"};
}

Error match_error(Client& c, const std::vector<TokenId>& prompt, const RequestIdentity& id,
                  const std::string& ns = "test/shared") {
  Result<PrefixBatchReceipt> r =
      c.call(PrefixBatch{{}, {PrefixMatchOp{ns, RequestId{0}, RequestGeneration{0}, prompt, {}, id}}});
  REQUIRE(r.ok());
  const auto* e = std::get_if<Error>(&r->outcomes.at(0));
  REQUIRE(e != nullptr);
  return *e;
}

}  // namespace

TEST_CASE("node identity extras: a request differing in one extra reuses only what that extra leaves equal",
          "[node][identity]") {
  const std::string config =
      GENERATE(std::string("tests/data/node/node-test.toml"), std::string("tests/data/node/node-radix-test.toml"));
  const bool radix = config.find("radix") != std::string::npos;
  INFO(config);
  ScratchDir dir("node-identity");
  InProcessNode n(dir, config);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const std::vector<TokenId> prompt = prompt_of(4, 40);
  const RequestIdentity id = base_identity();
  (void)serve_and_publish(*a, prompt, nullptr, "test/shared", id);

  // The same extras reuse across workers.
  CHECK(match(*b, "test/shared", prompt, id).runtime_hit_tokens == 32);

  struct Variant {
    const char* what;
    RequestIdentity identity;
    uint32_t hash_chain_hit;  // blocks before the first one the change touches
  };
  std::vector<Variant> variants;
  auto changed = [&](const char* what, uint32_t hit, auto&& edit) {
    RequestIdentity v = id;
    edit(v);
    variants.push_back(Variant{what, v, hit});
  };
  changed("adapter id", 0, [](RequestIdentity& v) { v.adapter_id = "lora-de"; });
  changed("adapter version", 0, [](RequestIdentity& v) { v.adapter_version = "4"; });
  changed("request salt", 0, [](RequestIdentity& v) { v.cache_salt = "user-10"; });
  changed("no salt", 0, [](RequestIdentity& v) { v.cache_salt.clear(); });
  changed("multimodal identifier (block 1)", 16, [](RequestIdentity& v) { v.multimodal[0].identifier = "image-2"; });
  changed("multimodal offset (block 1)", 16, [](RequestIdentity& v) { v.multimodal[0].offset = 21; });
  changed("multimodal input in block 0", 0, [](RequestIdentity& v) { v.multimodal[0].offset = 3; });
  changed("no multimodal input", 16, [](RequestIdentity& v) { v.multimodal.clear(); });
  changed("block 1's embedding digest", 16, [](RequestIdentity& v) { v.prompt_embedding_sha256[1][5] = 'c'; });
  changed("block 0's embedding digest", 0, [](RequestIdentity& v) { v.prompt_embedding_sha256[0][0] = 'c'; });
  variants.push_back(Variant{"a plain token prompt", RequestIdentity{}, 0});
  for (const Variant& v : variants) {
    INFO(v.what);
    CHECK(match(*b, "test/shared", prompt, v.identity).runtime_hit_tokens == (radix ? 0u : v.hash_chain_hit));
  }

  // A reuse acquire carries them too: the same extras get a receipt; a
  // different adapter finds no candidate.
  auto acquire = [&](const RequestIdentity& ident) {
    Result<ReuseBatchReceipt> r =
        b->call(ReuseBatch{{},
                           {ReuseAcquireOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt,
                                           LogitsPath::logits_required, false, ident}}});
    REQUIRE(r.ok());
    return r->outcomes.at(0);
  };
  const ReuseOutcome same = acquire(id);
  REQUIRE(std::holds_alternative<ExecutableReuseReceipt>(same));
  CHECK(std::get<ExecutableReuseReceipt>(same).covered_interval == TokenInterval{0, 32});
  RequestIdentity other_adapter = id;
  other_adapter.adapter_id = "lora-de";
  const ReuseOutcome other = acquire(other_adapter);
  REQUIRE(std::holds_alternative<ReuseRejectionReceipt>(other));
  CHECK(std::get<ReuseRejectionReceipt>(other).step == ReuseStep::lookup_candidate);

  // Malformed extras: refused by field, nothing looked up.
  const int64_t lookups = n.stat("prefix_index", "lookups");
  RequestIdentity bad = id;
  bad.adapter_id.clear();
  CHECK(match_error(*b, prompt, bad).field == "identity.adapter_version");
  bad = id;
  bad.multimodal[0].length = 0;
  CHECK(match_error(*b, prompt, bad).field == "identity.multimodal[0]");
  bad = id;
  bad.prompt_embedding_sha256[1] = std::string(64, 'A');
  CHECK(match_error(*b, prompt, bad).field == "identity.prompt_embedding_sha256[1]");
  CHECK(match_error(*b, prompt, bad).code == ErrorCode::invalid_argument);
  CHECK(n.stat("prefix_index", "lookups") == lookups);
  // Authorization first: an ungranted namespace with bad extras is refused
  // for the namespace, not for the extras.
  CHECK(match_error(*b, prompt, bad, "test/other").code == ErrorCode::authorization_namespace_denied);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
}

}  // namespace kvrt::test

namespace kvrt::test {

// Authorization strictly first on every path of both index owners and the
// reuse coordinator (0x0CE): a session not granted the namespace, whose op
// is also wrong in every other way (malformed identity extras, a stale
// computed generation, a block range past its tokens, a request it does not
// own), is refused on its authorization, and the refusal names nothing of
// the namespace or the index (no generation, salt, layout or identity).
TEST_CASE("node refusals: an unauthorized op wrong in every other way is refused on its authorization alone",
          "[node][identity]") {
  const std::string config =
      GENERATE(std::string("tests/data/node/node-test.toml"), std::string("tests/data/node/node-radix-test.toml"));
  INFO(config);
  ScratchDir dir("node-refusal-order");
  InProcessNode n(dir, config);
  auto owner = n.connect("worker-0");
  auto outsider = n.connect("worker-3");  // granted test/other only
  REQUIRE(owner->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(outsider->call(AuthorizeRequest{{}, "test/other"}).ok());
  const std::vector<TokenId> prompt = prompt_of(3, 40);
  RequestFence fence;
  (void)serve_and_publish(*owner, prompt, &fence);

  const RequestIdentity malformed{"", "7", {{"", 90, 0}}, {"not-hex"}, std::string(300, 's')};
  auto check_refusal = [&](const Error& e) {
    INFO(e.describe());
    CHECK(e.code == ErrorCode::authorization_namespace_denied);
    CHECK(e.field == "namespace_name");
    for (const std::string& leak : {std::string("generation"), std::string("salt"), std::string("layout"),
                                    std::string("lora"), std::string("adapter"), std::string("not-hex")})
      CHECK(e.describe().find(leak) == std::string::npos);
  };
  Result<PrefixBatchReceipt> r = outsider->call(PrefixBatch{
      {},
      {PrefixMatchOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt, {}, malformed},
       PrefixPublishOp{"test/shared", fence.request, prompt, 3, 99, malformed, NamespaceGeneration{12345}}}});
  REQUIRE(r.ok());
  for (const PrefixOutcome& o : r->outcomes) {
    REQUIRE(std::holds_alternative<Error>(o));
    check_refusal(std::get<Error>(o));
  }
  Result<ReuseBatchReceipt> reuse = outsider->call(ReuseBatch{
      {}, {ReuseAcquireOp{"test/shared", RequestId{77}, RequestGeneration{9}, prompt, {}, true, malformed}}});
  REQUIRE(reuse.ok());
  REQUIRE(reuse->outcomes.size() == 1);
  if (const auto* e = std::get_if<Error>(&reuse->outcomes[0])) {
    check_refusal(*e);
  } else {
    // The transaction answers a refusal at step 1 (authorization), with
    // nothing leased and no operand of the namespace.
    const auto* rej = std::get_if<ReuseRejectionReceipt>(&reuse->outcomes[0]);
    REQUIRE(rej != nullptr);
    CHECK(rej->step == ReuseStep::authorize);
    CHECK(rej->leases_released.empty());
    for (const std::string& leak : {std::string("salt"), std::string("layout"), std::string("lora")})
      CHECK(rej->detail.find(leak) == std::string::npos);
  }
  // The owner's index is as it was: its prompt still hits, its pages intact.
  CHECK(match(*owner, "test/shared", prompt).runtime_hit_tokens == 32);
}

}  // namespace kvrt::test
