// [node][quota] Block quotas per namespace and per trust domain on a running
// node (tests/data/node/node-quota-test.toml): a namespace at its quota gets
// quota_exceeded and changes nothing, a namespace without a quota of its own
// is held by its domain's, another domain is unaffected, and a session can
// charge only a namespace it was granted. The node's statistics say what
// each namespace and domain holds, and every owner validates after each step
// (the allocator re-derives the holdings from its tables).
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 16;  // tests/data/node's layout [tokens per block]

AllocatorOutcome allocate(Client& c, uint32_t rows, const std::string& ns) {
  Result<AllocatorBatchReceipt> r = c.call(AllocatorBatch{{}, {AllocateOp{rows, {}, std::nullopt, ns}}});
  REQUIRE(r.ok());
  return r->outcomes.at(0);
}

AllocationOutcome outcome_of(const AllocatorOutcome& o) {
  const auto* a = std::get_if<AllocationReceipt>(&o);
  INFO((a == nullptr ? std::get<Error>(o).describe() : "receipt"));
  REQUIRE(a != nullptr);
  return a->outcome;
}

}  // namespace

TEST_CASE("node block quotas: namespaces and trust domains are held to their quotas, others unaffected",
          "[node][quota]") {
  ScratchDir dir("node-quota");
  InProcessNode n(dir, "tests/data/node/node-quota-test.toml");
  CHECK(n.stat("allocator", "quotas_enforced") == 1);
  CHECK(n.stat("allocator", "quota_namespace0_limit_blocks") == 6);
  CHECK(n.stat("allocator", "quota_namespace1_limit_blocks") == 0);  // test/b: only alpha's
  CHECK(n.stat("allocator", "quota_domain0_limit_blocks") == 10);
  auto a = n.connect("worker-a");
  auto c = n.connect("worker-c");

  // Before its grant, a session cannot charge a namespace; nor without naming one.
  AllocatorOutcome o = allocate(*a, kP, "test/a");
  REQUIRE(std::holds_alternative<Error>(o));
  CHECK(std::get<Error>(o).code == ErrorCode::authorization_namespace_denied);
  o = allocate(*a, kP, "");
  REQUIRE(std::holds_alternative<Error>(o));
  CHECK(std::get<Error>(o).code == ErrorCode::invalid_argument);
  REQUIRE(a->call(AuthorizeRequest{{}, "test/a"}).ok());
  REQUIRE(a->call(AuthorizeRequest{{}, "test/b"}).ok());
  REQUIRE(c->call(AuthorizeRequest{{}, "test/c"}).ok());
  // Another tenant's namespace stays refused after a's own grants.
  o = allocate(*a, kP, "test/c");
  REQUIRE(std::holds_alternative<Error>(o));
  CHECK(std::get<Error>(o).code == ErrorCode::authorization_namespace_denied);

  // test/a fills its 6 blocks; one row more is over quota and changes nothing.
  const AllocatorOutcome six = allocate(*a, 6 * kP, "test/a");
  REQUIRE(outcome_of(six) == AllocationOutcome::committed);
  const AllocationReceipt& held = std::get<AllocationReceipt>(six);
  const int64_t live_before = n.stat("allocator", "pool0_live_blocks");
  o = allocate(*a, 1, "test/a");
  CHECK(outcome_of(o) == AllocationOutcome::quota_exceeded);
  CHECK(std::get<AllocationReceipt>(o).rollback_reason.find("namespace \"test/a\" holds 6") != std::string::npos);
  CHECK(n.stat("allocator", "pool0_live_blocks") == live_before);
  CHECK(n.stat("allocator", "quota_namespace0_held_blocks") == 6);

  // Decoding past the last block needs a new one: the append is refused too.
  RequestFence fence{held.request_id, held.request_generation, held.table_version_after};
  const AllocationReceipt committed = allocation(*a, CommitRowsOp{fence, 6 * kP});
  fence.table_version = committed.table_version_after;
  CHECK(allocation(*a, AppendOp{fence, {}, std::nullopt}).outcome == AllocationOutcome::quota_exceeded);

  // Domain beta is another budget: test/c serves while test/a is full, up to its own 4.
  CHECK(outcome_of(allocate(*c, 4 * kP, "test/c")) == AllocationOutcome::committed);
  CHECK(outcome_of(allocate(*c, 1, "test/c")) == AllocationOutcome::quota_exceeded);

  // test/b has no quota of its own: alpha's 10 holds it beside test/a's 6.
  CHECK(outcome_of(allocate(*a, 4 * kP, "test/b")) == AllocationOutcome::committed);
  o = allocate(*a, 1, "test/b");
  CHECK(outcome_of(o) == AllocationOutcome::quota_exceeded);
  CHECK(std::get<AllocationReceipt>(o).rollback_reason.find("trust domain \"alpha\"") != std::string::npos);
  CHECK(n.stat("allocator", "quota_domain0_held_blocks") == 10);
  CHECK(n.stat("allocator", "quota_namespace2_held_blocks") == 4);

  // Releasing gives the quota back.
  REQUIRE(a->call(AllocatorBatch{{}, {ReleaseOp{fence, ReleaseReason::finished}}}).ok());
  CHECK(n.stat("allocator", "quota_namespace0_held_blocks") == 0);
  CHECK(outcome_of(allocate(*a, 5 * kP, "test/a")) == AllocationOutcome::committed);
  CHECK(n.stat("allocator", "quota_exceeded") == 4);
  CHECK(n.stat("allocator", "quota_namespace0_refusals") == 2);
  CHECK(n.stat("allocator", "quota_namespace1_refusals") == 1);
  CHECK(n.stat("allocator", "quota_namespace2_refusals") == 1);

  // Sessions end: every namespace holds nothing again.
  a.reset();
  c.reset();
  Result<NodeStats> s = read_node_stats(n.descriptor, true);
  for (int i = 0; i < 100 && s.ok() && s->value("allocator", "live_requests") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = read_node_stats(n.descriptor, true);
  }
  REQUIRE(s.ok());
  CHECK(s->value("allocator", "quota_domain0_held_blocks") == 0);
  CHECK(s->value("allocator", "quota_namespace2_held_blocks") == 0);
  for (const OwnerStats& owner : s->owners) {
    INFO(owner.owner << ": " << owner.validate_error);
    CHECK(owner.validate_ok);
  }
}

}  // namespace kvrt::test
