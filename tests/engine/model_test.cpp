// The reference model: batch invariance proved bitwise, the same
// rows in a process-private cache and in shared-memory pools, and agreement
// with an independent FP64 transformer. Argument checks, config and
// sampling: model_errors_test.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "shm/shm_model_kv_cache.hpp"
#include "tests/engine/model_fixture.hpp"
#include "tests/engine/model_reference.hpp"

using namespace kvrt;
using namespace kvrt::model;
using namespace kvrt::model::test;

namespace {

constexpr uint64_t kSeeds[] = {1, 7, 20240611};
// Sequence lengths around P_a = 16 (blocks) and the attention tile's 64-key
// windows, so splits land mid-block, on block edges and on window edges.
constexpr uint32_t kLengths[] = {1, 15, 16, 17, 40, 64, 65, 100};

// Split points of a sequence of T tokens: all of them up to 40 tokens;
// beyond, every block and window edge +-1 and a few others.
std::vector<uint32_t> split_points(uint32_t t) {
  std::vector<uint32_t> s;
  if (t <= 40) {
    for (uint32_t i = 1; i < t; ++i) s.push_back(i);
    return s;
  }
  for (uint32_t i : {1u, 2u, 7u, 15u, 16u, 17u, 31u, 32u, 33u, 47u, 48u, 49u, 63u, 64u, 65u, 80u, 97u, t - 2, t - 1})
    if (i >= 1 && i < t && std::find(s.begin(), s.end(), i) == s.end()) s.push_back(i);
  return s;
}

}  // namespace

TEST_CASE("a sequence's K/V rows and logits do not depend on how its rows are split", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  for (uint64_t seed : kSeeds) {
    const ReferenceModel model = make_model(seeded_config(seed), layout);
    for (uint32_t t : kLengths) {
      INFO("seed " << seed << ", " << t << " tokens");
      const std::vector<TokenId> tokens = seeded_tokens(seed * 1000 + t, t, model.config().vocab);
      const std::span<const TokenId> all(tokens);
      // (a) one forward of the whole sequence.
      const SequenceBlocks blocks = blocks_for(layout, t, 0);
      auto whole_cache = make_cache(layout, 16);
      const std::vector<float> whole_logits = forward_rows(model, *whole_cache, blocks, all, 0);
      const std::vector<uint8_t> whole_rows = canonical_rows(*whole_cache, blocks, t);
      // (c) row by row, as decode steps; the logits of every prefix length.
      const SequenceBlocks decode_blocks = blocks_for(layout, t, 9);
      auto decode_cache = make_cache(layout, 16);
      std::vector<std::vector<float>> prefix_logits;
      for (uint32_t row = 0; row < t; ++row)
        prefix_logits.push_back(forward_rows(model, *decode_cache, decode_blocks, all.first(row + 1), row));
      CHECK(canonical_rows(*decode_cache, decode_blocks, t) == whole_rows);
      CHECK(same_bits(prefix_logits.back(), whole_logits));
      // (b) a prefix forward, then the suffix, split anywhere (mid-block too).
      for (uint32_t split : split_points(t)) {
        INFO("split at " << split);
        const SequenceBlocks split_blocks = blocks_for(layout, t, 3);
        auto cache = make_cache(layout, 16);
        CHECK(same_bits(forward_rows(model, *cache, split_blocks, all.first(split), 0), prefix_logits[split - 1]));
        CHECK(same_bits(forward_rows(model, *cache, split_blocks, all, split), whole_logits));
        CHECK(canonical_rows(*cache, split_blocks, t) == whole_rows);
      }
    }
  }
}

TEST_CASE("a sequence's rows are the same batched with unrelated sequences and on 3 threads", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  // (T, first_row of the batched call): whole prefills, a suffix over a
  // mid-block prefix, a decode row, and a one-block sequence.
  struct Case {
    uint32_t tokens, first_row, first_slot;
  };
  const Case cases[] = {{100, 0, 0}, {41, 23, 7}, {30, 29, 10}, {16, 0, 12}, {70, 64, 13}};
  for (uint64_t seed : kSeeds) {
    const ReferenceModel solo = make_model(seeded_config(seed, 1), layout);
    std::vector<std::vector<TokenId>> tokens;
    std::vector<SequenceBlocks> blocks;
    std::vector<std::vector<float>> solo_logits;
    std::vector<std::vector<uint8_t>> solo_rows;
    for (const Case& c : cases) {
      tokens.push_back(seeded_tokens(seed + c.tokens, c.tokens, solo.config().vocab));
      blocks.push_back(blocks_for(layout, c.tokens, c.first_slot));
      auto cache = make_cache(layout, 32);
      solo_logits.push_back(forward_rows(solo, *cache, blocks.back(), tokens.back(), 0));
      solo_rows.push_back(canonical_rows(*cache, blocks.back(), c.tokens));
    }
    for (uint32_t threads : {1u, 3u}) {
      for (bool reversed : {false, true}) {
        INFO("seed " << seed << ", " << threads << " threads, reversed " << reversed);
        const ReferenceModel model = make_model(seeded_config(seed, threads), layout);
        auto cache = make_cache(layout, 32);
        // (d) the prefixes first (batched too), then every suffix in one call.
        std::vector<ForwardChunk> prefixes, suffixes;
        for (size_t i = 0; i < std::size(cases); ++i) {
          const std::span<const TokenId> all(tokens[i]);
          if (cases[i].first_row > 0) prefixes.push_back({&blocks[i], all.first(cases[i].first_row), 0});
          suffixes.push_back({&blocks[i], all, cases[i].first_row});
        }
        if (reversed) std::reverse(suffixes.begin(), suffixes.end());
        REQUIRE(model.forward(*cache, prefixes).ok());
        auto logits = model.forward(*cache, suffixes);
        REQUIRE(logits.ok());
        for (size_t i = 0; i < std::size(cases); ++i) {
          const size_t at = reversed ? std::size(cases) - 1 - i : i;
          CHECK(same_bits((*logits)[at], solo_logits[i]));
          CHECK(canonical_rows(*cache, blocks[i], cases[i].tokens) == solo_rows[i]);
        }
      }
    }
  }
}

TEST_CASE("K/V rows depend on the whole prefix from the second layer on", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(3), layout);
  std::vector<TokenId> a = seeded_tokens(5, 24, model.config().vocab), b = a;
  b[0] = (a[0] + 1) % TokenId(model.config().vocab);
  const SequenceBlocks blocks = blocks_for(layout, 24, 0);
  auto cache_a = make_cache(layout, 4), cache_b = make_cache(layout, 4);
  forward_rows(model, *cache_a, blocks, a, 0);
  forward_rows(model, *cache_b, blocks, b, 0);
  // Row 10 of group 0 (layers 0-2), canonical order: K of layer 0, 1, 2,
  // then V; each layer part is H_kv * d_h * 2 = 64 bytes (fp16).
  std::vector<uint8_t> ra(384), rb(384);
  REQUIRE(cache_a->read_canonical_row(0, blocks.slots[0][0], 10, ra).ok());
  REQUIRE(cache_b->read_canonical_row(0, blocks.slots[0][0], 10, rb).ok());
  // Layer 0's K and V of row 10 see only token 10 and its position ...
  CHECK(std::equal(ra.begin(), ra.begin() + 64, rb.begin()));
  CHECK(std::equal(ra.begin() + 192, ra.begin() + 256, rb.begin() + 192));
  // ... layers 1 and 2 see token 0 through attention.
  CHECK_FALSE(std::equal(ra.begin() + 64, ra.begin() + 192, rb.begin() + 64));
  CHECK_FALSE(std::equal(ra.begin() + 256, ra.end(), rb.begin() + 256));
  CHECK(canonical_rows(*cache_a, blocks, 24) != canonical_rows(*cache_b, blocks, 24));
}

TEST_CASE("a process-private cache and shared-memory pools hold the same rows after the same forward", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  constexpr uint32_t kSlots = 12;
  shm::ShmPayloadStore store = make_shm_store(layout, kSlots);
  auto shared = shm::ShmModelKvCache::create(store, layout);
  REQUIRE(shared.ok());
  auto local = make_cache(layout, kSlots);
  CHECK((*shared)->slot_count() == kSlots);

  const ReferenceModel model = make_model(seeded_config(11, 2), layout);
  const std::vector<TokenId> a = seeded_tokens(1, 45, model.config().vocab),
                             b = seeded_tokens(2, 23, model.config().vocab);
  const SequenceBlocks blocks_a = blocks_for(layout, 45, 0), blocks_b = blocks_for(layout, 23, 5);
  const ForwardChunk chunks[] = {{&blocks_a, a, 0}, {&blocks_b, b, 0}};
  auto local_logits = model.forward(*local, chunks);
  auto shared_logits = model.forward(**shared, chunks);
  REQUIRE(local_logits.ok());
  REQUIRE(shared_logits.ok());
  for (size_t c = 0; c < 2; ++c) CHECK(same_bits((*local_logits)[c], (*shared_logits)[c]));
  CHECK(canonical_rows(*local, blocks_a, 45) == canonical_rows(**shared, blocks_a, 45));
  // Every row of every slot, untouched (zero) rows included.
  CHECK(whole_cache(*local) == whole_cache(**shared));
  // The rows are real: a decode step over the shared pool reads them back.
  std::vector<TokenId> a_next = a;
  a_next.push_back(greedy_token((*local_logits)[0]));
  CHECK(same_bits(forward_rows(model, *local, blocks_for(layout, 46, 0), a_next, 45),
                  forward_rows(model, **shared, blocks_for(layout, 46, 0), a_next, 45)));

  SECTION("read_canonical_row checks its coordinates") {
    std::vector<uint8_t> row(layout.cache_groups[1].row_bytes());
    CHECK((*shared)->read_canonical_row(2, 0, 0, row).error().code == ErrorCode::unknown_group);
    CHECK((*shared)->read_canonical_row(1, kSlots, 0, row).error().field == "slot");
    CHECK((*shared)->read_canonical_row(1, 0, 16, row).error().field == "row");
    CHECK((*shared)->read_canonical_row(0, 0, 0, row).error().field == "out");  // group 0 rows are 384 bytes
  }
  SECTION("a store of another layout is refused") {
    CacheLayoutManifest other = layout;
    other.manifest_id = "another";
    auto refused = shm::ShmModelKvCache::create(store, other);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::incompatible);
    CHECK(refused.error().field == "segments[0].layout_digest");
  }
}

TEST_CASE("fp32 / bf16 storage and strided axis orders keep invariance and shared-memory equality", "[model]") {
  CacheLayoutManifest layout = model_layout();
  layout.manifest_id = "small-two-group-variant";
  using A = TensorAxis;
  // Group 0: K fp32, V bf16, token rows strided by the heads.
  layout.cache_groups[0].k_dtype = ScalarType::fp32;
  layout.cache_groups[0].v_dtype = ScalarType::bf16;
  layout.cache_groups[0].axis_order = {A::layer_local, A::physical_slot, A::kv_head, A::token_offset, A::head_dim};
  // Group 1: lanes outermost (lane stride of a whole tensor slab), so rows
  // are stored and read one scalar at a time, and the shm store gathers.
  layout.cache_groups[1].axis_order = {A::head_dim, A::physical_slot, A::token_offset, A::layer_local, A::kv_head};
  REQUIRE(layout.validate().ok());

  const ReferenceModel model = make_model(seeded_config(13), layout);
  const ReferenceModel threaded = make_model(seeded_config(13, 3), layout);
  const std::vector<TokenId> a = seeded_tokens(3, 70, model.config().vocab),
                             b = seeded_tokens(4, 21, model.config().vocab);
  const SequenceBlocks blocks_a = blocks_for(layout, 70, 0), blocks_b = blocks_for(layout, 21, 6);
  auto whole = make_cache(layout, 10);
  const std::vector<float> whole_logits = forward_rows(model, *whole, blocks_a, a, 0);
  const std::vector<uint8_t> whole_rows = canonical_rows(*whole, blocks_a, 70);

  auto decode = make_cache(layout, 10);
  std::vector<float> last;
  for (uint32_t row = 0; row < 70; ++row)
    last = forward_rows(model, *decode, blocks_a, std::span(a).first(row + 1), row);
  CHECK(same_bits(last, whole_logits));
  CHECK(canonical_rows(*decode, blocks_a, 70) == whole_rows);

  shm::ShmPayloadStore store = make_shm_store(layout, 10);
  auto shared = shm::ShmModelKvCache::create(store, layout);
  REQUIRE(shared.ok());
  REQUIRE(model.forward(**shared, std::vector<ForwardChunk>{{&blocks_a, std::span(a).first(37), 0}}).ok());
  auto batched = threaded.forward(**shared, std::vector<ForwardChunk>{{&blocks_b, b, 0}, {&blocks_a, a, 37}});
  REQUIRE(batched.ok());
  CHECK(same_bits((*batched)[1], whole_logits));
  CHECK(canonical_rows(**shared, blocks_a, 70) == whole_rows);
  auto b_alone = make_cache(layout, 10);
  CHECK(same_bits((*batched)[0], forward_rows(model, *b_alone, blocks_b, b, 0)));
  CHECK(canonical_rows(**shared, blocks_b, 21) == canonical_rows(*b_alone, blocks_b, 21));
}

// Tolerance of the FP64 comparison, relative to the largest |logit|. The
// model stores K and V in fp16 (unit roundoff u = 2^-11 = 4.9e-4) while the
// reference keeps them exact; everything else the model does in binary32
// (2^-24), three orders below. The executor documents an attention output
// over fp16-stored rows within 2u of the unrounded one (attention_args.hpp);
// that error enters the residual stream once per layer and reaches the
// logits through norms and projections of gain about 1, averaged over many
// rounded scalars. Observed: at most 1.2e-4 (0.24u) over these 4 seeds x 24
// steps. The bound 2u keeps an 8x margin and is still a thousand times below
// what a wrong weight, RoPE angle, head mapping or norm produces (an O(1)
// relative change).
constexpr double kLogitTolerance = 2.0 / 2048;

TEST_CASE("logits follow an independent FP64 transformer and greedy decoding agrees", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  double worst = 0;
  uint32_t flips = 0, steps = 0;
  for (uint64_t seed : {1ull, 7ull, 99ull, 2024ull}) {
    const ModelConfig config = seeded_config(seed);
    const ReferenceModel model = make_model(config, layout);
    const Fp64Transformer reference(config, layout);
    std::vector<TokenId> seq = seeded_tokens(seed, 12, config.vocab);
    const SequenceBlocks blocks = blocks_for(layout, 12 + 24, 0);
    auto cache = make_cache(layout, 4);
    std::vector<float> logits = forward_rows(model, *cache, blocks, seq, 0);
    for (int step = 0; step < 24; ++step, ++steps) {
      INFO("seed " << seed << ", step " << step);
      const std::vector<double> ref = reference.logits(seq);
      double err = 0, scale = 0;
      for (size_t v = 0; v < ref.size(); ++v) {
        err = std::max(err, std::abs(double(logits[v]) - ref[v]));
        scale = std::max(scale, std::abs(ref[v]));
      }
      worst = std::max(worst, err / scale);
      CHECK(err <= kLogitTolerance * scale);
      const TokenId mine = greedy_token(logits);
      const TokenId theirs = TokenId(std::max_element(ref.begin(), ref.end()) - ref.begin());  // first maximum
      if (mine != theirs) {
        // A near tie: the reference's two candidates are closer than the
        // error bound, so either choice is within tolerance of correct.
        ++flips;
        CHECK(ref[theirs] - ref[mine] <= 2 * kLogitTolerance * scale);
      }
      seq.push_back(mine);  // both follow the model's tokens: one flip cannot derail the rest
      logits = forward_rows(model, *cache, blocks, seq, uint32_t(seq.size() - 1));
    }
  }
  std::printf("[model] FP64 reference: worst logit error %.3g of max |logit|, %u greedy near-tie flips in %u steps\n",
              worst, flips, steps);
  CHECK(flips <= 2);
}

TEST_CASE("reference model throughput (prints rows/s, asserts nothing)", "[.][model-speed]") {
  const CacheLayoutManifest layout = model_layout();
  using Clock = std::chrono::steady_clock;
  const auto rate = [](uint64_t rows, Clock::time_point t0) {
    return double(rows) / std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (uint32_t threads : {1u, 2u}) {
    const ReferenceModel model = make_model(seeded_config(1, threads), layout);
    constexpr uint32_t kSeqs = 16, kPrompt = 256, kDecode = 64, kBlocksPerSeq = (kPrompt + kDecode) / 16;
    auto cache = make_cache(layout, kSeqs * kBlocksPerSeq);
    std::vector<std::vector<TokenId>> seqs;
    std::vector<SequenceBlocks> blocks;
    std::vector<ForwardChunk> chunks;
    for (uint32_t s = 0; s < kSeqs; ++s) {
      seqs.push_back(seeded_tokens(s, kPrompt, model.config().vocab));
      blocks.push_back(blocks_for(layout, kPrompt + kDecode, s * kBlocksPerSeq));
    }
    for (uint32_t s = 0; s < kSeqs; ++s) chunks.push_back({&blocks[s], seqs[s], 0});
    auto t0 = Clock::now();
    auto logits = model.forward(*cache, chunks);
    REQUIRE(logits.ok());
    const double prefill = rate(kSeqs * kPrompt, t0);
    t0 = Clock::now();
    for (uint32_t step = 0; step < kDecode; ++step) {
      for (uint32_t s = 0; s < kSeqs; ++s) {
        seqs[s].push_back(greedy_token((*logits)[s]));
        chunks[s] = {&blocks[s], seqs[s], uint32_t(seqs[s].size() - 1)};
      }
      logits = model.forward(*cache, chunks);
      REQUIRE(logits.ok());
    }
    const double decode = rate(kSeqs * kDecode, t0);
    // One request at a time: a 32-token suffix over each 256-token prefix
    // (a reuse hit), then 8 decode rows, as a worker replaying the default
    // workload does.
    auto single = make_cache(layout, kSeqs * kBlocksPerSeq);
    for (uint32_t s = 0; s < kSeqs; ++s)
      forward_rows(model, *single, blocks[s], std::span<const TokenId>(seqs[s]).first(kPrompt), 0);
    t0 = Clock::now();
    for (uint32_t s = 0; s < kSeqs; ++s)
      forward_rows(model, *single, blocks[s], std::span<const TokenId>(seqs[s]).first(kPrompt + 32), kPrompt);
    const double suffix = rate(kSeqs * 32, t0);
    t0 = Clock::now();
    for (uint32_t s = 0; s < kSeqs; ++s)
      for (uint32_t r = kPrompt + 32; r < kPrompt + 40; ++r)
        forward_rows(model, *single, blocks[s], std::span<const TokenId>(seqs[s]).first(r + 1), r);
    const double decode_single = rate(kSeqs * 8, t0);
    std::printf(
        "[model-speed] threads %u [rows/s]: batched prefill 16x%u %.0f, batched decode at %u..%u %.0f; "
        "single request: 32-row suffix over %u %.0f, decode %.0f\n",
        threads, kPrompt, prefill, kPrompt, kPrompt + kDecode, decode, kPrompt, suffix, decode_single);
  }
}
