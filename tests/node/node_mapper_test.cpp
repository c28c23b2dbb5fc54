// [node][mapper] The mapper owner served by a node: a
// worker binds a request, steps its frontier and gets MappedFrontierReceipts
// over the wire; its MapperPoolView, built from the memfd the node hands out
// on its socket, shows the bytes another session wrote at the same virtual
// offsets; sessions stay confined to their own slots; malformed bytes get a
// typed error; a session's end frees its slots; a node without [mapper]
// answers a typed error.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "schema/codecs.hpp"
#include "services/mapper/mapper_view.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

MapperBatchReceipt call(Client& c, std::vector<MapperOp> ops) {
  Result<MapperBatchReceipt> r = c.call(MapperBatch{TraceContext{3, 4, 0}, std::move(ops)});
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  return *r;
}

template <class T>
const T& outcome_as(const MapperBatchReceipt& r, size_t i) {
  INFO((std::holds_alternative<Error>(r.outcomes.at(i)) ? std::get<Error>(r.outcomes[i]).describe() : "receipt"));
  REQUIRE(std::holds_alternative<T>(r.outcomes.at(i)));
  return std::get<T>(r.outcomes[i]);
}

ErrorCode error_of(const MapperBatchReceipt& r, size_t i) {
  const auto* e = std::get_if<Error>(&r.outcomes.at(i));
  return e == nullptr ? ErrorCode::ok : e->code;
}

}  // namespace

TEST_CASE("node mapper: receipts over the wire and a worker view that shows the node's pages", "[node][mapper]") {
  ScratchDir dir("node-mapper");
  InProcessNode n(dir, "tests/data/node/node-mapper-test.toml");
  REQUIRE(n.descriptor.mapper.has_value());
  auto writer = n.connect("worker-0");
  auto reader = n.connect("worker-1");

  const MapperBatchReceipt bound = call(*writer, {MapperAllocOp{RequestId{1}, RequestGeneration{1}, 300},
                                                  MapperStepOp{{StepRequest{RequestId{1}, 300}}}});
  const SlotBinding& slot = outcome_as<SlotBinding>(bound, 0);
  const StepResult& step = outcome_as<StepResult>(bound, 1);
  REQUIRE(step.feasibility == MappingFeasibility::ready);
  const MappedFrontierReceipt& receipt = step.receipts.at(0);
  CHECK(receipt.ready_before_use);
  CHECK(covers(receipt, RequestGeneration{1}, 300));
  // 300 tokens of 64-byte rows at 64 tokens per 4 KiB page: 5 pages of each of 2L = 6 tensors.
  CHECK(receipt.mapped_pages == 5);
  CHECK(receipt.new_mappings.size() == 30);

  // The writer maps the receipt's pages into its own view and writes layer
  // 0's K rows [0, 300) of its slot; the reader, another session with its own
  // view of the same memfd, maps the same pages and sees the same bytes.
  Result<MapperPoolView> wv = MapperPoolView::attach(*n.descriptor.mapper);
  INFO((wv.ok() ? std::string("ok") : wv.error().describe()));
  REQUIRE(wv.ok());
  REQUIRE(wv->apply(step).ok());
  const MapperGeometry& geo = wv->geometry();
  const uint64_t k0 = geo.page_offset(geo.tensor_index(0, KvTensorKind::key), slot.slot.value, 0);
  const uint64_t bytes = 300 * 64;  // rows x (H_kv 2 x d 16 x 2 B)
  std::vector<uint8_t> rows(bytes);
  std::mt19937_64 rng(0x5EED);
  for (auto& b : rows) b = static_cast<uint8_t>(rng());
  std::memcpy(wv->base() + k0, rows.data(), bytes);
  REQUIRE(error_of(call(*writer, {MapperAppendOp{RequestId{1}, slot.generation, 300}}), 0) == ErrorCode::ok);

  Result<MapperPoolView> rv = MapperPoolView::attach(*n.descriptor.mapper);
  REQUIRE(rv.ok());
  REQUIRE(rv->apply(step).ok());
  REQUIRE(std::memcmp(rv->base() + k0, rows.data(), bytes) == 0);

  // The reader may not step, append to or free the writer's request.
  const MapperBatchReceipt refused =
      call(*reader, {MapperStepOp{{StepRequest{RequestId{1}, 900}}}, MapperAppendOp{RequestId{1}, slot.generation, 10},
                     MapperFreeOp{RequestId{1}, slot.generation}});
  CHECK(error_of(refused, 0) == ErrorCode::not_owner);
  CHECK(error_of(refused, 1) == ErrorCode::not_owner);
  CHECK(error_of(refused, 2) == ErrorCode::not_owner);
  CHECK(n.stat("mapper", "active_slots") == 1);

  // Malformed bytes: a typed error, and the mapper keeps serving.
  for (const auto& garbage :
       {std::vector<uint8_t>{}, std::vector<uint8_t>(64, 0xa5), codec::encode(HelloRequest{"x", "y", 1})}) {
    Result<std::vector<uint8_t>> reply = reader->raw(MapperRoute::id, garbage);
    REQUIRE(reply.ok());
    Result<ErrorMessage> e = codec::decode<ErrorMessage>(*reply);
    REQUIRE(e.ok());
    CHECK(e->error.code == ErrorCode::decode_failed);
  }
  outcome_as<SlotBinding>(call(*reader, {MapperAllocOp{RequestId{2}, RequestGeneration{1}, 10}}), 0);
  CHECK(n.stat("mapper", "active_slots") == 2);

  // The writer's session ends: its slot is freed (pages kept as capacity).
  writer.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("mapper", "active_slots") != 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(n.stat("mapper", "active_slots") == 1);
  CHECK(n.stat("mapper", "sessions_reclaimed") == 1);
  CHECK(n.stat("mapper", "inactive_retained_bytes") > 0);
}

TEST_CASE("node mapper: a node without [mapper] answers a typed error", "[node][mapper]") {
  ScratchDir dir("node-no-mapper");
  InProcessNode n(dir, "tests/data/node/node-test.toml");
  CHECK_FALSE(n.descriptor.mapper.has_value());
  auto c = n.connect("worker-0");
  Result<MapperBatchReceipt> r = c->call(MapperBatch{{}, {MapperAllocOp{RequestId{1}, RequestGeneration{1}, 8}}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::invalid_argument);
  CHECK(r.error().field == "mapper");
  Result<NodeStats> s = read_node_stats(n.descriptor, /*validate=*/true);
  REQUIRE(s.ok());
  CHECK(s->owner("mapper") == nullptr);
}

}  // namespace kvrt::test

namespace kvrt::test {

TEST_CASE("node mapper: a `kvrt node` process hands its page pool to worker views", "[node][mapper][process]") {
  ScratchDir dir("node-mapper-process");
  NodeProcess node(dir, {}, "tests/data/node/node-mapper-test.toml");
  REQUIRE(node.descriptor().mapper.has_value());
  auto client = Client::connect(node.descriptor(), read_token_file(node.descriptor().token_path("worker-2")).value());
  REQUIRE(client.ok());
  Result<MapperBatchReceipt> r = (*client)->call(MapperBatch{
      {}, {MapperAllocOp{RequestId{5}, RequestGeneration{1}, 1024}, MapperStepOp{{StepRequest{RequestId{5}, 1024}}}}});
  REQUIRE(r.ok());
  const auto& slot = std::get<SlotBinding>(r->outcomes.at(0));
  const auto& step = std::get<StepResult>(r->outcomes.at(1));
  // Two views in this process of the node process's memfd: bytes written
  // through one, at the last row of V in the last layer, read through the other.
  Result<MapperPoolView> a = MapperPoolView::attach(*node.descriptor().mapper);
  Result<MapperPoolView> b = MapperPoolView::attach(*node.descriptor().mapper);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->apply(step).ok());
  REQUIRE(b->apply(step).ok());
  const MapperGeometry& geo = a->geometry();
  const uint64_t v_last = geo.page_offset(geo.tensor_index(2, KvTensorKind::value), slot.slot.value, 0) + 1023 * 64;
  const char row[] = "the last row of V in layer 2, written by one view, read by the other";
  std::memcpy(a->base() + v_last, row, 64);
  CHECK(std::memcmp(b->base() + v_last, row, 64) == 0);
  client->reset();
  CHECK(node.stop() == 0);
}

// The OS refusing a map() part-way through a step on a live node: armed
// through the admin fault_arm route ("mapper.os_map"), the step fails with
// os_mapping_failed after some of its pages were mapped, the mapper undoes
// all of it (its ledger and slots as before, validate() after every stat
// read), and the same step then succeeds.
TEST_CASE("node mapper: a map the OS refuses mid-step, armed on a live node, undoes the step",
          "[node][mapper][fault]") {
  ScratchDir dir("node-mapper-fault");
  const std::string config = test_node_config(dir, "fault_injection = true\n");
  std::ifstream mapper_in(std::string(KVRT_SOURCE_DIR) + "/tests/data/node/node-mapper-test.toml");
  std::stringstream mapper_text;
  mapper_text << mapper_in.rdbuf();
  const std::string full = mapper_text.str();
  std::ofstream(config, std::ios::app) << "\n" << full.substr(full.find("\n[mapper]") + 1);
  InProcessNode n(dir, config);
  auto admin = n.connect("operator");
  auto w = n.connect("worker-0");
  const FaultArmReceipt known = admin->call(FaultArmRequest{{}, true, {}}).value();
  CHECK(std::count(known.registered.begin(), known.registered.end(), "mapper.os_map") == 1);
  CHECK(std::count(known.registered.begin(), known.registered.end(), "mapper.os_unmap") == 1);
  // A worker session cannot arm it.
  CHECK_FALSE(w->call(FaultArmRequest{{}, false, {{"mapper.os_map", 1}}}).ok());

  const MapperBatchReceipt bound =
      call(*w, {MapperAllocOp{RequestId{1}, RequestGeneration{1}, 300}, MapperStepOp{{StepRequest{RequestId{1}, 64}}}});
  REQUIRE(outcome_as<StepResult>(bound, 1).feasibility == MappingFeasibility::ready);
  auto ledger = [&] {
    std::vector<int64_t> v;
    for (const char* s : {"active_slots", "mapped_bytes", "active_valid_bytes", "active_slack_bytes",
                          "inactive_retained_bytes", "free_handle_bytes"})
      v.push_back(n.stat("mapper", s));  // validates every owner
    return v;
  };
  const std::vector<int64_t> before = ledger();

  // The 7th map of the step: the first bundle of new pages is mapped, the
  // second is not.
  REQUIRE(admin->call(FaultArmRequest{{}, false, {{"mapper.os_map", 7}}}).ok());
  const MapperBatchReceipt refused = call(*w, {MapperStepOp{{StepRequest{RequestId{1}, 300}}}});
  CHECK(error_of(refused, 0) == ErrorCode::os_mapping_failed);
  CHECK(ledger() == before);
  CHECK(n.stat("mapper", "os_calls_refused") == 1);
  const FaultArmReceipt after = admin->call(FaultArmRequest{{}, true, {}}).value();
  CHECK(after.armed.empty());
  REQUIRE(after.fired.size() == 1);
  CHECK(after.fired[0].name == "mapper.os_map");

  const MapperBatchReceipt again = call(*w, {MapperStepOp{{StepRequest{RequestId{1}, 300}}}});
  const StepResult& step = outcome_as<StepResult>(again, 0);
  REQUIRE(step.feasibility == MappingFeasibility::ready);
  CHECK(covers(step.receipts.at(0), RequestGeneration{1}, 300));
  CHECK(n.stat("mapper", "mapped_bytes") > before[1]);
}

// [mapper] map_ahead (0x06D): after every step, the pages the next decode
// step of the active slots needs are mapped by a background thread. The
// peer is the same node without it: every receipt of the same op sequence
// is identical, and every page a decode step maps was found done ahead.
TEST_CASE("node mapper: map-ahead changes no receipt and does each decode step's page maps ahead", "[node][mapper]") {
  // node-mapper-test.toml's [mapper] table after the test node's config;
  // one line more turns map-ahead off for the peer.
  std::ifstream in(std::string(KVRT_SOURCE_DIR) + "/tests/data/node/node-mapper-test.toml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string mapper = text.str().substr(text.str().find("\n[mapper]") + 1);
  ScratchDir dir("node-mapper-ahead"), peer_dir("node-mapper-sync");
  const std::string ahead_config = test_node_config(dir, ""), sync_config = test_node_config(peer_dir, "");
  std::ofstream(ahead_config, std::ios::app) << "\n" << mapper;
  std::ofstream(sync_config, std::ios::app) << "\n" << mapper << "map_ahead = false\n";
  InProcessNode ahead(dir, ahead_config);
  InProcessNode sync(peer_dir, sync_config);
  auto a = ahead.connect("worker-0");
  auto b = sync.connect("worker-0");
  const auto both = [&](std::vector<MapperOp> ops) {
    const MapperBatchReceipt x = call(*a, ops);
    const MapperBatchReceipt y = call(*b, ops);
    REQUIRE(x.outcomes == y.outcomes);
    return x;
  };
  // Two requests: a prompt of 10 rows, then 200 decode steps of both (one
  // row each): each crosses into pages 2, 3 and 4 at rows 65, 129 and 193.
  (void)both({MapperAllocOp{RequestId{1}, RequestGeneration{1}, 300},
              MapperAllocOp{RequestId{2}, RequestGeneration{1}, 300},
              MapperStepOp{{StepRequest{RequestId{1}, 10}, StepRequest{RequestId{2}, 10}}}});
  uint64_t decode_pages = 0;
  for (uint32_t t = 11; t <= 210; ++t) {
    const MapperBatchReceipt r = both({MapperStepOp{{StepRequest{RequestId{1}, t}, StepRequest{RequestId{2}, t}}}});
    const StepResult& step = outcome_as<StepResult>(r, 0);
    REQUIRE(step.feasibility == MappingFeasibility::ready);
    for (const MappedFrontierReceipt& f : step.receipts) decode_pages += f.new_mappings.size();
  }
  // 3 crossings x 2 requests x 2L = 6 tensors.
  CHECK(decode_pages == 36);
  CHECK(ahead.stat("mapper", "map_ahead") == 1);
  CHECK(sync.stat("mapper", "map_ahead") == 0);
  CHECK(ahead.stat("mapper", "map_ahead_hits") == 36);
  // Only the prompt step's two bundles were mapped inside a step.
  CHECK(ahead.stat("mapper", "map_ahead_foreground_maps") == 12);
  CHECK(ahead.stat("mapper", "map_ahead_plans_refused") == 0);
  CHECK(ahead.stat("mapper", "bundle_maps") == sync.stat("mapper", "bundle_maps"));
  CHECK(ahead.stat("mapper", "mapped_bytes") == sync.stat("mapper", "mapped_bytes"));
  // Freed and bound again: the same receipts (retained pages) on both.
  (void)both({MapperFreeOp{RequestId{1}, SlotGeneration{1}, ReleaseMode::retain},
              MapperAllocOp{RequestId{3}, RequestGeneration{1}, 300},
              MapperStepOp{{StepRequest{RequestId{3}, 300}, StepRequest{RequestId{2}, 300}}}});
}

}  // namespace kvrt::test
