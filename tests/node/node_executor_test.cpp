// [node][executor] The kernel executor owner served by a node: a
// worker writes K/V rows into the node's shared pools at its receipt's
// blocks, commits them, and asks the node to run decode attention for its
// request; the node resolves the table itself under the session and its
// output equals, bit for bit, the same kernel run by the worker over its own
// mapping of the pools. Another session's request, a stale table version, a
// bad layer, query width or head mapping, and malformed bytes are typed
// errors; the node keeps serving.
#include <random>

#include "schema/codecs.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/scalar_convert.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/shm_model_kv_cache.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

// The worker's side: the node's pools attached by name, as run-worker does.
struct AttachedPools {
  explicit AttachedPools(const Client& client, const NodeDescriptor& d)
      : layout(load_layout_manifest(d.layout_path).value()) {
    std::vector<shm::BlockPoolSegment> segments;
    for (const PoolAttachment& p : client.session().pools)
      segments.push_back(
          shm::BlockPoolSegment::attach(p.segment_name, p.generation, client.session().layout_sha256).value());
    store.emplace(shm::ShmPayloadStore::create(std::move(segments)).value());
    cache = shm::ShmModelKvCache::create(*store, layout).value();
  }
  // Seeded fp16 rows for every head of rows [0, rows) of `slot` in `layer`.
  void fill(uint32_t layer, uint32_t slot, uint32_t rows, std::mt19937_64& rng) {
    const executor::PagedKvView& v = cache->layer_view(layer);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t h = 0; h < v.kv_heads; ++h) {
        std::vector<float> k(v.k.head_dim), val(v.v.head_dim);
        for (float& x : k) x = u(rng);
        for (float& x : val) x = u(rng);
        executor::narrow_scalars(v.k.dtype, k.data(), k.size(), const_cast<std::byte*>(v.k.row(slot, r, h)));
        executor::narrow_scalars(v.v.dtype, val.data(), val.size(), const_cast<std::byte*>(v.v.row(slot, r, h)));
      }
  }
  CacheLayoutManifest layout;
  std::optional<shm::ShmPayloadStore> store;
  std::unique_ptr<shm::ShmModelKvCache> cache;
};

const AttentionOutput& output_of(const ExecuteBatchReceipt& r, size_t i) {
  const auto* o = std::get_if<AttentionOutput>(&r.outcomes.at(i));
  INFO((o == nullptr ? std::get<Error>(r.outcomes[i]).describe() : "ok"));
  REQUIRE(o != nullptr);
  return *o;
}

ErrorCode error_of(const ExecuteBatchReceipt& r, size_t i) {
  const auto* e = std::get_if<Error>(&r.outcomes.at(i));
  return e == nullptr ? ErrorCode::ok : e->code;
}

}  // namespace

TEST_CASE("node executor: decode over the node's pools equals the worker's own kernel run", "[node][executor]") {
  ScratchDir dir("node-executor");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  AttachedPools pools(*a, n.descriptor);

  // A 40-token request: three blocks per group (16 + 16 + 8 rows).
  Result<AllocatorBatchReceipt> alloc = a->call(AllocatorBatch{{}, {AllocateOp{40, {}, std::nullopt}}});
  REQUIRE(alloc.ok());
  const AllocationReceipt& r = std::get<AllocationReceipt>(alloc->outcomes.at(0));
  std::vector<std::vector<uint32_t>> slots(pools.layout.cache_groups.size());
  for (const TableEntryUpdate& e : r.published_entries) slots[e.handle.group.value].push_back(e.handle.block.value);
  std::mt19937_64 rng(0xE7EC);
  for (uint32_t layer = 0; layer < 4; ++layer) {
    const uint32_t g = pools.layout.group_for_layer(layer)->group_id.value;
    for (uint32_t j = 0; j < 3; ++j) pools.fill(layer, slots[g][j], j < 2 ? 16 : 8, rng);
  }
  const RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
  Result<AllocatorBatchReceipt> committed = a->call(AllocatorBatch{{}, {CommitRowsOp{fence, 40}}});
  REQUIRE(committed.ok());
  const TableVersion version = std::get<AllocationReceipt>(committed->outcomes.at(0)).table_version_after;

  // Layer 0 (group 0) and layer 3 (group 1), H_q = 4 over H_kv = 2.
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  ExecuteBatch batch;
  for (uint32_t layer : {0u, 3u}) {
    DecodeAttentionOp op{fence.request, version, layer, 4, std::vector<float>(4 * 16)};
    for (float& x : op.queries) x = u(rng);
    batch.ops.push_back(op);
  }
  Result<ExecuteBatchReceipt> run = a->call(batch);
  REQUIRE(run.ok());
  for (size_t i = 0; i < batch.ops.size(); ++i) {
    const AttentionOutput& got = output_of(*run, i);
    CHECK(got.context_tokens == 40);
    CHECK(got.table_version == version);
    CHECK(got.kv_rows == 40 * 2);  // rows x K/V heads
    // The worker's own run of the same kernel over its mapping of the pools.
    const uint32_t layer = batch.ops[i].layer;
    const uint32_t g = pools.layout.group_for_layer(layer)->group_id.value;
    const std::vector<uint32_t> valid{16, 16, 8};
    const executor::DecodeRequest req{executor::KvBlockTable{slots[g], valid, 40}};
    std::vector<float> out(4 * 16), lse(4);
    const executor::DecodeArgs args{
        executor::HeadMapping{4, 2}, std::span(&req, 1), batch.ops[i].queries, out, lse, {}};
    REQUIRE(executor::paged_decode(pools.cache->layer_view(layer), args).ok());
    CHECK(same_bits(got.outputs, out));
    CHECK(same_bits(got.lse, lse));
  }
  CHECK(n.stat("executor", "executions") == 2);
  CHECK(n.stat("executor", "kv_rows_read") == 2 * 40 * 2);

  // Refusals, each alone in its slot of one batch.
  DecodeAttentionOp good = batch.ops[0];
  ExecuteBatch bad;
  bad.ops.push_back(good);  // from the other session, below
  Result<ExecuteBatchReceipt> foreign = b->call(bad);
  REQUIRE(foreign.ok());
  CHECK(error_of(*foreign, 0) == ErrorCode::unknown_request);
  bad.ops.clear();
  DecodeAttentionOp stale = good;
  stale.table_version = TableVersion{version.value + 7};
  DecodeAttentionOp layer = good;
  layer.layer = 9;
  DecodeAttentionOp width = good;
  width.queries.pop_back();
  DecodeAttentionOp mapping = good;
  mapping.q_heads = 3;
  mapping.queries.resize(3 * 16);
  bad.ops = {stale, layer, width, mapping, good};
  Result<ExecuteBatchReceipt> refused = a->call(bad);
  REQUIRE(refused.ok());
  CHECK(error_of(*refused, 0) == ErrorCode::stale_table_version);
  CHECK(error_of(*refused, 1) == ErrorCode::coordinate_out_of_range);
  CHECK(error_of(*refused, 2) == ErrorCode::executor_shape_mismatch);
  CHECK(error_of(*refused, 3) == ErrorCode::executor_head_mapping);
  CHECK(same_bits(output_of(*refused, 4).outputs, output_of(*run, 0).outputs));  // the batch went on
  for (const auto& garbage :
       {std::vector<uint8_t>{}, std::vector<uint8_t>(40, 0x5a), codec::encode(HelloRequest{"x", "y", 1})}) {
    Result<std::vector<uint8_t>> reply = a->raw(ExecutorRoute::id, garbage);
    REQUIRE(reply.ok());
    Result<ErrorMessage> e = codec::decode<ErrorMessage>(*reply);
    REQUIRE(e.ok());
    CHECK(e->error.code == ErrorCode::decode_failed);
  }
  CHECK(n.stat("executor", "errors") == 4);
}

}  // namespace kvrt::test
