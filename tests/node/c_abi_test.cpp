// [node][c_abi] libkvrt's C ABI (api/kvrt.h) against a node process: a C
// program linked to libkvrt.so (api/c_smoke.c) admits, writes, publishes
// and reuses rows exactly and is refused bad arguments; the node is left
// with nothing held. A node killed under an open C session answers
// KVRT_E_NODE_LOST.
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

}  // namespace kvrt::test
