// The reference model's edges: refused forward() calls leave the
// cache untouched, create() refuses configs and layouts it cannot serve, the
// [model] config table, the weight generator, macs_per_token, and greedy /
// ranked token choice.
#include <cmath>
#include <limits>
#include <utility>

#include "engine/model/model_weights.hpp"
#include "tests/engine/model_fixture.hpp"

using namespace kvrt;
using namespace kvrt::model;
using namespace kvrt::model::test;

TEST_CASE("forward refuses bad arguments before writing any row", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(5), layout);
  auto cache = make_cache(layout, 8);
  const std::vector<TokenId> a = seeded_tokens(1, 20, model.config().vocab);
  const SequenceBlocks blocks_a = blocks_for(layout, 20, 0);  // slots 0, 1
  forward_rows(model, *cache, blocks_a, a, 0);
  const std::vector<uint8_t> before = whole_cache(*cache);

  // Chunk 0 is always a valid new sequence (slots 4, 5), so a model that
  // wrote before checking chunk 1 would change the cache.
  const std::vector<TokenId> b = seeded_tokens(2, 20, model.config().vocab);
  const SequenceBlocks blocks_b = blocks_for(layout, 20, 4);
  const auto refuse = [&](const ForwardChunk& bad, ErrorCode code, const std::string& field) {
    const ForwardChunk chunks[] = {{&blocks_b, b, 0}, bad};
    auto r = model.forward(*cache, chunks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    CHECK(r.error().field == field);
    CHECK(whole_cache(*cache) == before);
  };
  // No chunks: nothing to compute, no logits.
  auto nothing = model.forward(*cache, std::span<const ForwardChunk>());
  REQUIRE(nothing.ok());
  CHECK(nothing->empty());
  std::vector<TokenId> bad_tokens = a;
  SequenceBlocks bad_blocks = blocks_a;

  SECTION("a token outside the vocabulary") {
    bad_tokens[3] = TokenId(model.config().vocab);
    refuse({&blocks_a, bad_tokens, 20 - 1}, ErrorCode::invalid_argument, "chunks[1].tokens[3]");
    bad_tokens[3] = -1;
    refuse({&blocks_a, bad_tokens, 20 - 1}, ErrorCode::invalid_argument, "chunks[1].tokens[3]");
  }
  SECTION("an empty chunk") {
    refuse({&blocks_a, a, 20}, ErrorCode::executor_frontier_mismatch, "chunks[1].first_row");
    refuse({&blocks_a, std::span<const TokenId>(), 0}, ErrorCode::executor_frontier_mismatch, "chunks[1].first_row");
  }
  SECTION("no table, a table per group missing, a table too short") {
    refuse({nullptr, a, 0}, ErrorCode::invalid_argument, "chunks[1].blocks");
    bad_blocks.slots.pop_back();
    refuse({&bad_blocks, a, 0}, ErrorCode::unknown_group, "chunks[1].blocks.slots");
    bad_blocks = blocks_a;
    std::vector<TokenId> longer = a;
    longer.push_back(1);
    longer.resize(33, 2);  // 33 tokens need 3 blocks; the table has 2
    refuse({&bad_blocks, longer, 20}, ErrorCode::table_out_of_bounds, "chunks[1].blocks.slots[0]");
    bad_blocks.slots[0].push_back(2);
    refuse({&bad_blocks, longer, 20}, ErrorCode::table_out_of_bounds, "chunks[1].blocks.slots[1]");
  }
  SECTION("a slot outside the cache") {
    bad_blocks.slots[1][0] = cache->slot_count();
    refuse({&bad_blocks, a, 19}, ErrorCode::coordinate_out_of_range, "chunks[1].blocks.slots[1][0]");
  }
  SECTION("rows written twice, or read while written, in one call") {
    // Sequence b again, as a second chunk writing the same rows 16..19.
    refuse({&blocks_b, b, 16}, ErrorCode::invalid_argument, "chunks[1].blocks.slots[0][1]");
    // A chunk whose prefix block is slot 4, which chunk 0 is writing.
    SequenceBlocks reader;
    reader.slots = {{4, 6}, {7, 6}};
    refuse({&reader, a, 16}, ErrorCode::invalid_argument, "chunks[1].blocks.slots[0][0]");
  }
  SECTION("a cache of another layout") {
    CacheLayoutManifest other = layout;
    other.manifest_id = "another";
    auto other_cache = make_cache(other, 8);
    const ForwardChunk chunk{&blocks_a, a, 0};
    auto r = model.forward(*other_cache, std::span<const ForwardChunk>(&chunk, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::incompatible);
    CHECK(r.error().field == "cache.layout");
    CHECK(whole_cache(*other_cache) == std::vector<uint8_t>(before.size(), 0));
  }
}

TEST_CASE("create refuses zero sizes and layouts the model cannot serve", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const auto refused = [&](const ModelConfig& c, const CacheLayoutManifest& l, ErrorCode code,
                           const std::string& field) {
    auto m = ReferenceModel::create(c, l);
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().code == code);
    CHECK(m.error().field == field);
  };
  const ModelConfig good;
  using SizeField = std::pair<uint32_t ModelConfig::*, const char*>;
  const SizeField sizes[] = {{&ModelConfig::vocab, "vocab"},
                             {&ModelConfig::d_model, "d_model"},
                             {&ModelConfig::q_heads_per_kv, "q_heads_per_kv"},
                             {&ModelConfig::mlp_dim, "mlp_dim"},
                             {&ModelConfig::threads, "threads"}};
  for (const auto& [member, field] : sizes) {
    ModelConfig c = good;
    c.*member = 0;
    refused(c, layout, ErrorCode::config_field, field);
  }
  for (double theta : {0.0, 1.0, -5.0, std::numeric_limits<double>::quiet_NaN(), HUGE_VAL}) {
    ModelConfig c = good;
    c.rope_theta = theta;
    refused(c, layout, ErrorCode::config_field, "rope_theta");
  }
  ModelConfig big = good;
  big.vocab = (1u << 20) + 1;
  refused(big, layout, ErrorCode::config_field, "vocab");
  big = good;
  big.d_model = 8192;
  big.vocab = 1u << 20;  // 2 * 2^13 * 2^20 floats of (un)embedding > 2^28
  refused(big, layout, ErrorCode::config_field, "d_model");

  CacheLayoutManifest sharded = layout;
  sharded.tp_world_size = 2;  // tp_rank 0 < 2: a valid manifest, but one rank's share
  REQUIRE(sharded.validate().ok());
  refused(good, sharded, ErrorCode::incompatible, "layout.tp_world_size");
  CacheLayoutManifest odd = layout;
  odd.cache_groups[1].head_dim = 15;
  refused(good, odd, ErrorCode::incompatible, "layout.cache_groups[1].head_dim");
  CacheLayoutManifest gap = layout;
  gap.cache_groups[1].layer_start = 4;
  gap.cache_groups[1].layer_end = 5;
  auto m = ReferenceModel::create(good, gap);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == gap.validate().error().code);
}

TEST_CASE("LocalModelKvCache refuses zero slots and checks row coordinates", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  auto none = LocalModelKvCache::create(layout, 0);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().field == "slots");
  auto cache = make_cache(layout, 3);
  CHECK(cache->slot_count() == 3);
  std::vector<uint8_t> row(128);  // B_row of group 1: 1 layer * 2 heads * 16 lanes * (2 + 2)
  CHECK(cache->read_canonical_row(1, 2, 15, row).ok());
  CHECK(cache->read_canonical_row(2, 0, 0, row).error().code == ErrorCode::unknown_group);
  CHECK(cache->read_canonical_row(1, 3, 0, row).error().field == "slot");
  CHECK(cache->read_canonical_row(1, 0, 16, row).error().field == "row");
  CHECK(cache->read_canonical_row(0, 0, 0, row).error().field == "out");
  // Writable bases are the views' own addresses.
  CHECK(cache->writable_k(3) == cache->layer_view(3).k.base);
  CHECK(cache->writable_v(0) == cache->layer_view(0).v.base);
}

TEST_CASE("macs_per_token is the hand count of the weight multiply-adds", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  // small-two-group: 4 layers, H_kv = 2, d_h = 16; defaults G = 2 (H_q = 4),
  // d_model 64, mlp 128, vocab 256. Per layer: W_qkv 64 * (64 + 32 + 32) =
  // 8192, W_o 64 * 64 = 4096, MLP 2 * 64 * 128 = 16384: 28672; times 4 =
  // 114688, plus the unembedding 64 * 256 = 16384: 131072.
  CHECK(make_model(ModelConfig{}, layout).macs_per_token() == 131072);
  // G = 1, d_model 32, mlp 48, vocab 100: per layer 32 * (32 + 32 + 32) =
  // 3072, 32 * 32 = 1024, 2 * 32 * 48 = 3072: 7168; times 4 = 28672, plus
  // 32 * 100 = 3200: 31872.
  ModelConfig small;
  small.q_heads_per_kv = 1;
  small.d_model = 32;
  small.mlp_dim = 48;
  small.vocab = 100;
  const ReferenceModel m = make_model(small, layout);
  CHECK(m.macs_per_token() == 31872);
  CHECK(m.layer_count() == 4);
}

TEST_CASE("weights are splitmix64 draws of the seed alone", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  ModelConfig c;
  c.seed = 0;
  const ModelShape shape = model_shape(c, layout).value();
  const ModelWeights w0 = draw_model_weights(shape, 0);
  // splitmix64's first output for seed 0 is 0xE220A8397B1DCDAF (the
  // published test vector); its top 24 bits 0xE220A8 = 14819496 map to
  // (14819496 - 2^23) * 2^-23, the first embedding scalar (fan-in 1).
  CHECK(w0.embedding[0] == float((14819496.0 - 8388608.0) / 8388608.0));
  const ModelWeights again = draw_model_weights(shape, 0);
  CHECK(same_bits(w0.unembed, again.unembed));
  CHECK(same_bits(w0.layers[3].w_down, again.layers[3].w_down));
  const ModelWeights w1 = draw_model_weights(shape, 1);
  CHECK_FALSE(same_bits(w0.layers[0].w_qkv, w1.layers[0].w_qkv));
  // Scale: a matrix of fan-in n lies in [-1, 1) / sqrt(n).
  for (float x : w0.layers[0].w_up) CHECK(std::abs(x) <= 1.0f / 8.0f);  // n = d_model = 64
}

TEST_CASE("model config: shipped file, defaults, every key and field errors", "[model]") {
  auto shipped = load_model_config(std::string(KVRT_SOURCE_DIR) + "/config/model.toml");
  REQUIRE(shipped.ok());
  const ModelConfig d;
  CHECK(shipped->seed == d.seed);
  CHECK(shipped->vocab == d.vocab);
  CHECK(shipped->d_model == d.d_model);
  CHECK(shipped->q_heads_per_kv == d.q_heads_per_kv);
  CHECK(shipped->mlp_dim == d.mlp_dim);
  CHECK(shipped->rope_theta == d.rope_theta);
  CHECK(shipped->threads == d.threads);

  auto empty = parse_model_config("[node]\nport = 1\n", "t.toml");  // no [model]: defaults
  REQUIRE(empty.ok());
  CHECK(empty->vocab == d.vocab);
  auto every = parse_model_config(
      "[model]\nseed = 42\nvocab = 1000\nd_model = 96\nq_heads_per_kv = 4\nmlp_dim = 200\nrope_theta = 500000\n"
      "threads = 3\n",
      "t.toml");
  REQUIRE(every.ok());
  CHECK(every->seed == 42);
  CHECK(every->vocab == 1000);
  CHECK(every->d_model == 96);
  CHECK(every->q_heads_per_kv == 4);
  CHECK(every->mlp_dim == 200);
  CHECK(every->rope_theta == 500000.0);
  CHECK(every->threads == 3);

  const auto fails = [](const char* text, ErrorCode code, const std::string& field, const std::string& where) {
    auto r = parse_model_config(text, "t.toml");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    CHECK(r.error().field == field);
    CHECK_THAT(r.error().reason, Catch::Contains(where));
  };
  fails("[model]\nvocab = 256\nmlp_dims = 512\n", ErrorCode::config_field, "model.mlp_dims", "t.toml:3:");
  fails("[model]\n\nvocab = 0\n", ErrorCode::config_field, "model.vocab", "t.toml:3:");
  fails("[model]\nd_model = \"wide\"\n", ErrorCode::config_field, "model.d_model", "t.toml:2:");
  fails("[model]\nd_model = 9000\n", ErrorCode::config_field, "model.d_model", "t.toml:2:");
  fails("[model]\nrope_theta = 0.5\n", ErrorCode::config_field, "model.rope_theta", "t.toml:2:");
  fails("[model]\nrope_theta = \"x\"\n", ErrorCode::config_field, "model.rope_theta", "t.toml:2:");
  fails("[model]\nseed = -1\n", ErrorCode::config_field, "model.seed", "t.toml:2:");
  fails("[model]\nthreads = 0\n", ErrorCode::config_field, "model.threads", "t.toml:2:");
  fails("model = 3\n", ErrorCode::config_field, "model", "t.toml:1:");
  fails("[model\n", ErrorCode::config_parse, "t.toml", "t.toml:1:");
  auto missing = load_model_config("/nonexistent/model.toml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
}

TEST_CASE("greedy and ranked choice: largest logit, lowest id on a tie, NaN last", "[model]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -inf, 2.0f, nan, 3.0f};
  CHECK(greedy_token(logits) == 1);
  CHECK(ranked_tokens(logits, 4) == std::vector<TokenId>{1, 2, 6, 4});
  CHECK(ranked_tokens(logits, 100) == std::vector<TokenId>{1, 2, 6, 4, 0, 3, 5});
  CHECK(ranked_tokens(logits, 0).empty());
  CHECK(greedy_token(std::vector<float>{nan, -1.0f}) == 1);
  CHECK(greedy_token(std::vector<float>(5, 0.5f)) == 0);
  CHECK(greedy_token(std::vector<float>{-0.0f, 0.0f}) == 0);  // -0 == +0: a tie
}
