// [node][engine][private] An engine whose node goes away mid-run: the
// `kvrt run` engine loop (engine/engine_worker.hpp) against a node in this
// process, which is shut down once the engine has finished a few requests.
// The engine must serve the rest of its share on its private path (prefill
// from row 0 in its own cache, no reuse) and end with the whole share done,
// no token mismatch between what the node path had decoded and the private
// generation, and the same generated-token count as a run whose node never
// went away (computed here, on a second node, as the reference).
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine/engine_worker.hpp"
#include "tests/node/node_fixture.hpp"
#include "tools/run/run_config.hpp"

namespace kvrt::test {
namespace {

// Every request shape, in the node-test config's two namespaces.
constexpr const char* kWorkload = R"([workload]
name = "private-path"
seed = 11
vocab = 256

[[tenant]]
namespace = "test/shared"

[[tenant]]
namespace = "test/other"

[[chat]]
tenant = "test/shared"
conversations = 3
system_prompts = 1
system_prompt_tokens = 40
turns = 3
user_tokens = [4, 12]
decode_tokens = 5

[[few_shot]]
tenant = "test/other"
prefixes = 1
prefix_tokens = 48
questions = 4
question_tokens = [3, 9]
decode_tokens = 4

[[fork]]
tenant = "test/shared"
prompts = 2
prompt_tokens = [20, 40]
branches = 3
decode_tokens = 6
)";

EngineOptions engine_options(const InProcessNode& n, const workload::Workload& w, const RunConfig& run) {
  EngineOptions o;
  o.worker_name = "worker-2";  // granted both namespaces
  o.token_hex = read_token_file(n.descriptor.token_path("worker-2")).value();
  o.workload = &w;
  o.model = run.model;
  o.in_flight = 2;
  return o;
}

// Runs the engine against `n` and takes the node away once the engine has
// finished three requests (its sockets close, its pools are unlinked).
Result<EngineResult> run_losing_the_node(InProcessNode& n, EngineOptions o) {
  std::mutex m;
  std::condition_variable cv;
  uint64_t done = 0;
  o.on_progress = [&](const EngineProgress& p) {
    std::lock_guard lock(m);
    done = p.requests_done;
    cv.notify_all();
  };
  Result<EngineResult> lost = make_error(ErrorCode::rpc_failed, "not run");
  std::thread engine([&] { lost = run_engine_worker(n.descriptor, o); });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done >= 3; });
  }
  n.node.reset();
  engine.join();
  return lost;
}

// The share served whole and exactly after the loss, as in `reference`.
void check_served_privately(const Result<EngineResult>& lost, const EngineResult& reference) {
  INFO((lost.ok() ? std::string("ok") : lost.error().describe()));
  REQUIRE(lost.ok());
  INFO("session lost: " << lost->session_lost << "; first mismatch: " << lost->first_mismatch);
  CHECK_FALSE(lost->session_lost.empty());
  CHECK(lost->requests == lost->requests_total);
  CHECK(lost->requests_total == reference.requests_total);
  CHECK(lost->requests_served_privately > 0);
  CHECK(lost->requests_served_privately < lost->requests_total);  // some went through the node first
  CHECK(lost->token_mismatches == 0);
  CHECK(lost->row_mismatches == 0);
  // Every request generated as many tokens as in the reference run.
  CHECK(lost->decode_tokens == reference.decode_tokens);
  CHECK(lost->requests_verified + lost->requests_served_privately == lost->requests);
}

}  // namespace

TEST_CASE("an engine whose node goes away serves the rest of its share privately, exactly", "[node][engine][private]") {
  const workload::Workload w = workload::parse_workload(kWorkload, "private-path.toml").value();
  const RunConfig run = load_run_config(std::string(KVRT_SOURCE_DIR) + "/tests/data/run/run-test.toml").value();

  // The reference: the same share with its node there throughout.
  EngineResult reference;
  {
    ScratchDir dir("engine-private-reference");
    InProcessNode n(dir, test_node_config(dir, ""));
    Result<EngineResult> r = run_engine_worker(n.descriptor, engine_options(n, w, run));
    INFO((r.ok() ? std::string("ok") : r.error().describe()));
    REQUIRE(r.ok());
    reference = *r;
  }
  REQUIRE(reference.requests == reference.requests_total);
  REQUIRE(reference.requests_total >= 15);
  CHECK(reference.requests_served_privately == 0);
  CHECK(reference.session_lost.empty());

  ScratchDir dir("engine-private-lost");
  InProcessNode n(dir, test_node_config(dir, ""));
  check_served_privately(run_losing_the_node(n, engine_options(n, w, run)), reference);
}

TEST_CASE("an engine whose node goes away reconnects to the node that starts on its descriptor",
          "[node][engine][private]") {
  const workload::Workload w = workload::parse_workload(kWorkload, "private-path.toml").value();
  const RunConfig run = load_run_config(std::string(KVRT_SOURCE_DIR) + "/tests/data/run/run-test.toml").value();
  EngineResult reference;
  {
    ScratchDir dir("engine-reconnect-reference");
    InProcessNode n(dir, test_node_config(dir, ""));
    EngineOptions o = engine_options(n, w, run);
    o.serve_privately_on_loss = false;
    Result<EngineResult> r = run_engine_worker(n.descriptor, o);
    REQUIRE(r.ok());
    reference = *r;
  }
  ScratchDir dir("engine-reconnect");
  const std::string config = test_node_config(dir, "");
  auto first = std::make_unique<InProcessNode>(dir, config);
  std::unique_ptr<InProcessNode> second;
  EngineOptions o = engine_options(*first, w, run);
  o.reconnect_descriptor = dir.file("node.json");
  o.reconnect_principal = "worker-2";
  std::mutex m;
  std::condition_variable cv;
  uint64_t done = 0;
  bool killed = false;
  o.on_progress = [&](const EngineProgress& p) {
    std::lock_guard lock(m);
    done = p.requests_done;
    cv.notify_all();
  };
  // The engine learns of the loss; the new node is up before it serves
  // anything privately, so the rest goes through the new node.
  o.on_session_lost = [&](const Error&) {
    {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return killed; });
    }
    second = std::make_unique<InProcessNode>(dir, config);
  };
  const NodeDescriptor d = first->descriptor;
  Result<EngineResult> r = make_error(ErrorCode::rpc_failed, "not run");
  std::thread engine([&] { r = run_engine_worker(d, o); });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done >= 3; });
  }
  first->node.reset();  // the first node goes away
  {
    std::lock_guard lock(m);
    killed = true;
    cv.notify_all();
  }
  engine.join();
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  INFO("session lost: " << r->session_lost << "; first mismatch: " << r->first_mismatch);
  CHECK(r->sessions_lost == 1);
  CHECK(r->reconnects == 1);
  CHECK(r->requests == r->requests_total);
  CHECK(r->requests_served_privately == 0);
  // Everything after the loss went through the second node and was
  // verified against a no-reuse replay there, bitwise.
  CHECK(r->requests_verified == r->requests);
  CHECK(r->token_mismatches == 0);
  CHECK(r->row_mismatches == 0);
  CHECK(r->decode_tokens == reference.decode_tokens);
  REQUIRE(second != nullptr);
  // The second node served requests of its own and holds none now.
  CHECK(second->stat("allocator", "live_requests") == 0);
}

// The same over virtual reservations (0x06): the engine serves from the
// mapper's request slots with hits copied in from the block pools, and when
// the node goes its slots, pages and receipts go with it; the rest of the
// share is served privately, and the requests it had started are checked.
TEST_CASE("an engine over virtual reservations whose node goes away serves the rest privately, exactly",
          "[node][engine][private][mapper]") {
  const workload::Workload w = workload::parse_workload(kWorkload, "private-path.toml").value();
  const RunConfig run = load_run_config(std::string(KVRT_SOURCE_DIR) + "/tests/data/run/run-virtual.toml").value();
  EngineResult reference;
  {
    ScratchDir dir("engine-private-virtual-reference");
    InProcessNode n(dir, "tests/data/node/node-virtual-test.toml");
    Result<EngineResult> r = run_engine_worker(n.descriptor, engine_options(n, w, run));
    INFO((r.ok() ? std::string("ok") : r.error().describe()));
    REQUIRE(r.ok());
    reference = *r;
  }
  REQUIRE(reference.requests == reference.requests_total);
  CHECK(reference.virtual_steps > 0);  // it did serve from slots
  CHECK(reference.requests_served_privately == 0);

  ScratchDir dir("engine-private-virtual-lost");
  InProcessNode n(dir, "tests/data/node/node-virtual-test.toml");
  const Result<EngineResult> lost = run_losing_the_node(n, engine_options(n, w, run));
  check_served_privately(lost, reference);
  if (lost.ok()) CHECK(lost->sessions_lost == 1);
}

}  // namespace kvrt::test
