// [node][c_abi] libkvrt's C ABI (api/kvrt.h) against a node process: a C
// program linked to libkvrt.so (api/c_smoke.c) admits, writes, publishes
// and reuses rows exactly and is refused bad arguments; the node is left
// with nothing held. A node killed under an open C session answers
// KVRT_E_NODE_LOST. On a radix node, kvrt_handoff locks a matched path
// until kvrt_dispose_handoffs admits or releases it.
#include <csignal>

#include "api/kvrt.h"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {

TEST_CASE("a C program on libkvrt.so reuses rows exactly and leaves the node quiescent", "[node][c_abi]") {
  ScratchDir dir("c-abi");
  NodeProcess node(dir);
  KvrtProcess smoke(KVRT_C_SMOKE, {node.descriptor_path(), "worker-0", "test/shared"}, dir.file("smoke.log"));
  const int status = smoke.wait(std::chrono::seconds(60));
  INFO(smoke.output());
  REQUIRE(status == 0);
  CHECK(smoke.output().find("kvrt_c_smoke: ok") != std::string::npos);
  const NodeStats s = await_quiescent(node);
  require_quiescent(s);
  CHECK(s.value("node", "sessions_opened_on_channel") >= 1);
}

TEST_CASE("a C session whose node was killed answers KVRT_E_NODE_LOST", "[node][c_abi]") {
  ScratchDir dir("c-abi-death");
  NodeProcess node(dir);
  kvrt_session* s = nullptr;
  kvrt_error e{};
  REQUIRE(kvrt_connect(node.descriptor_path().c_str(), "worker-0", nullptr, &s, &e) == KVRT_OK);
  REQUIRE(kvrt_authorize(s, "test/shared", nullptr, &e) == KVRT_OK);
  CHECK(kvrt_authorize(s, "test/nowhere", nullptr, &e) != KVRT_OK);
  CHECK(std::string(e.name) != "ok");
  node.kill();
  const int32_t code = kvrt_authorize(s, "test/shared", nullptr, &e);
  CHECK(code == KVRT_E_NODE_LOST);
  CHECK(std::string(e.name) == "node_lost");
  kvrt_close(s);
  kvrt_close(nullptr);
}

TEST_CASE("a C scheduler holds a handoff on a radix node, admits or releases it, and is refused what it does not hold",
          "[node][c_abi][handoff]") {
  ScratchDir dir("c-abi-handoff");
  NodeProcess node(dir, {}, "tests/data/node/node-radix-test.toml");
  kvrt_session* s = nullptr;
  kvrt_error e{};
  REQUIRE(kvrt_connect(node.descriptor_path().c_str(), "worker-0", nullptr, &s, &e) == KVRT_OK);
  REQUIRE(kvrt_authorize(s, "test/shared", nullptr, &e) == KVRT_OK);
  constexpr uint32_t P = 16, n = 2 * P + 3;
  std::vector<int32_t> prompt(n);
  for (uint32_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(40 + i);
  kvrt_admit_request ask{"test/shared", prompt.data(), n, nullptr, nullptr};
  kvrt_admission a{};
  REQUIRE(kvrt_admit(s, &ask, 1, 1, &a, &e) == KVRT_OK);
  REQUIRE(a.status == KVRT_ADMITTED);
  int32_t status = -1;
  REQUIRE(kvrt_commit_rows(s, &a.request, &n, 1, &status, &e) == KVRT_OK);
  REQUIRE(kvrt_publish(s, a.request, "test/shared", prompt.data(), n, 0, 2, &e) == KVRT_OK);
  REQUIRE(kvrt_release(s, &a.request, 1, KVRT_FINISHED, &status, &e) == KVRT_OK);

  const uint64_t ids[2] = {5, 6};
  kvrt_admit_request asks[2] = {ask, ask};
  asks[1].namespace_name = "test/not-granted";
  kvrt_handoff_receipt h[2];
  REQUIRE(kvrt_handoff(s, asks, ids, nullptr, 2, h, &e) == KVRT_OK);
  CHECK(h[0].status == KVRT_OK);
  CHECK(h[0].hit_tokens == 2 * P);
  CHECK(h[0].suffix_begin == 2 * P);
  CHECK(h[0].suffix_end == n);
  CHECK(h[0].new_physical_blocks == 1);
  CHECK(h[0].lease != 0);
  CHECK(h[1].status == static_cast<int32_t>(ErrorCode::authorization_namespace_denied));
  CHECK(h[1].lease == 0);

  // Admit, then release: both answered; a second release is unknown_lease,
  // as is a lease never handed off and a disposition that is neither.
  const uint64_t leases[3] = {h[0].lease, h[0].lease, 12345};
  const int32_t dispositions[3] = {KVRT_HANDOFF_ADMIT, KVRT_HANDOFF_RELEASE, KVRT_HANDOFF_RELEASE};
  int32_t statuses[3] = {-1, -1, -1};
  REQUIRE(kvrt_dispose_handoffs(s, leases, dispositions, 3, statuses, &e) == KVRT_OK);
  CHECK(statuses[0] == KVRT_OK);
  CHECK(statuses[1] == KVRT_OK);
  CHECK(statuses[2] == static_cast<int32_t>(ErrorCode::unknown_lease));
  REQUIRE(kvrt_dispose_handoffs(s, leases, dispositions + 1, 1, statuses, &e) == KVRT_OK);
  CHECK(statuses[0] == static_cast<int32_t>(ErrorCode::unknown_lease));
  const int32_t bogus = 7;
  CHECK(kvrt_dispose_handoffs(s, leases, &bogus, 1, statuses, &e) == KVRT_E_INVALID_ARGUMENT);
  CHECK(std::string(e.field) == "dispositions");

  // One left held: closing the session releases it on the node.
  REQUIRE(kvrt_handoff(s, &ask, ids, nullptr, 1, h, &e) == KVRT_OK);
  REQUIRE(h[0].lease != 0);
  kvrt_close(s);
  // The tree keeps its two cached pages (one lease per block); nothing else is held.
  const NodeStats after = await_stats(
      node,
      [](const NodeStats& st) {
        return st.value("node", "workers_connected") == 0 && st.value("prefix_index", "path_leases") == 0;
      },
      std::chrono::seconds(10));
  for (const OwnerStats& o : after.owners) {
    INFO(o.owner << ": " << o.validate_error);
    CHECK(o.validate_ok);
  }
  CHECK(after.value("prefix_index", "path_leases") == 0);
  CHECK(after.value("allocator", "live_requests") == 0);
  CHECK(after.value("allocator", "live_leases") == after.value("prefix_index", "cached_blocks"));
  CHECK(after.value("prefix_index", "handoffs") == 2);
  CHECK(after.value("prefix_index", "handoffs_admitted") == 1);
}

TEST_CASE("a C engine's Prompt Cache calls refuse bad arguments, typed, and change nothing", "[node][c_abi][prompt]") {
  ScratchDir dir("c-abi-prompt");
  NodeProcess node(dir, {});
  kvrt_session* s = nullptr;
  kvrt_error e{};
  REQUIRE(kvrt_connect(node.descriptor_path().c_str(), "worker-0", nullptr, &s, &e) == KVRT_OK);
  REQUIRE(kvrt_authorize(s, "test/shared", nullptr, &e) == KVRT_OK);
  const char* schema = "schema_id = \"s\"\ngeneration = 1\n[[module]]\nid = \"system\"\npositions = [0, 32]\n";
  uint64_t generation = 0;
  REQUIRE(kvrt_register_prompt_schema(s, "test/shared", schema, &generation, &e) == KVRT_OK);
  CHECK(generation == 1);
  // A schema that does not parse, and one for a namespace never granted.
  CHECK(kvrt_register_prompt_schema(s, "test/shared", "schema_id = ", nullptr, &e) != KVRT_OK);
  CHECK(kvrt_register_prompt_schema(s, "test/other", schema, nullptr, &e) ==
        static_cast<int32_t>(ErrorCode::authorization_namespace_denied));
  CHECK(kvrt_register_prompt_schema(s, nullptr, schema, nullptr, &e) == KVRT_E_INVALID_ARGUMENT);

  const int32_t tokens[4] = {1, 2, 3, 4};
  kvrt_prompt_item item{"system", nullptr, 0, tokens, 4, 0, 1};
  kvrt_prompt_segment out{};
  CHECK(kvrt_assemble_prompt(s, "test/shared", "s", 1, &item, 1, nullptr, &e) == KVRT_E_INVALID_ARGUMENT);
  CHECK(kvrt_assemble_prompt(s, "test/shared", "s", 1, nullptr, 1, &out, &e) == KVRT_E_INVALID_ARGUMENT);
  kvrt_prompt_item bad = item;
  bad.tokens = nullptr;
  CHECK(kvrt_assemble_prompt(s, "test/shared", "s", 1, &bad, 1, &out, &e) == KVRT_E_INVALID_ARGUMENT);
  CHECK(std::string(e.field) == "items[0].tokens");
  bad = item;
  const kvrt_prompt_parameter nameless{nullptr, "x"};
  bad.parameters = &nameless;
  bad.parameter_count = 1;
  CHECK(kvrt_assemble_prompt(s, "test/shared", "s", 1, &bad, 1, &out, &e) == KVRT_E_INVALID_ARGUMENT);
  CHECK(std::string(e.field) == "items[0].parameters[0]");
  CHECK(kvrt_assemble_prompt(s, "test/shared", "s", 2, &item, 1, &out, &e) ==
        static_cast<int32_t>(ErrorCode::stale_generation));
  REQUIRE(kvrt_assemble_prompt(s, "test/shared", "s", 1, &item, 1, &out, &e) == KVRT_OK);
  CHECK(out.outcome == KVRT_PROMPT_MISSED);
  CHECK(out.miss_reason == static_cast<int32_t>(RejectionReason::no_candidate));
  CHECK(out.module == 0);
  // No module handle of this session: unknown_lease; a publication of a
  // request this session does not hold: the node's unknown_request.
  CHECK(kvrt_copy_prompt_module(s, 77, 1, 0, &e) == static_cast<int32_t>(ErrorCode::unknown_lease));
  CHECK(kvrt_release_prompt_module(s, 77, &e) == static_cast<int32_t>(ErrorCode::unknown_lease));
  CHECK(kvrt_publish_prompt_module(s, "test/shared", "s", 1, "system", nullptr, 0, tokens, 4, 12345, &e) ==
        static_cast<int32_t>(ErrorCode::unknown_request));
  CHECK(kvrt_publish_prompt_module(s, "test/shared", "s", 1, nullptr, nullptr, 0, tokens, 4, 1, &e) ==
        KVRT_E_INVALID_ARGUMENT);
  kvrt_close(s);
  const NodeStats stats = await_quiescent(node);
  require_quiescent(stats);
  CHECK(stats.value("node", "reuse_prompt_modules").value_or(-1) == 0);
}

}  // namespace kvrt::test
