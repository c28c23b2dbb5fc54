// [node][executor] The kernel executor owner served by a node: a
// worker writes K/V rows into the node's shared pools at its receipt's
// blocks, commits them, and asks the node to run decode attention for its
// request; the node resolves the table itself under the session and its
// output equals, bit for bit, the same kernel run by the worker over its own
// mapping of the pools. Another session's request, a stale table version, a
// bad layer, query width or head mapping, and malformed bytes are typed
// errors; the node keeps serving.
//
// Shared-prefix execution: requests that hold the same physical blocks (a
// system prompt shared by three, a document by two of them) run as one
// batch with Hydragen, ChunkAttention and per-request decode; each design's
// rows equal every request's own decode (per-request bit for bit, the
// merged designs within the row bound of attention_args.hpp), the receipt
// states the tree it built, and a batch that shares nothing falls back.
#include <cmath>
#include <random>

#include "schema/codecs.hpp"
#include "services/executor/attention_args.hpp"
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

// Outcome i of a receipt's list: the answer it must be, or its error's code.
template <class Answer, class Outcome>
const Answer& answer_of(const std::vector<Outcome>& outcomes, size_t i) {
  const auto* o = std::get_if<Answer>(&outcomes.at(i));
  INFO((o == nullptr ? std::get<Error>(outcomes[i]).describe() : "ok"));
  REQUIRE(o != nullptr);
  return *o;
}
template <class Outcome>
ErrorCode code_of(const std::vector<Outcome>& outcomes, size_t i) {
  const auto* e = std::get_if<Error>(&outcomes.at(i));
  return e == nullptr ? ErrorCode::ok : e->code;
}

const AttentionOutput& output_of(const ExecuteBatchReceipt& r, size_t i) {
  return answer_of<AttentionOutput>(r.outcomes, i);
}
ErrorCode error_of(const ExecuteBatchReceipt& r, size_t i) { return code_of(r.outcomes, i); }

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
  CHECK(output_of(*run, 0).kernel_block_tokens == 16);  // P_k = P_a by default
  CHECK(output_of(*run, 0).kernel_blocks == 3 * 2);     // ceil(40 / 16) per K/V head

  // Kernel blocks of P_k = 8 rows carved from the 16-row allocator blocks
  // (0x0AC): the same attention, ceil(40 / 8) kernel blocks per K/V head;
  // a P_k that does not divide P_a is refused.
  {
    ExecuteBatch split;
    for (uint32_t p_k : {8u, 4u, 5u, 32u}) {
      DecodeAttentionOp op = batch.ops[0];
      op.kernel_block_tokens = p_k;
      split.ops.push_back(op);
    }
    Result<ExecuteBatchReceipt> s = a->call(split);
    REQUIRE(s.ok());
    for (size_t i = 0; i < 2; ++i) {
      const AttentionOutput& o = output_of(*s, i);
      const uint32_t p_k = i == 0 ? 8 : 4;
      CHECK(o.kernel_block_tokens == p_k);
      CHECK(o.kernel_blocks == (40 + p_k - 1) / p_k * 2);
      CHECK(o.kv_rows == 40 * 2);
      const AttentionOutput& whole = output_of(*run, 0);
      for (size_t k = 0; k < o.outputs.size(); ++k)
        CHECK(std::fabs(o.outputs[k] - whole.outputs[k]) <= 1e-5f * (1.0f + std::fabs(whole.outputs[k])));
    }
    CHECK(error_of(*s, 2) == ErrorCode::kernel_block_not_divisor);
    CHECK(error_of(*s, 3) == ErrorCode::kernel_block_not_divisor);
  }

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
  CHECK(n.stat("executor", "errors") == 4 + 2);  // and the two P_k refusals above
}

namespace {

// A request of `rows` tokens taking `shared` (bundle-major handles of its
// first blocks) by reference; its own blocks filled with seeded rows and
// every row committed.
struct Member {
  RequestFence fence;
  TableVersion version;
  uint32_t rows = 0;
  std::vector<PhysicalBlockHandle> handles;  // bundle-major, as a prefix hit names them
};

Member admit_member(Client& c, AttachedPools& pools, uint32_t rows, const std::vector<PhysicalBlockHandle>& shared,
                    std::mt19937_64& rng) {
  const uint32_t G = static_cast<uint32_t>(pools.layout.cache_groups.size());
  Result<AllocatorBatchReceipt> alloc = c.call(AllocatorBatch{{}, {AllocateOp{rows, shared, std::nullopt}}});
  REQUIRE(alloc.ok());
  const auto* r = std::get_if<AllocationReceipt>(&alloc->outcomes.at(0));
  REQUIRE(r != nullptr);
  REQUIRE(r->outcome == AllocationOutcome::committed);
  Member m;
  m.rows = rows;
  const uint32_t blocks = (rows + 15) / 16, taken = static_cast<uint32_t>(shared.size()) / G;
  std::vector<std::vector<PhysicalBlockHandle>> by_group(G, std::vector<PhysicalBlockHandle>(blocks));
  for (uint32_t j = 0; j < taken; ++j)
    for (uint32_t g = 0; g < G; ++g) by_group[g][j] = shared[j * G + g];
  for (const TableEntryUpdate& e : r->published_entries) by_group[e.handle.group.value][e.logical_block] = e.handle;
  for (uint32_t j = 0; j < blocks; ++j)
    for (uint32_t g = 0; g < G; ++g) m.handles.push_back(by_group[g][j]);
  for (uint32_t layer = 0; layer < pools.layout.layer_count(); ++layer) {
    const uint32_t g = pools.layout.group_for_layer(layer)->group_id.value;
    for (uint32_t j = taken; j < blocks; ++j)
      pools.fill(layer, by_group[g][j].block.value, std::min<uint32_t>(16, rows - j * 16), rng);
  }
  const RequestFence fence{r->request_id, r->request_generation, r->table_version_after};
  Result<AllocatorBatchReceipt> committed = c.call(AllocatorBatch{{}, {CommitRowsOp{fence, rows}}});
  REQUIRE(committed.ok());
  const auto* done = std::get_if<AllocationReceipt>(&committed->outcomes.at(0));
  REQUIRE(done != nullptr);
  m.fence = fence;
  m.version = done->table_version_after;
  return m;
}

const SharedPrefixOutput& shared_output_of(const ExecuteBatchReceipt& r, size_t i) {
  return answer_of<SharedPrefixOutput>(r.shared_outcomes, i);
}
ErrorCode shared_error_of(const ExecuteBatchReceipt& r, size_t i) { return code_of(r.shared_outcomes, i); }

// The row bound of attention_args.hpp: a merged row within 1e-5 of the row's scale.
bool rows_close(const std::vector<float>& a, const std::vector<float>& b, size_t width) {
  if (a.size() != b.size()) return false;
  for (size_t row = 0; row < a.size() / width; ++row) {
    double scale = 1e-30;
    for (size_t k = 0; k < width; ++k) scale = std::max(scale, std::fabs(double{b[row * width + k]}));
    for (size_t k = 0; k < width; ++k)
      if (std::fabs(double{a[row * width + k]} - double{b[row * width + k]}) > 1e-5 * scale) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("node executor: a shared-prefix batch runs each design over the tree its tables make",
          "[node][executor][shared_prefix]") {
  ScratchDir dir("node-executor-shared");
  InProcessNode n(dir);
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  AttachedPools pools(*a, n.descriptor);
  const uint32_t G = static_cast<uint32_t>(pools.layout.cache_groups.size());
  std::mt19937_64 rng(0x5A4ED);

  // A system prompt (2 blocks) and a document (1 block): r0 holds both;
  // r1 takes both and adds 20 private rows; r2 takes the system prompt and
  // adds 24; r3 shares nothing.
  const Member r0 = admit_member(*a, pools, 48, {}, rng);
  const std::vector<PhysicalBlockHandle> system(r0.handles.begin(), r0.handles.begin() + 2 * G);
  const std::vector<PhysicalBlockHandle> document(r0.handles.begin(), r0.handles.begin() + 3 * G);
  const Member r1 = admit_member(*a, pools, 68, document, rng);
  const Member r2 = admit_member(*a, pools, 56, system, rng);
  const Member r3 = admit_member(*a, pools, 30, {}, rng);
  const std::vector<Member> members{r2, r0, r3, r1};  // any order: the node sorts the tree

  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (uint32_t layer : {0u, 3u}) {
    INFO("layer " << layer);
    // Every member's own decode, for reference.
    ExecuteBatch own;
    std::vector<float> queries;
    for (const Member& m : members) {
      DecodeAttentionOp op{m.fence.request, m.version, layer, 4, std::vector<float>(4 * 16)};
      for (float& x : op.queries) x = u(rng);
      queries.insert(queries.end(), op.queries.begin(), op.queries.end());
      own.ops.push_back(op);
    }
    SharedPrefixDecodeOp shared;
    for (const Member& m : members) shared.members.push_back(SharedDecodeRequest{m.fence.request, m.version});
    shared.layer = layer;
    shared.q_heads = 4;
    shared.queries = queries;
    for (SharedPrefixDesign d : {SharedPrefixDesign::auto_, SharedPrefixDesign::hydragen,
                                 SharedPrefixDesign::chunk_attention, SharedPrefixDesign::per_request}) {
      shared.design = d;
      own.shared.push_back(shared);
    }
    Result<ExecuteBatchReceipt> run = a->call(own);
    REQUIRE(run.ok());
    REQUIRE(run->shared_outcomes.size() == 4);
    const SharedPrefixDesign executed[] = {SharedPrefixDesign::chunk_attention, SharedPrefixDesign::hydragen,
                                           SharedPrefixDesign::chunk_attention, SharedPrefixDesign::per_request};
    for (size_t k = 0; k < 4; ++k) {
      INFO("design " << k);
      const SharedPrefixOutput& o = shared_output_of(*run, k);
      CHECK(o.design == executed[k]);  // auto: two shared levels on r1's path -> ChunkAttention
      CHECK(o.fallback_reason.empty());
      CHECK(o.levels == 2);
      CHECK(o.chunks == 5);  // system, document, r1's, r2's and r3's own rows
      CHECK(o.shared_chunks == 2);
      CHECK(o.rows_per_request == 48 + 68 + 56 + 30);
      CHECK(o.rows_read == (k == 3 ? 48 + 68 + 56 + 30 : 32 + 16 + 20 + 24 + 30));
      CHECK(o.snapshot_sha256 != Sha256Digest{});
      REQUIRE(o.outputs.size() == members.size());
      for (size_t i = 0; i < members.size(); ++i) {
        const AttentionOutput& ref = output_of(*run, i);
        CHECK(o.outputs[i].request == members[i].fence.request);
        CHECK(o.outputs[i].context_tokens == members[i].rows);
        CHECK(o.outputs[i].kv_rows == ref.kv_rows);  // keys attended per K/V head, whatever the design
        if (k == 3) {
          CHECK(same_bits(o.outputs[i].outputs, ref.outputs));
          CHECK(same_bits(o.outputs[i].lse, ref.lse));
        } else {
          CHECK(rows_close(o.outputs[i].outputs, ref.outputs, 16));
          CHECK(rows_close(o.outputs[i].lse, ref.lse, 1));
        }
      }
    }
  }
  CHECK(n.stat("executor", "shared_prefix_batches") == 2 * 3);
  CHECK(n.stat("executor", "shared_prefix_rows_saved") == 2 * 3 * ((48 + 68 + 56 + 30) - (32 + 16 + 20 + 24 + 30)));

  // A member limited to its first 48 keys (r1 over the system prompt and the
  // document r0 holds) attends exactly r0's keys: with the same queries,
  // per-request decode gives r0's bits, the merged designs r0's row.
  {
    SharedPrefixDecodeOp limited;
    limited.members = {SharedDecodeRequest{r0.fence.request, r0.version, 0},
                       SharedDecodeRequest{r1.fence.request, r1.version, 48}};
    limited.layer = 0;
    limited.q_heads = 4;
    std::vector<float> q(4 * 16);
    for (float& x : q) x = u(rng);
    limited.queries = q;
    limited.queries.insert(limited.queries.end(), q.begin(), q.end());
    ExecuteBatch both;
    for (SharedPrefixDesign d : {SharedPrefixDesign::per_request, SharedPrefixDesign::hydragen}) {
      limited.design = d;
      both.shared.push_back(limited);
    }
    SharedPrefixDecodeOp past = limited;
    past.members[1].context_tokens = 69;  // r1 holds 68
    both.shared.push_back(past);
    Result<ExecuteBatchReceipt> got = a->call(both);
    REQUIRE(got.ok());
    const SharedPrefixOutput& per = shared_output_of(*got, 0);
    CHECK(per.outputs[1].context_tokens == 48);
    CHECK(same_bits(per.outputs[0].outputs, per.outputs[1].outputs));
    CHECK(same_bits(per.outputs[0].lse, per.outputs[1].lse));
    const SharedPrefixOutput& hyd = shared_output_of(*got, 1);
    CHECK(hyd.shared_chunks == 1);  // the two share all 48 keys
    CHECK(rows_close(hyd.outputs[1].outputs, per.outputs[0].outputs, 16));
    CHECK(shared_error_of(*got, 2) == ErrorCode::invalid_argument);
  }

  // Nothing shared: per-request decode, and the output says why.
  const Member r4 = admit_member(*a, pools, 20, {}, rng);
  SharedPrefixDecodeOp lone;
  lone.members = {SharedDecodeRequest{r3.fence.request, r3.version}, SharedDecodeRequest{r4.fence.request, r4.version}};
  lone.layer = 0;
  lone.q_heads = 4;
  lone.queries.assign(2 * 4 * 16, 0.25f);
  ExecuteBatch fallback;
  fallback.shared = {lone};
  Result<ExecuteBatchReceipt> fell = a->call(fallback);
  REQUIRE(fell.ok());
  const SharedPrefixOutput& f = shared_output_of(*fell, 0);
  CHECK(f.design == SharedPrefixDesign::per_request);
  CHECK_FALSE(f.fallback_reason.empty());
  CHECK(f.shared_chunks == 0);
  CHECK(n.stat("executor", "shared_prefix_fallbacks") == 1);
  CHECK(n.stat("executor", "shared_prefix_fallbacks_unshared") == 1);
  CHECK(n.stat("executor", "shared_prefix_fallbacks_gpu_pools") == 0);

  // Refusals, each alone in its slot; the batch goes on.
  SharedPrefixDecodeOp foreign = lone;  // r3 and r4 are worker-0's
  ExecuteBatch other;
  other.shared = {foreign};
  Result<ExecuteBatchReceipt> refused_other = b->call(other);
  REQUIRE(refused_other.ok());
  CHECK(shared_error_of(*refused_other, 0) == ErrorCode::unknown_request);
  SharedPrefixDecodeOp stale = lone;
  stale.members[1].table_version = TableVersion{r4.version.value + 5};
  SharedPrefixDecodeOp twice = lone;
  twice.members[1] = twice.members[0];
  SharedPrefixDecodeOp width = lone;
  width.queries.pop_back();
  SharedPrefixDecodeOp none = lone;
  none.members.clear();
  none.queries.clear();
  SharedPrefixDecodeOp layer = lone;
  layer.layer = 9;
  ExecuteBatch bad;
  bad.shared = {stale, twice, width, none, layer, lone};
  Result<ExecuteBatchReceipt> refused = a->call(bad);
  REQUIRE(refused.ok());
  CHECK(shared_error_of(*refused, 0) == ErrorCode::stale_table_version);
  CHECK(shared_error_of(*refused, 1) == ErrorCode::invalid_argument);
  CHECK(shared_error_of(*refused, 2) == ErrorCode::executor_shape_mismatch);
  CHECK(shared_error_of(*refused, 3) == ErrorCode::invalid_argument);
  CHECK(shared_error_of(*refused, 4) == ErrorCode::coordinate_out_of_range);
  CHECK(same_bits(shared_output_of(*refused, 5).outputs.at(0).outputs, f.outputs.at(0).outputs));
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
}

}  // namespace kvrt::test
