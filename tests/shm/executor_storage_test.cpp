// [executor] one kernel over three storages: a TranslationSnapshot's pools
// (strides from the address translator, both Loop 4 axis orders), a
// shared-memory block pool (shm/BlockPoolSegment), and the mapper's
// contiguous virtual tensors (vAttention, 0x0BJ). Each expected row is built
// from element addresses the storage owner computes itself (the 0x03I
// translator, the segment's byte_offset, the mapper's 0x06C translate), never
// from the view's strides.
#include <catch2/catch.hpp>
#include <cstring>

#include "services/address/address_translator.hpp"
#include "services/address/snapshot_loader.hpp"
#include "services/common/units.hpp"
#include "services/executor/allocator_block_table.hpp"
#include "services/executor/block_table.hpp"
#include "services/executor/contiguous_decode.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/reference_attention.hpp"
#include "services/identity/layout_loader.hpp"
#include "services/mapper/memfd_backing.hpp"
#include "shm/block_pool_segment.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

std::string source(const std::string& relative) { return std::string(KVRT_SOURCE_DIR) + "/" + relative; }

// One monolithic row in binary64 from explicitly gathered K and V rows.
void gathered_row(const std::vector<std::vector<double>>& k, const std::vector<std::vector<double>>& v, const double* q,
                  double* out) {
  const size_t dk = k.front().size(), dv = v.front().size();
  std::vector<double> s(k.size());
  double best = -1e300, z = 0;
  for (size_t t = 0; t < k.size(); ++t) {
    double dot = 0;
    for (size_t x = 0; x < dk; ++x) dot += q[x] * k[t][x];
    s[t] = dot / std::sqrt(double(dk));
    best = std::max(best, s[t]);
  }
  for (size_t x = 0; x < dv; ++x) out[x] = 0;
  for (size_t t = 0; t < k.size(); ++t) {
    const double w = std::exp(s[t] - best);
    z += w;
    for (size_t x = 0; x < dv; ++x) out[x] += w * v[t][x];
  }
  for (size_t x = 0; x < dv; ++x) out[x] /= z;
}

}  // namespace

TEST_CASE("decode reads a TranslationSnapshot's pools through the translator's strides", "[executor][storage]") {
  auto layout = load_layout_manifest(source("config/layouts/two-group-tp2.toml"));
  REQUIRE(layout.ok());
  auto loaded = load_translation_snapshot(source("config/snapshots/loop4-fixture.toml"), *layout);
  REQUIRE(loaded.ok());
  TranslationSnapshot snapshot = *loaded;
  // Rebase every tensor onto host memory holding seeded fp16 values, so the
  // snapshot's byte addresses are this process's addresses.
  std::mt19937_64 rng(0x03F);
  std::vector<std::vector<std::byte>> storage;
  for (GroupPool& pool : snapshot.pools) {
    const CacheGroupLayout& group = *snapshot.layout.group(pool.group);
    const uint64_t elements = snapshot.geometry(group, pool).elements;
    for (uint64_t* base : {&pool.k_base, &pool.v_base}) {
      const auto values = random_values<float>(elements, rng);
      storage.emplace_back(elements * 2);
      narrow_scalars(ScalarType::fp16, values.data(), elements, storage.back().data());
      *base = reinterpret_cast<uint64_t>(storage.back().data());
    }
  }
  auto translator = AddressTranslator::create(snapshot);
  REQUIRE(translator.ok());
  const HeadMapping heads{8, 4};
  // Layer 5 lives in slot-major g0, layers 24 and 30 in layer-major g1.
  for (const uint32_t layer : {5u, 24u, 30u}) {
    for (const char* request : {"A", "B", "C"}) {
      INFO("layer " << layer << " request " << request);
      const CacheGroupId group = snapshot.layout.group_for_layer(layer)->group_id;
      auto table = resolve_block_table(snapshot, request, group);
      REQUIRE(table.ok());
      auto view = paged_kv_view(snapshot, layer);
      REQUIRE(view.ok());
      const uint64_t ctx = table->context_tokens;
      // Expected row: every K/V element resolved by the 0x03I translator.
      const auto q64 = widened(random_values<float>(heads.q_heads * 128, rng, 2.0));
      std::vector<double> want(heads.q_heads * 128);
      for (uint32_t h = 0; h < heads.q_heads; ++h) {
        std::vector<std::vector<double>> k(ctx, std::vector<double>(128)), v = k;
        for (uint64_t t = 0; t < ctx; ++t)
          for (uint32_t x = 0; x < 128; ++x)
            for (const TensorKind kind : {TensorKind::K, TensorKind::V}) {
              AddressQuery aq;
              aq.request = request;
              aq.token = t;
              aq.layer = layer;
              aq.kind = kind;
              aq.head = heads.kv_head_of(h);
              aq.lane = x;
              auto receipt = translator->translate(aq);
              if (!receipt.ok()) FAIL(receipt.error().describe());
              const double value = load_scalar(ScalarType::fp16, reinterpret_cast<const void*>(receipt->byte_address));
              (kind == TensorKind::K ? k : v)[t][x] = value;
            }
        gathered_row(k, v, q64.data() + h * 128, want.data() + h * 128);
      }
      const std::vector<DecodeRequest> requests{{table->view()}};
      std::vector<float> q(q64.begin(), q64.end()), out = poisoned<float>(want.size());
      REQUIRE(paged_decode(*view, DecodeArgs{heads, requests, q, out, {}, {}}).ok());
      CHECK(max_row_relative_error<float>(out, want, 128) <= 1e-5);
      std::vector<double> out64 = poisoned<double>(want.size());
      REQUIRE(paged_decode(*view, DecodeArgs64{heads, requests, q64, out64, {}, {}}).ok());
      CHECK(max_row_relative_error<double>(out64, want, 128) <= 1e-12);
    }
  }
}

TEST_CASE("decode reads a shared-memory block pool in place", "[executor][storage]") {
  auto layout = load_layout_manifest(source("config/layouts/two-group-tp2.toml"));
  REQUIRE(layout.ok());
  shm::PoolSegmentOptions o;
  o.name = shm::PoolSegmentName{"executor-test", NamespaceGeneration{1}, CacheGroupId{1}, shm::make_instance_id()};
  o.pool_id = PoolId{5};
  o.pool_generation = PoolGeneration{2};
  o.capacity = shm::PoolCapacity::blocks(6);
  auto segment = shm::BlockPoolSegment::create(*layout, o);
  REQUIRE(segment.ok());
  const shm::PoolGeometry& g = segment->geometry();
  // Rows written through the segment's own element addresses: layer 3 of g1
  // (layer-major), blocks in slots 4, 1, 5 (2 valid rows in the last).
  std::mt19937_64 rng(0x5A);
  const std::vector<uint32_t> slots{4, 1, 5}, valid{16, 16, 2};
  const uint32_t layer_local = 3;
  const uint64_t ctx = 34;
  std::vector<std::vector<std::vector<double>>> k(4), v(4);  // [head][token][lane]
  for (uint32_t h = 0; h < 4; ++h) {
    k[h].assign(ctx, std::vector<double>(128));
    v[h].assign(ctx, std::vector<double>(128));
  }
  for (uint64_t t = 0; t < ctx; ++t)
    for (uint32_t h = 0; h < 4; ++h)
      for (const TensorKind kind : {TensorKind::K, TensorKind::V}) {
        const auto values = random_values<float>(128, rng);
        auto lanes = segment->lanes(shm::PoolBlockRef{o.pool_id, o.pool_generation, PhysicalSlot{slots[t / 16]}},
                                    shm::KvCoordinate{kind, layer_local, uint32_t(t % 16), h, 0}, 128);
        REQUIRE(lanes.ok());
        narrow_scalars(ScalarType::fp16, values.data(), 128, lanes->data());
        for (uint32_t x = 0; x < 128; ++x)
          (kind == TensorKind::K ? k : v)[h][t][x] = load_scalar(ScalarType::fp16, lanes->data() + 2 * x);
      }
  auto tensor = [&](TensorKind kind) {
    auto bytes = segment->bytes(shm::ByteRun{g.tensor_offset(kind), g.tensor_bytes(kind)});
    REQUIRE(bytes.ok());
    return KvTensorBytes{reinterpret_cast<const std::byte*>(bytes->data()), bytes->size(), ScalarType::fp16};
  };
  auto view = paged_kv_view(g.tensor(), layer_local, tensor(TensorKind::K), tensor(TensorKind::V));
  REQUIRE(view.ok());
  const HeadMapping heads{8, 4};
  const auto q64 = widened(random_values<float>(8 * 128, rng, 2.0));
  std::vector<double> want(8 * 128);
  for (uint32_t j = 0; j < 8; ++j)
    gathered_row(k[heads.kv_head_of(j)], v[heads.kv_head_of(j)], &q64[j * 128], &want[j * 128]);
  const std::vector<DecodeRequest> requests{{KvBlockTable{slots, valid, ctx}}};
  std::vector<float> q(q64.begin(), q64.end()), out = poisoned<float>(want.size());
  for (const uint32_t p_k : {16u, 4u}) {
    AttentionOptions opt;
    opt.kernel_block_tokens = p_k;
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    REQUIRE(paged_decode(*view, DecodeArgs{heads, requests, q, out, {}, opt}).ok());
    CHECK(max_row_relative_error<float>(out, want, 128) <= 1e-5);
  }
}

TEST_CASE("0x0BJ: page groups of Llama-3-8B rows, and the 1,025th-token staircase", "[executor][storage]") {
  // The spec's table was lost; rebuilt from its text: one-layer K (or V) rows
  // of Llama-3-8B at TP-1 are 8 K/V heads x 128 lanes x 2 B = 2,048 B
  // (vAttention Table 8), page groups of 64 KiB, 128 KiB, 256 KiB and 2 MiB
  // (the sizes vAttention evaluates), and T = 1,024 lands on every boundary.
  for (const uint64_t group_bytes : {64 * kKiB, 128 * kKiB, 256 * kKiB, 2 * kMiB}) {
    INFO("G " << group_bytes);
    MapperConfig c{1, 1, 4096, 8, 128, 2, group_bytes, 2};
    auto g = MapperGeometry::make(c);
    REQUIRE(g.ok());
    CHECK(g->row_bytes() == 2048);
    CHECK(g->tokens_per_page() == group_bytes / 2048);  // P_G = G / B_row
    auto waste = [&](uint32_t tokens) {
      return uint64_t{g->pages_for_tokens(tokens)} * group_bytes - tokens * 2048ull;
    };
    CHECK(g->pages_for_tokens(1024) == 1024 * 2048 / group_bytes);
    CHECK(waste(1024) == 0);
    // One more token opens a page group and wastes all but one row of it.
    CHECK(g->pages_for_tokens(1025) == 1024 * 2048 / group_bytes + 1);
    CHECK(waste(1025) == group_bytes - 2048);
  }
  // TP-2 halves the local row (4 heads), so the same G backs twice the tokens.
  auto tp2 = MapperGeometry::make(MapperConfig{1, 1, 4096, 4, 128, 2, 64 * kKiB, 2});
  REQUIRE(tp2.ok());
  CHECK(tp2->row_bytes() == 1024);
  CHECK(tp2->tokens_per_page() == 64);
}

TEST_CASE("contiguous decode reads the mapper's virtual tensors with plain strides", "[executor][storage]") {
  // Llama-3-8B-shaped rows (H_kv 8, d 128, bf16: 2,048 B), G = 64 KiB, two
  // request slots; each slot's pages come from non-adjacent handles.
  MapperConfig c{2, 2, 2048, 8, 128, 2, 64 * kKiB, 2 * 2 * 2 * 34};
  auto made = VmmMapper::init(c, std::make_unique<MemfdBacking>());
  REQUIRE(made.ok());
  VmmMapper& m = *made.value();
  const std::vector<uint32_t> contexts{1025, 300};
  std::vector<SlotBinding> bindings;
  for (uint32_t r = 0; r < 2; ++r)
    bindings.push_back(m.alloc_reqid(RequestId{r + 1}, RequestGeneration{1}, contexts[r]).value());
  REQUIRE(m.step({{RequestId{1}, 600}, {RequestId{2}, 300}}, MappingPath::synchronous).ok());
  REQUIRE(m.step({{RequestId{1}, 1025}, {RequestId{2}, 300}}, MappingPath::synchronous).ok());
  const uint32_t layer = 1;
  std::mt19937_64 rng(0x0B1);
  // values[r][kind][t][h][x], written element by element at the mapper's own
  // 0x06C address.
  std::vector<std::vector<std::vector<float>>> values(2, std::vector<std::vector<float>>(2));
  for (uint32_t r = 0; r < 2; ++r)
    for (uint32_t kind = 0; kind < 2; ++kind) {
      values[r][kind] = random_values<float>(uint64_t{contexts[r]} * 8 * 128, rng);
      for (uint32_t t = 0; t < contexts[r]; ++t)
        for (uint32_t h = 0; h < 8; ++h)
          for (uint32_t x = 0; x < 128; ++x) {
            auto loc = m.translate(RequestId{r + 1}, bindings[r].generation, layer, KvTensorKind(kind), t, h, x);
            if (!loc.ok()) FAIL(loc.error().describe());
            const uint16_t b = float_to_bf16(values[r][kind][(uint64_t{t} * 8 + h) * 128 + x]);
            std::memcpy(m.reservation_base() + loc->address.reservation_offset, &b, 2);
          }
      REQUIRE(m.append_rows(RequestId{r + 1}, bindings[r].generation, contexts[r]).ok());
    }
  const std::vector<MappedRead> reads{{RequestId{1}, bindings[0].generation, 1025},
                                      {RequestId{2}, bindings[1].generation, 300}};
  REQUIRE(check_contiguous_readable(m, reads).ok());
  // Map before use: a row past the mapped frontier is refused by the mapper.
  const std::vector<MappedRead> beyond{{RequestId{2}, bindings[1].generation, 301}};
  CHECK_FALSE(check_contiguous_readable(m, beyond).ok());

  auto view = contiguous_kv_view(m.geometry(), m.reservation_base(), layer, ScalarType::bf16);
  REQUIRE(view.ok());
  const HeadMapping heads{32, 8};
  const auto q64 = widened(random_values<float>(2 * 32 * 128, rng, 2.0));
  std::vector<double> want(2 * 32 * 128);
  for (uint32_t r = 0; r < 2; ++r)
    for (uint32_t j = 0; j < 32; ++j) {
      std::vector<std::vector<double>> k(contexts[r], std::vector<double>(128)), v = k;
      for (uint32_t t = 0; t < contexts[r]; ++t)
        for (uint32_t x = 0; x < 128; ++x) {
          const uint64_t e = (uint64_t{t} * 8 + heads.kv_head_of(j)) * 128 + x;
          k[t][x] = bf16_to_float(float_to_bf16(values[r][0][e]));
          v[t][x] = bf16_to_float(float_to_bf16(values[r][1][e]));
        }
      gathered_row(k, v, &q64[(r * 32 + j) * 128], &want[(r * 32 + j) * 128]);
    }
  const std::vector<ContiguousRequest> requests{{bindings[0].slot.value, 1025}, {bindings[1].slot.value, 300}};
  std::vector<float> q(q64.begin(), q64.end());
  ThreadPool pool(2);
  for (const uint32_t part : {0u, 128u, 1000u}) {
    INFO("P_part " << part);
    std::vector<float> out = poisoned<float>(want.size());
    auto r = contiguous_decode(*view, ContiguousDecodeArgs{heads, requests, q, out, {}, part}, &pool);
    REQUIRE(r.ok());
    CHECK(max_row_relative_error<float>(out, want, 128) <= 1e-5);
  }
  // The reservation holds T_max = 2,048 rows per slot; a longer context is refused.
  const std::vector<ContiguousRequest> too_long{{bindings[0].slot.value, 2049}};
  std::vector<float> q1(32 * 128), out1 = poisoned<float>(32 * 128);
  auto refused = contiguous_decode(*view, ContiguousDecodeArgs{heads, too_long, q1, out1, {}, 0});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::row_not_valid);
  CHECK(std::isnan(out1[0]));
}

TEST_CASE("decode reads a table the allocator owner published", "[executor][storage]") {
  // One cache group, P_a = 16, block ids 500 + slot; a 70-token request whose
  // rows the model committed through row 70, and a fork sharing its blocks.
  BlockAllocatorConfig config;
  config.block_size = 16;
  config.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{3}, PoolGeneration{1}, 12, 500, 2 * 2 * 32 * 4, {}});
  auto made = BlockAllocator::create(config);
  REQUIRE(made.ok());
  BlockAllocator& allocator = *made;
  Result<AllocationReceipt> receipt = allocator.allocate(AllocateArgs{70, {}, {}});
  REQUIRE(receipt.ok());
  const RequestFence fence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
  receipt = allocator.commit_rows(CommitRowsArgs{fence, 70});
  REQUIRE(receipt.ok());
  auto table = block_table_from_allocator(allocator, receipt->request_id, 0, 500);
  REQUIRE(table.ok());
  CHECK(table->context_tokens == 70);
  CHECK(table->valid_rows == std::vector<uint32_t>{16, 16, 16, 16, 6});
  CHECK(table->table_version == receipt->table_version_after);
  // K/V rows at the allocator's slots, in a plain pool of its capacity.
  std::mt19937_64 rng(0xA110C);
  PlainPool pool(PlainPoolShape{12, 16, 2, 32, 32, ScalarType::bf16, ScalarType::bf16});
  for (size_t j = 0; j < table->slots.size(); ++j) pool.fill_block(table->slots[j], table->valid_rows[j], rng);
  const HeadMapping heads{4, 2};
  const std::vector<DecodeRequest> requests{{table->view()}};
  const auto q64 = widened(random_values<float>(4 * 32, rng, 2.0));
  std::vector<double> want(4 * 32);
  reference_decode(pool.view(), heads, requests, q64, want, {});
  std::vector<float> q(q64.begin(), q64.end()), out = poisoned<float>(want.size());
  REQUIRE(paged_decode(pool.view(), DecodeArgs{heads, requests, q, out, {}, {}}).ok());
  CHECK(max_row_relative_error<float>(out, want, 32) <= 1e-5);
}

}  // namespace kvrt::test
