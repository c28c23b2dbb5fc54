// The node's protocol in one process: a NodeInstance and
// kvrt::Client sessions talking over loopback. Malformed bytes get a typed
// error and the node keeps serving; stale receipts are refused with their
// reason; a session may touch only what it holds; a lookup needs a grant.
#include "schema/codecs.hpp"
#include "services/authorization/authorization_service.hpp"
#include "services/prefix/prefix_batch_run.hpp"
#include "services/prefix/prefix_service.hpp"
#include "services/reuse/reuse_batch_run.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

template <class T>
const T& outcome_as(const AllocatorBatchReceipt& r, size_t i) {
  INFO((std::holds_alternative<Error>(r.outcomes.at(i)) ? std::get<Error>(r.outcomes[i]).describe() : "receipt"));
  REQUIRE(std::holds_alternative<T>(r.outcomes.at(i)));
  return std::get<T>(r.outcomes[i]);
}

const Error& error_of(const AllocatorBatchReceipt& r, size_t i) {
  REQUIRE(std::holds_alternative<Error>(r.outcomes.at(i)));
  return std::get<Error>(r.outcomes[i]);
}

AllocatorBatchReceipt call(Client& c, std::vector<AllocatorOp> ops) {
  Result<AllocatorBatchReceipt> r = c.call(AllocatorBatch{TraceContext{1, 1, 0}, std::move(ops)});
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("malformed bytes get a typed error and the node keeps serving", "[node]") {
  ScratchDir dir("proto-malformed");
  InProcessNode n(dir);
  auto client = n.connect("worker-0");
  const std::vector<std::vector<uint8_t>> garbage = {
      {},
      {0x00},
      {0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x02, 0x03},
      std::vector<uint8_t>(4096, 0xa5),
      codec::encode(HelloRequest{"x", "y", 1})};  // a message of another kind
  for (RouteId route : {AllocatorRoute::id, PrefixRoute::id, AuthorizeRoute::id}) {
    for (const auto& bytes : garbage) {
      Result<std::vector<uint8_t>> reply = client->raw(route, bytes);
      REQUIRE(reply.ok());
      Result<ErrorMessage> e = codec::decode<ErrorMessage>(*reply);
      REQUIRE(e.ok());
      CHECK((e->error.code == ErrorCode::decode_failed || e->error.code == ErrorCode::message_too_large));
    }
  }
  // Still serving: a real allocation goes through.
  const AllocatorBatchReceipt r = call(*client, {AllocateOp{20, {}, std::nullopt}});
  CHECK(outcome_as<AllocationReceipt>(r, 0).outcome == AllocationOutcome::committed);
}

TEST_CASE("stale receipts are refused with their reason and change nothing", "[node]") {
  ScratchDir dir("proto-stale");
  InProcessNode n(dir);
  auto client = n.connect("worker-0");
  const AllocationReceipt a = outcome_as<AllocationReceipt>(call(*client, {AllocateOp{20, {}, std::nullopt}}), 0);
  const RequestFence fresh{a.request_id, a.request_generation, a.table_version_after};
  const AllocationReceipt c = outcome_as<AllocationReceipt>(call(*client, {CommitRowsOp{fresh, 20}}), 0);
  const RequestFence current{a.request_id, c.request_generation, c.table_version_after};
  // The old table version, a wrong generation, an old allocator epoch.
  const AllocatorBatchReceipt stale = call(
      *client,
      {CommitRowsOp{fresh, 20},
       ReleaseOp{RequestFence{a.request_id, RequestGeneration{99}, current.table_version}, ReleaseReason::finished},
       AllocateOp{4, {}, Epoch{1}}});
  CHECK(error_of(stale, 0).code == ErrorCode::stale_table_version);
  CHECK(error_of(stale, 1).code == ErrorCode::stale_generation);
  CHECK(error_of(stale, 2).code == ErrorCode::stale_generation);  // the epoch is a generation of the allocator
  // Nothing changed: the current fence still releases the request.
  const AllocatorBatchReceipt done = call(*client, {ReleaseOp{current, ReleaseReason::finished}});
  CHECK(outcome_as<ReleaseResult>(done, 0).context_tokens_before == 20);
}

TEST_CASE("a session touches only what it holds, and looks up only what it was granted", "[node]") {
  ScratchDir dir("proto-owner");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  const AllocationReceipt r = outcome_as<AllocationReceipt>(call(*a, {AllocateOp{40, {}, std::nullopt}}), 0);
  const RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
  // Another session cannot release, append to or read the request.
  const AllocatorBatchReceipt foreign =
      call(*b, {ReleaseOp{fence, ReleaseReason::finished}, AppendOp{fence, {}, {}}, ReadTableOp{fence.request}});
  for (size_t i = 0; i < 3; ++i) CHECK(error_of(foreign, i).code == ErrorCode::not_owner);

  // A lookup before any grant is refused before the index sees it.
  const std::vector<TokenId> prompt(48, 5);
  Result<PrefixBatchReceipt> ungranted =
      a->call(PrefixBatch{{}, {PrefixMatchOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(ungranted.ok());
  REQUIRE(std::holds_alternative<Error>(ungranted->outcomes[0]));
  CHECK(std::get<Error>(ungranted->outcomes[0]).code == ErrorCode::authorization_namespace_denied);
  // worker-0 may not use test/other at all.
  Result<NamespaceGrantReceipt> denied = a->call(AuthorizeRequest{{}, "test/other"});
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().code == ErrorCode::authorization_namespace_denied);
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  Result<PrefixBatchReceipt> granted =
      a->call(PrefixBatch{{}, {PrefixMatchOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(granted.ok());
  REQUIRE(std::holds_alternative<PrefixMatchReceipt>(granted->outcomes[0]));
  CHECK(std::get<PrefixMatchReceipt>(granted->outcomes[0]).runtime_hit_tokens == 0);

  // The owner publishes its committed blocks; a second session of the same
  // namespace then hits them, another namespace does not.
  const AllocationReceipt committed = outcome_as<AllocationReceipt>(call(*a, {CommitRowsOp{fence, 40}}), 0);
  Result<PrefixBatchReceipt> published =
      a->call(PrefixBatch{{},
                          {PrefixPublishOp{"test/shared", fence.request,
                                           std::vector<TokenId>(prompt.begin(), prompt.begin() + 40), 0, 2}}});
  REQUIRE(published.ok());
  REQUIRE(std::holds_alternative<PrefixPublishReceipt>(published->outcomes[0]));
  CHECK(std::get<PrefixPublishReceipt>(published->outcomes[0]).published == 2 * 2);  // 2 blocks x 2 groups
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
  Result<PrefixBatchReceipt> hit =
      b->call(PrefixBatch{{}, {PrefixMatchOp{"test/shared", RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(hit.ok());
  CHECK(std::get<PrefixMatchReceipt>(hit->outcomes[0]).runtime_hit_tokens == 32);
  auto c = n.connect("worker-3");
  REQUIRE(c->call(AuthorizeRequest{{}, "test/other"}).ok());
  Result<PrefixBatchReceipt> other =
      c->call(PrefixBatch{{}, {PrefixMatchOp{"test/other", RequestId{0}, RequestGeneration{0}, prompt, {}}}});
  REQUIRE(other.ok());
  CHECK(std::get<PrefixMatchReceipt>(other->outcomes[0]).runtime_hit_tokens == 0);
  (void)committed;
}

TEST_CASE("a batch of operations is answered by one receipt with one outcome each", "[node]") {
  ScratchDir dir("proto-batch");
  InProcessNode n(dir);
  auto client = n.connect("worker-0");
  std::vector<AllocatorOp> ops;
  for (int i = 0; i < 64; ++i) ops.push_back(AllocateOp{static_cast<uint32_t>(1 + i), {}, std::nullopt});
  const AllocatorBatchReceipt r = call(*client, ops);
  REQUIRE(r.outcomes.size() == 64);
  std::vector<AllocatorOp> releases;
  for (size_t i = 0; i < 64; ++i) {
    const AllocationReceipt& a = outcome_as<AllocationReceipt>(r, i);
    CHECK(a.context_tokens_after == i + 1);
    releases.push_back(
        ReleaseOp{RequestFence{a.request_id, a.request_generation, a.table_version_after}, ReleaseReason::finished});
  }
  const AllocatorBatchReceipt done = call(*client, releases);
  for (size_t i = 0; i < 64; ++i) CHECK(std::holds_alternative<ReleaseResult>(done.outcomes[i]));
}

TEST_CASE("fault_arm: refused by a serving node, armed through Client::call on a fault-injection node",
          "[node][faults]") {
  ScratchDir dir("proto-faults");
  {
    InProcessNode serving(dir);
    auto admin = serving.connect("operator");
    CHECK(admin->session().admin);
    const Result<FaultArmReceipt> refused =
        admin->call(FaultArmRequest{{}, false, {{"allocator.after_reserve_group_0", 1}}});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::invalid_argument);
    CHECK(refused.error().field == "fault_injection");
    auto client = serving.connect("worker-0");
    CHECK(outcome_as<AllocationReceipt>(call(*client, {AllocateOp{20, {}, std::nullopt}}), 0).outcome ==
          AllocationOutcome::committed);
  }
  InProcessNode n(dir, test_node_config(dir, "fault_injection = true\n"));
  auto admin = n.connect("operator");
  auto client = n.connect("worker-0");
  const Result<FaultArmReceipt> bad = admin->call(FaultArmRequest{{}, false, {{"allocator.after_reserve_group_9", 1}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().field == "arm[0].name");
  const Result<FaultArmReceipt> armed =
      admin->call(FaultArmRequest{TraceContext{3, 4, 0}, true, {{"allocator.after_reserve_group_1", 2}}});
  INFO((armed.ok() ? std::string("ok") : armed.error().describe()));
  REQUIRE(armed.ok());
  CHECK(armed->trace.trace_id == 3);
  CHECK(armed->armed == std::vector<FaultPointArm>{{"allocator.after_reserve_group_1", 2}});
  // The first allocation passes the point, the second fails at it and
  // changes nothing; the node keeps serving and every owner validates.
  const AllocationReceipt first = outcome_as<AllocationReceipt>(call(*client, {AllocateOp{20, {}, std::nullopt}}), 0);
  CHECK(first.outcome == AllocationOutcome::committed);
  const AllocationReceipt second = outcome_as<AllocationReceipt>(call(*client, {AllocateOp{20, {}, std::nullopt}}), 0);
  CHECK(second.outcome == AllocationOutcome::rolled_back);
  CHECK(second.rollback_reason == "fault point after_reserve_group_1");
  CHECK(second.successor_digest == second.predecessor_digest);
  CHECK(second.predecessor_digest == first.successor_digest);
  CHECK(n.stat("allocator", "live_requests") == 1);
  const AllocationReceipt third = outcome_as<AllocationReceipt>(call(*client, {AllocateOp{20, {}, std::nullopt}}), 0);
  CHECK(third.outcome == AllocationOutcome::committed);
  const Result<FaultArmReceipt> after = admin->call(FaultArmRequest{{}, false, {}});
  REQUIRE(after.ok());
  CHECK(after->armed.empty());  // fired once, then gone
  CHECK(after->fired == std::vector<FaultPointFired>{{"allocator.after_reserve_group_1", 1}});
  // One allocator point per cache group and its reclaim's, then the reuse
  // coordinator's, the purge's, then the hash-chain index's publication points.
  const size_t reuse = ReuseBatchRun::fault_point_names().size();
  const size_t purge = AuthorizationService::purge_fault_point_names().size();
  REQUIRE(after->registered.size() ==
          n.descriptor.pools.size() + 1 + reuse + purge + PrefixBatchRun<PrefixService>::fault_point_names().size());
  CHECK(after->registered[0] == "allocator.after_reserve_group_0");
  CHECK(after->registered[n.descriptor.pools.size()] == "allocator.after_reclaim_leases");
  CHECK(after->registered[n.descriptor.pools.size() + 1 + reuse] == "purge.after_advance_generation");
  CHECK(after->registered[n.descriptor.pools.size() + 1 + reuse + purge] == "prefix.after_table_read");
}

TEST_CASE("admin and worker sessions reach only their own routes", "[node][faults]") {
  ScratchDir dir("proto-roles");
  InProcessNode n(dir, test_node_config(dir, "fault_injection = true\n"));
  auto admin = n.connect("operator");
  auto worker = n.connect("worker-0");
  CHECK_FALSE(worker->session().admin);
  CHECK(admin->session().allowed_namespaces.empty());
  // A worker can never arm a fault point, on either transport, and arms nothing.
  for (bool channel : {true, false}) {
    ClientOptions o;
    o.use_session_channel = channel;
    Result<std::unique_ptr<Client>> w =
        Client::connect(n.descriptor, read_token_file(n.descriptor.token_path("worker-1")).value(), o);
    REQUIRE(w.ok());
    const Result<FaultArmReceipt> refused =
        (*w)->call(FaultArmRequest{{}, false, {{"allocator.after_reserve_group_0", 1}}});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::authorization_route_denied);
  }
  CHECK(admin->call(FaultArmRequest{{}, false, {}})->armed.empty());
  // An admin reaches no K/V: no pool attachment (no segment name, no CUDA
  // IPC handle), no allocation, no namespace.
  CHECK(admin->session().pools.empty());
  CHECK(worker->session().pools.size() == 2);
  const Result<AllocatorBatchReceipt> alloc = admin->call(AllocatorBatch{{}, {AllocateOp{20, {}, std::nullopt}}});
  REQUIRE_FALSE(alloc.ok());
  CHECK(alloc.error().code == ErrorCode::authorization_route_denied);
  const Result<NamespaceGrantReceipt> grant = admin->call(AuthorizeRequest{{}, "test/shared"});
  REQUIRE_FALSE(grant.ok());
  CHECK(grant.error().code == ErrorCode::authorization_route_denied);
  CHECK(n.stat("allocator", "live_requests") == 0);
  CHECK(outcome_as<AllocationReceipt>(call(*worker, {AllocateOp{20, {}, std::nullopt}}), 0).outcome ==
        AllocationOutcome::committed);
}

}  // namespace kvrt::test

namespace kvrt::test {

TEST_CASE("a hello with an unknown token is refused with its reason, and connect returns", "[node]") {
  ScratchDir dir("proto-bad-token");
  InProcessNode n(dir);
  ClientOptions o;
  o.timeout = std::chrono::seconds(30);
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Client>> c = Client::connect(n.descriptor, std::string(32, '7'), o);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code == ErrorCode::authorization_unauthenticated);
  // Refused, not timed out: a failed connect used to wait forever for its
  // own actors in the actor system's destructor.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  // The node still serves.
  CHECK(n.connect("worker-0") != nullptr);
}

}  // namespace kvrt::test
