// [node][engine][mapper][fault] The `kvrt run` engine loop over virtual
// reservations (engine/virtual_engine.cpp) against a node in this process
// whose admin arms the mapper's OS fault point: a step the OS refuses
// part-way was undone whole by the node (nothing mapped), so the engine
// takes it as a step that mapped nothing, counts a fault absorbed, and
// serves its whole share exactly, as a run with no fault does.
#include <fstream>
#include <sstream>

#include "engine/engine_worker.hpp"
#include "tests/node/node_fixture.hpp"
#include "tools/run/run_config.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt::test {
namespace {

// Chats (reuse across turns) and forks in the node's shared namespace.
constexpr const char* kWorkload = R"([workload]
name = "virtual-faults"
seed = 5
vocab = 256

[[tenant]]
namespace = "test/shared"

[[chat]]
tenant = "test/shared"
conversations = 4
system_prompts = 1
system_prompt_tokens = 56
turns = 2
user_tokens = [4, 12]
decode_tokens = 4

[[fork]]
tenant = "test/shared"
prompts = 2
prompt_tokens = [20, 40]
branches = 2
decode_tokens = 5
)";

// tests/data/node/node-virtual-test.toml with fault injection and an admin.
std::string virtual_fault_config(const ScratchDir& dir) {
  std::ifstream in(std::string(KVRT_SOURCE_DIR) + "/tests/data/node/node-virtual-test.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string layout_key = "layout = \"";
  config.insert(config.find(layout_key) + layout_key.size(), std::string(KVRT_SOURCE_DIR) + "/tests/data/node/");
  config.insert(config.find("[node]\n") + 7, "fault_injection = true\n");
  config += "\n[[principal]]\nname = \"operator\"\nrole = \"admin\"\n";
  const std::string path = dir.file("node.toml");
  std::ofstream(path) << config;
  return path;
}

}  // namespace

TEST_CASE("an engine over virtual reservations absorbs steps the OS refused and stays exact",
          "[node][engine][mapper][fault]") {
  const RunConfig run = load_run_config(std::string(KVRT_SOURCE_DIR) + "/tests/data/run/run-virtual.toml").value();
  const workload::Workload w = workload::parse_workload(kWorkload, "virtual-faults.toml").value();
  ScratchDir dir("engine-virtual-fault");
  InProcessNode n(dir, virtual_fault_config(dir));
  auto admin = n.connect("operator");
  // The nth page map of the node fails, and its step is undone part-way
  // through: the first requests' prompt step, or a later one, whose new
  // slots may come with pages retained from earlier requests.
  const uint32_t nth = GENERATE(1u, 9u, 30u, 33u, 41u);
  INFO("os_map fails at map " << nth);
  REQUIRE(admin->call(FaultArmRequest{{}, false, {{"mapper.os_map", nth}}}).ok());
  EngineOptions o;
  o.worker_name = "worker-2";  // granted both test namespaces
  o.token_hex = read_token_file(n.descriptor.token_path("worker-2")).value();
  o.workload = &w;
  o.model = run.model;
  o.in_flight = 2;
  Result<EngineResult> r = run_engine_worker(n.descriptor, o);
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  INFO("first error: " << r->first_error << "; first mismatch: " << r->first_mismatch);
  const FaultArmReceipt after = admin->call(FaultArmRequest{{}, true, {}}).value();
  REQUIRE(after.fired.size() == 1);
  CHECK(after.fired[0].name == "mapper.os_map");
  CHECK(r->faults_absorbed >= 1);
  CHECK(r->operation_errors == 0);
  CHECK(r->requests == r->requests_total);
  CHECK(r->requests_verified == r->requests);
  CHECK(r->token_mismatches == 0);
  CHECK(r->row_mismatches == 0);
  CHECK(r->virtual_steps > 0);
  CHECK(n.stat("mapper", "os_calls_refused") == 1);
}

}  // namespace kvrt::test
