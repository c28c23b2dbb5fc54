// [node][invalidation] An invalidation on a live node (0x01A), through the
// admin route as `kvrt admin invalidate` sends it, for either prefix index:
// the namespace's grants end, a worker's next lookup is refused as stale
// (not as unauthorized), the worker authorizes again at the successor
// generation and the old generation's pages never match again, while another
// namespace keeps its generation and its hits. Only an admin session reaches
// the route. Every owner validates after each step (InProcessNode::stat).
#include <nlohmann/json.hpp>

#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

Error lookup_error(Client& c, const std::string& ns, const std::vector<TokenId>& prompt) {
  Result<PrefixBatchReceipt> r =
      c.call(PrefixBatch{{}, {PrefixMatchOp{ns, RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(r.ok());
  const auto* e = std::get_if<Error>(&r->outcomes.at(0));
  REQUIRE(e != nullptr);
  return *e;
}

const NamespaceStatus& standing(const NamespaceStatusReceipt& r, const std::string& ns) {
  for (const NamespaceStatus& s : r.namespaces)
    if (s.namespace_name == ns) return s;
  FAIL("no namespace " << ns << " in the status");
  return r.namespaces.front();
}

}  // namespace

TEST_CASE("node invalidation: the old generation's grants end and its pages never match again",
          "[node][invalidation]") {
  const std::string config =
      GENERATE(std::string("tests/data/node/node-test.toml"), std::string("tests/data/node/node-radix-test.toml"));
  INFO(config);
  ScratchDir dir("node-invalidate");
  InProcessNode n(dir, config);
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  auto other = n.connect("worker-3");
  const NamespaceGrantReceipt granted = a->call(AuthorizeRequest{{}, "test/shared"}).value();
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  const NamespaceGrantReceipt other_grant = other->call(AuthorizeRequest{{}, "test/other"}).value();
  const uint64_t g = granted.generation.value;

  const std::vector<TokenId> prompt = prompt_of(1, 40);
  (void)serve_and_publish(*a, prompt, nullptr);
  REQUIRE(match(*b, "test/shared", prompt).runtime_hit_tokens == 32);
  auto both = n.connect("worker-2");
  REQUIRE(both->call(AuthorizeRequest{{}, "test/other"}).ok());
  (void)serve_and_publish(*other, prompt, nullptr, "test/other");
  REQUIRE(match(*both, "test/other", prompt).runtime_hit_tokens == 32);

  // A worker cannot invalidate, and asking changes nothing.
  const Result<NamespaceInvalidationReceipt> denied =
      b->call(NamespaceInvalidateRequest{{}, "test/shared", InvalidationCause::weights, ""});
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().code == ErrorCode::authorization_route_denied);
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 32);

  const Result<NamespaceInvalidationReceipt> inv =
      admin->call(NamespaceInvalidateRequest{TraceContext{9, 1, 0}, "test/shared", InvalidationCause::weights, ""});
  INFO((inv.ok() ? std::string("ok") : inv.error().describe()));
  REQUIRE(inv.ok());
  CHECK(inv->trace.trace_id == 9);
  CHECK(inv->old_generation.value == g);
  CHECK(inv->new_generation.value == g + 1);
  CHECK(inv->new_model_generation == inv->old_model_generation + 1);
  CHECK(inv->ended_grants == 2);  // worker-0's and worker-1's (a grant is a principal's)
  CHECK(n.stat("authorization", "invalidations") == 1);
  if (config.find("radix") != std::string::npos) {
    // The tree gave generation g's pages back at once: nothing can reach
    // them. (The advance is enqueued before the receipt is answered, and
    // the stats read goes to the same actor after it.)
    CHECK(n.stat("prefix_index", "invalidated_pages") == 2);
    CHECK(n.stat("prefix_index", "cached_pages") == 2);  // test/other's
    CHECK(n.stat("allocator", "node_leases") == n.stat("prefix_index", "cached_blocks"));
  }

  // Both workers' next lookups are refused as stale, by the index itself.
  for (Client* c : {a.get(), b.get()}) {
    const Error e = lookup_error(*c, "test/shared", prompt);
    CHECK(e.code == ErrorCode::authorization_stale_generation);
  }
  // Authorizing again grants the successor; generation g's pages are not
  // found under it.
  const NamespaceGrantReceipt again = b->call(AuthorizeRequest{{}, "test/shared"}).value();
  CHECK(again.generation.value == g + 1);
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 0);
  // Publishing under g + 1 makes the prompt reusable again.
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  (void)serve_and_publish(*a, prompt, nullptr);
  CHECK(match(*b, "test/shared", prompt).runtime_hit_tokens == 32);

  // The other namespace kept its generation and its grant.
  CHECK(match(*both, "test/other", prompt).runtime_hit_tokens == 32);
  const NamespaceStatusReceipt st = admin->call(NamespaceStatusRequest{{}, ""}).value();
  CHECK(standing(st, "test/shared").generation.value == g + 1);
  CHECK(standing(st, "test/shared").invalidations == 1);
  CHECK(standing(st, "test/shared").last_cause == "weights");
  CHECK(standing(st, "test/other").generation.value == other_grant.generation.value);
  CHECK(standing(st, "test/other").invalidations == 0);
  CHECK(standing(st, "test/other").live_grants == 2);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
}

TEST_CASE("kvrt admin invalidate and status: JSON receipts, typed refusals, a worker token refused",
          "[node][invalidation][cli]") {
  ScratchDir dir("admin-cli");
  InProcessNode n(dir);
  auto run = [&](std::vector<std::string> args, int expect_rc) {
    return run_kvrt_against_node(dir, std::move(args), expect_rc);
  };
  auto json_of = [](const std::string& out) {
    // The JSON document is the output's last line group: from the first '{' or '['.
    const size_t at = out.find_first_of("{[");
    REQUIRE(at != std::string::npos);
    return nlohmann::json::parse(out.substr(at));
  };
  const nlohmann::json before = json_of(run({"admin", "status", "--principal", "operator", "--json"}, 0));
  REQUIRE(before.size() == 2);
  CHECK(before[0]["namespace"] == "test/other");
  CHECK(before[1]["namespace"] == "test/shared");
  const uint64_t g = before[1]["generation"];

  const nlohmann::json inv = json_of(run({"admin", "invalidate", "--principal", "operator", "--namespace",
                                          "test/shared", "--cause", "adapter", "--identity", "lora-7", "--json"},
                                         0));
  CHECK(inv["old_generation"] == g);
  CHECK(inv["new_generation"] == g + 1);
  CHECK(inv["changed_facts"] == nlohmann::json::array({"adapter_identity"}));

  const nlohmann::json after =
      json_of(run({"admin", "status", "--principal", "operator", "--namespace", "test/shared", "--json"}, 0));
  REQUIRE(after.size() == 1);
  CHECK(after[0]["generation"] == g + 1);
  CHECK(after[0]["last_cause"] == "adapter");

  // Refusals: a cause the pools cannot follow, an unknown cause, a worker's
  // token. Each exits 2 with the typed reason and changes nothing.
  CHECK(run({"admin", "invalidate", "--principal", "operator", "--namespace", "test/shared", "--cause", "shard",
             "--identity", "tp4"},
            2)
            .find("invalid_argument") != std::string::npos);
  CHECK(run({"admin", "invalidate", "--principal", "operator", "--namespace", "test/shared", "--cause", "moon"}, 2)
            .find("--cause") != std::string::npos);
  CHECK(run({"admin", "invalidate", "--principal", "worker-0", "--namespace", "test/shared", "--cause", "weights"}, 2)
            .find("authorization_route_denied") != std::string::npos);
  CHECK(n.stat("authorization", "invalidations") == 1);
  CHECK(n.stat("authorization", "invalidations_refused") == 1);  // the shard one reached the owner
}

}  // namespace kvrt::test

namespace kvrt::test {

// Rows computed under generation g, published by a session that has
// authorized g+1 since (a request admitted before a weights update that
// finishes after it): the node refuses them as stale, in either index, and
// g+1's index stays empty of them. The grant names the weights of each
// generation, so the engine can tell which weights a request runs on.
TEST_CASE("node invalidation: rows computed under the old generation are never published into the new one",
          "[node][invalidation]") {
  const std::string config =
      GENERATE(std::string("tests/data/node/node-test.toml"), std::string("tests/data/node/node-radix-test.toml"));
  INFO(config);
  ScratchDir dir("node-invalidate-publish");
  InProcessNode n(dir, config);
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  const NamespaceGrantReceipt old_grant = a->call(AuthorizeRequest{{}, "test/shared"}).value();
  CHECK(old_grant.adapter_identity.empty());
  const std::vector<TokenId> prompt = prompt_of(7, 40);
  const AllocationReceipt r = allocation(*a, AllocateOp{static_cast<uint32_t>(prompt.size()), {}, std::nullopt});
  const RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
  (void)allocation(*a, CommitRowsOp{fence, static_cast<uint32_t>(prompt.size())});

  REQUIRE(admin->call(NamespaceInvalidateRequest{{}, "test/shared", InvalidationCause::weights, ""}).ok());
  REQUIRE(admin->call(NamespaceInvalidateRequest{{}, "test/shared", InvalidationCause::adapter, "lora-b"}).ok());
  const NamespaceGrantReceipt new_grant = a->call(AuthorizeRequest{{}, "test/shared"}).value();
  CHECK(new_grant.generation.value == old_grant.generation.value + 2);
  CHECK(new_grant.model_generation == old_grant.model_generation + 1);
  CHECK(new_grant.adapter_identity == "lora-b");

  auto publish = [&](NamespaceGeneration computed_under) {
    Result<PrefixBatchReceipt> p =
        a->call(PrefixBatch{{}, {PrefixPublishOp{"test/shared", fence.request, prompt, 0, 2, {}, computed_under}}});
    REQUIRE(p.ok());
    return p->outcomes.at(0);
  };
  for (const NamespaceGeneration stale : {old_grant.generation, NamespaceGeneration{old_grant.generation.value + 1}}) {
    const PrefixOutcome refused = publish(stale);
    const auto* e = std::get_if<Error>(&refused);
    REQUIRE(e != nullptr);
    CHECK(e->code == ErrorCode::authorization_stale_generation);
    CHECK(e->field == "computed_generation");
  }
  CHECK(match(*a, "test/shared", prompt).runtime_hit_tokens == 0);
  // Rows computed under the current generation publish as before.
  const PrefixOutcome published = publish(new_grant.generation);
  INFO((std::holds_alternative<Error>(published) ? std::get<Error>(published).describe() : "ok"));
  REQUIRE(std::holds_alternative<PrefixPublishReceipt>(published));
  CHECK(match(*a, "test/shared", prompt).runtime_hit_tokens == 32);
}

}  // namespace kvrt::test
