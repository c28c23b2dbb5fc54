// [node][isolation] Pools per trust domain ([node] domain_pools): each
// domain of the authorization configuration gets unnamed pool segments of
// its own, with pool ids of its own and its own allocator, index, reuse and
// executor owners over them. A session is handed only its principal's
// domain's pools (in the receipt and as descriptors); a handle of another
// domain's pool is unknown to its owners, so a hit, a lease or a table
// naming one is refused; rows written in one domain are never bytes of
// another domain's mapping. (tests/data/node/node-domains-test.toml: alpha
// holds test/a and test/b, beta test/c, and test/d names no domain.)
#include <sys/stat.h>

#include <set>

#include "engine/session_pools.hpp"
#include "node/node_config.hpp"
#include "services/authorization/trust_domain_plan.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {

namespace {

std::set<uint32_t> pool_ids(const std::vector<PoolAttachment>& pools) {
  std::set<uint32_t> ids;
  for (const PoolAttachment& p : pools) ids.insert(p.pool.value);
  return ids;
}

std::pair<dev_t, ino_t> file_of(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return {st.st_dev, st.st_ino};
}

}  // namespace

TEST_CASE("domain pools: each trust domain's sessions get that domain's pools only", "[node][isolation]") {
  ScratchDir dir("node-domains");
  InProcessNode n(dir, "tests/data/node/node-domains-test.toml");
  // Three domains (alpha, beta, and the default one of test/d) x two groups.
  REQUIRE(n.descriptor.pools.size() == 6);
  CHECK(pool_ids(n.descriptor.pools).size() == 6);

  auto a = n.connect("worker-a");
  auto a2 = n.connect("worker-a2");
  auto c = n.connect("worker-c");
  auto d = n.connect("worker-d");
  const std::set<uint32_t> alpha = pool_ids(a->session().pools);
  const std::set<uint32_t> beta = pool_ids(c->session().pools);
  const std::set<uint32_t> fallback = pool_ids(d->session().pools);
  CHECK(alpha.size() == 2);
  CHECK(beta.size() == 2);
  CHECK(fallback.size() == 2);
  CHECK(pool_ids(a2->session().pools) == alpha);
  std::set<uint32_t> all = alpha;
  all.insert(beta.begin(), beta.end());
  all.insert(fallback.begin(), fallback.end());
  CHECK(all.size() == 6);  // no pool is shared between domains

  // The descriptors a session receives are its domain's, and different files
  // from another domain's.
  Result<PoolDescriptors> to_a = a->pool_descriptors();
  Result<PoolDescriptors> to_c = c->pool_descriptors();
  REQUIRE(to_a.ok());
  REQUIRE(to_c.ok());
  CHECK(pool_ids(to_a->pools) == alpha);
  CHECK(pool_ids(to_c->pools) == beta);
  for (const UniqueFd& fa : to_a->descriptors)
    for (const UniqueFd& fc : to_c->descriptors) CHECK(file_of(fa.get()) != file_of(fc.get()));

  Result<shm::ShmPayloadStore> a_pools = attach_shared_memory_pools(*a);
  Result<shm::ShmPayloadStore> a2_pools = attach_shared_memory_pools(*a2);
  Result<shm::ShmPayloadStore> c_pools = attach_shared_memory_pools(*c);
  REQUIRE(a_pools.ok());
  REQUIRE(a2_pools.ok());
  REQUIRE(c_pools.ok());

  // worker-a publishes a prompt in test/a and writes its rows; worker-a2 (the
  // same domain) sees those bytes through its own mapping.
  REQUIRE(a->call(AuthorizeRequest{{}, "test/a"}).ok());
  REQUIRE(a2->call(AuthorizeRequest{{}, "test/a"}).ok());
  REQUIRE(c->call(AuthorizeRequest{{}, "test/c"}).ok());
  const uint32_t P = 16;
  const std::vector<TokenId> prompt = prompt_of(7, 2 * P);
  RequestFence fence;
  const PrefixPublishReceipt published = serve_and_publish(*a, prompt, &fence, "test/a");
  CHECK(published.published == 4);       // two blocks in each of two groups
  std::vector<TokenId> longer = prompt;  // a hit leaves the last prompt token to compute
  longer.push_back(99);
  const PrefixMatchReceipt hit = match(*a2, "test/a", longer);
  REQUIRE(hit.matched_group_handles.size() == 2);
  for (const auto& bundle : hit.matched_group_handles)
    for (const PhysicalBlockHandle& h : bundle.handles) {
      CHECK(alpha.contains(h.pool.value));
      uint32_t g = 0;
      while (a->session().pools.at(g).group != h.group) ++g;
      std::vector<uint8_t> row(4 * a_pools->row_bytes(g), static_cast<uint8_t>(0x5A + g));  // rows 3..6
      a_pools->write_rows(g, h.block.value, 3, 4, row);
      std::vector<uint8_t> seen(row.size());
      a2_pools->read_rows(g, h.block.value, 3, 4, seen);
      CHECK(seen == row);
    }

  // The other domain's mapping holds none of alpha's pools: the same slot in
  // its own pools is another file's bytes.
  for (uint32_t pool : alpha) CHECK_FALSE(beta.contains(pool));
  CHECK(c_pools->group_count() == 2);

  // A handle of alpha presented by beta's session: its allocator knows no
  // such pool, so the hit is refused and nothing is taken.
  const int64_t errors_before = n.stat("allocator@beta", "operation_errors");
  Result<AllocatorBatchReceipt> stolen =
      c->call(AllocatorBatch{{}, {AllocateOp{2 * P + 1, hit_handles(hit), std::nullopt, "test/c"}}});
  REQUIRE(stolen.ok());
  const auto* refused = std::get_if<Error>(&stolen->outcomes.at(0));
  const auto* receipt = std::get_if<AllocationReceipt>(&stolen->outcomes.at(0));
  INFO((refused ? refused->describe() : "allocation receipt"));
  if (receipt != nullptr) {
    CHECK(receipt->outcome != AllocationOutcome::committed);
  } else {
    REQUIRE(refused != nullptr);
    CHECK(refused->code == ErrorCode::unknown_physical);
  }
  CHECK(n.stat("allocator@beta", "operation_errors") > errors_before);
  CHECK(n.stat("allocator@beta", "foreign_pool_refusals") == 1);
  CHECK(n.stat("allocator@alpha", "foreign_pool_refusals") == 0);
  CHECK(n.stat("allocator@beta", "live_requests") == 0);
  // An identical prompt in beta's namespace finds nothing: its index never
  // saw alpha's publication.
  CHECK(match(*c, "test/c", longer).matched_group_handles.empty());

  // Every domain's owners report and validate; the shared ones once.
  CHECK(n.stat("allocator@alpha", "live_requests") == 1);
  CHECK(n.stat("allocator@default", "live_requests") == 0);
  CHECK(n.stat("prefix_index@alpha", "publications") == 1);
  CHECK(n.stat("prefix_index@beta", "publications") == 0);
  CHECK(n.stat("authorization", "live_sessions") == 4);
}

TEST_CASE("domain pools: a session's end releases its holdings in its own domain", "[node][isolation]") {
  ScratchDir dir("node-domains-end");
  InProcessNode n(dir, "tests/data/node/node-domains-test.toml");
  {
    auto a = n.connect("worker-a");
    auto c = n.connect("worker-c");
    REQUIRE(a->call(AuthorizeRequest{{}, "test/b"}).ok());
    REQUIRE(c->call(AuthorizeRequest{{}, "test/c"}).ok());
    CHECK(allocation(*a, AllocateOp{20, {}, std::nullopt, "test/b"}).outcome == AllocationOutcome::committed);
    CHECK(allocation(*c, AllocateOp{40, {}, std::nullopt, "test/c"}).outcome == AllocationOutcome::committed);
    CHECK(n.stat("allocator@alpha", "live_requests") == 1);
    CHECK(n.stat("allocator@beta", "live_requests") == 1);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("node", "workers_connected") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const char* owner : {"allocator@alpha", "allocator@beta", "allocator@default"}) {
    INFO(owner);
    CHECK(n.stat(owner, "live_requests") == 0);
    CHECK(n.stat(owner, "leaked_blocks") == 0);
  }
}

TEST_CASE("domain pools: configuration rules", "[node][config][isolation]") {
  const std::string base =
      "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\npool_segments = \"unnamed\"\ndomain_pools = true\n";
  const std::string domains =
      "\n[[domain]]\nname = \"alpha\"\n\n[[domain]]\nname = \"beta\"\n\n"
      "[[namespace]]\ndeployment = \"t\"\ntenant = \"a\"\ndomain = \"alpha\"\n\n"
      "[[namespace]]\ndeployment = \"t\"\ntenant = \"b\"\ndomain = \"beta\"\n\n"
      "[[namespace]]\ndeployment = \"t\"\ntenant = \"c\"\n";
  SECTION("a principal within one domain") {
    Result<NodeConfig> ok =
        parse_node_config(base + domains + "\n[[principal]]\nname = \"w\"\nnamespaces = [\"t/a\"]\n", "n.toml");
    REQUIRE(ok.ok());
    CHECK(ok->domain_pools);
    Result<TrustDomainPlan> plan = TrustDomainPlan::create(ok->authorization);
    REQUIRE(plan.ok());
    CHECK(plan->domain_count() == 3);  // alpha, beta, and the default domain of t/c
    CHECK(plan->domain_of_namespace("t/b") == 1);
    CHECK(plan->name(plan->domain_of_namespace("t/c")).empty());
    CHECK(plan->domain_of_principal("w") == 0);
  }
  SECTION("a principal spanning two domains") {
    Result<NodeConfig> bad = parse_node_config(
        base + domains + "\n[[principal]]\nname = \"w\"\nnamespaces = [\"t/a\", \"t/c\"]\n", "n.toml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == ErrorCode::config_field);
    CHECK(bad.error().field == "principal[0].namespaces");
    CHECK(bad.error().reason.find("\"alpha\"") != std::string::npos);
  }
  SECTION("named segments") {
    Result<NodeConfig> bad = parse_node_config(
        "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\ndomain_pools = true\n" + domains, "n.toml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().field == "node.domain_pools");
  }
  SECTION("fault injection") {
    Result<NodeConfig> bad = parse_node_config(base + "fault_injection = true\n" + domains, "n.toml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().field == "node.domain_pools");
  }
}

}  // namespace kvrt::test
