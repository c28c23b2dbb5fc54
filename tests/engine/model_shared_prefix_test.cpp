// Shared-prefix decode of the reference model (spec 0x0BC): many
// sequences over one physically shared document, decoded with
// forward_shared_prefix() and, on a second cache set up identically, with
// forward(). The two are not bitwise equal (the LSE merge rounds differently
// from the monolithic tile kernel); the bounds and their reasons are stated at
// kLogitBound / kRowBound below and in engine/model/shared_prefix_decode.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/model/kv_row_compare.hpp"
#include "services/executor/reference_attention.hpp"
#include "services/executor/scalar_convert.hpp"
#include "tests/engine/model_fixture.hpp"

using namespace kvrt;
using namespace kvrt::model;
using namespace kvrt::model::test;

namespace {

// New K/V rows: canonical_row_difference <= 2^-10, one fp16 ulp relative for
// 1 <= |b| < 2 and at most 2^-11 absolute below 1. The binary32 values the
// two paths narrow differ by about 1e-6 of the row's scale (a few units), far
// less than an fp16 ulp there, and round-to-nearest maps two values closer
// than one ulp to the same or to adjacent fp16 values.
constexpr double kRowBound = 1.0 / 1024;
// So scalars of magnitude >= 1/16 (fp16 ulp >= 2^-14 = 6.1e-5, far above that
// difference) round at most one ulp apart. A scalar far below the row's
// scale (cancellation in the K/V projection) sees the same absolute
// difference over a much smaller ulp and may land a few of its ulps away
// (seen: up to 3, all at |b| < 4e-4); kRowBound, absolute below 1, covers it.
constexpr float kOneUlpFrom = 1.0f / 16;
// Logits, relative to max |logit| of the forward() path. Measured worst: 7.1e-7
// in the decode test below, 2.2e-6 over a wider sweep (3744 sequence-steps,
// shared_prefix_decode.cpp), reached after one-ulp fp16 differences in
// earlier rows; before any row differs (first step) it is 4.4e-7, a few
// binary32 ulps from the attention merge. The bound, 2^-15 = 3.1e-5, keeps a
// 14x margin over the sweep and sits 32x below the model's own storage error
// against FP64 (2^-10, model_test.cpp): a partition error (a key read twice
// or missed, a wrong LSE weight) moves an attention row by a whole key's
// softmax weight, about 1 / T = 1e-2..1e-3 here, far above it.
constexpr double kLogitBound = 1.0 / 32768;

// A document of `document_rows` tokens (a multiple of P_a) prefilled once
// into slots every sequence's table shares, then `sequences` questions of
// first_question + 7 s rows (s = 0, 1, ...: decode rows start mid-block and
// cross block edges) in private blocks with room for `decode_steps` rows.
struct DocumentBatch {
  uint32_t document_rows = 0;
  std::vector<TokenId> document;
  std::vector<std::vector<TokenId>> tokens;  // [sequence] document + question (+ decoded rows)
  std::vector<SequenceBlocks> blocks;        // [sequence]
  uint32_t slots = 0;                        // slots the tables use [blocks]
};

DocumentBatch make_batch(const CacheLayoutManifest& layout, uint32_t vocab, uint64_t seed, uint32_t document_rows,
                         uint32_t sequences, uint32_t decode_steps, uint32_t first_question = 3) {
  const uint32_t p = layout.allocator_block_size, groups = uint32_t(layout.cache_groups.size());
  DocumentBatch b;
  b.document_rows = document_rows;
  b.document = seeded_tokens(seed, document_rows, vocab);
  const uint32_t document_blocks = document_rows / p;
  uint32_t private_blocks = 0;
  std::vector<uint32_t> question_rows;
  for (uint32_t s = 0; s < sequences; ++s) {
    question_rows.push_back(first_question + 7 * s);
    private_blocks += (question_rows[s] + decode_steps + p - 1) / p;
  }
  b.slots = document_blocks + private_blocks;
  // Group 0 numbers blocks upwards, group g > 0 downwards from the end, so
  // physical order differs per group (nothing may assume equal slots across groups).
  const auto slot = [&](uint32_t g, uint32_t i) { return g == 0 ? i : b.slots - 1 - i; };
  uint32_t next = document_blocks;
  for (uint32_t s = 0; s < sequences; ++s) {
    std::vector<TokenId> t = b.document;
    const std::vector<TokenId> q = seeded_tokens(seed * 31 + s, question_rows[s], vocab);
    t.insert(t.end(), q.begin(), q.end());
    b.tokens.push_back(t);
    SequenceBlocks blocks;
    blocks.slots.resize(groups);
    const uint32_t own = (question_rows[s] + decode_steps + p - 1) / p;
    for (uint32_t g = 0; g < groups; ++g) {
      for (uint32_t j = 0; j < document_blocks; ++j) blocks.slots[g].push_back(slot(g, j));
      for (uint32_t j = 0; j < own; ++j) blocks.slots[g].push_back(slot(g, next + j));
    }
    next += own;
    b.blocks.push_back(std::move(blocks));
  }
  return b;
}

// The document once (through sequence 0's table), then every non-empty
// question in one call; returns the logits of each sequence's last row (the
// document's for a sequence without a question).
std::vector<std::vector<float>> prefill(const ReferenceModel& model, ModelKvCache& cache, const DocumentBatch& b) {
  const std::vector<float> document = forward_rows(model, cache, b.blocks[0], b.document, 0);
  std::vector<ForwardChunk> chunks;
  for (size_t s = 0; s < b.tokens.size(); ++s)
    if (b.tokens[s].size() > b.document_rows) chunks.push_back({&b.blocks[s], b.tokens[s], b.document_rows});
  auto asked = model.forward(cache, chunks);
  REQUIRE(asked.ok());
  std::vector<std::vector<float>> logits;
  size_t next = 0;
  for (size_t s = 0; s < b.tokens.size(); ++s)
    logits.push_back(b.tokens[s].size() > b.document_rows ? (*asked)[next++] : document);
  return logits;
}

// Decode chunks: the last row of every sequence.
std::vector<ForwardChunk> decode_chunks(const DocumentBatch& b) {
  std::vector<ForwardChunk> chunks;
  for (size_t s = 0; s < b.tokens.size(); ++s)
    chunks.push_back({&b.blocks[s], b.tokens[s], uint32_t(b.tokens[s].size() - 1)});
  return chunks;
}

double max_abs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

// max |a - b| / max |b|.
double logit_difference(std::span<const float> a, std::span<const float> b) {
  double err = 0;
  for (size_t v = 0; v < b.size(); ++v) err = std::max(err, std::abs(double(a[v]) - double(b[v])));
  return err / max_abs(b);
}

// Largest distance in fp16 ulps between two rows of fp16 scalars, over the
// scalars whose reference value b has |b| >= min_magnitude: the bits mapped to
// integers in value order (negative values mirrored below zero).
uint32_t max_fp16_ulps(std::span<const uint8_t> a, std::span<const uint8_t> b, float min_magnitude) {
  const auto bits = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
  };
  const auto ordered = [](uint16_t h) { return (h & 0x8000u) != 0 ? -int32_t(h & 0x7fffu) : int32_t(h); };
  uint32_t worst = 0;
  for (size_t i = 0; i < a.size(); i += 2)
    if (std::abs(executor::fp16_to_float(bits(&b[i]))) >= min_magnitude)
      worst = std::max(worst, uint32_t(std::abs(ordered(bits(&a[i])) - ordered(bits(&b[i])))));
  return worst;
}

std::vector<uint8_t> canonical_row(const ModelKvCache& cache, uint32_t g, const SequenceBlocks& blocks, uint32_t row) {
  const uint32_t p = cache.layout().allocator_block_size;
  std::vector<uint8_t> out(cache.layout().cache_groups[g].row_bytes());
  REQUIRE(cache.read_canonical_row(g, blocks.slots[g][row / p], row % p, out).ok());
  return out;
}

}  // namespace

TEST_CASE("shared-prefix decode follows forward(): same greedy tokens, logits and rows within the bounds", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  // The ulp check below reads rows as fp16 scalars.
  for (const CacheGroupLayout& g : layout.cache_groups)
    REQUIRE((g.k_dtype == ScalarType::fp16 && g.v_dtype == ScalarType::fp16));
  // Group 0 holds model layer 0 first: its K and V (layer_local 0) of a row
  // see no attention, so they must be bitwise equal on both paths.
  const CacheGroupLayout& g0 = layout.cache_groups[0];
  REQUIRE(g0.layer_start == 0);
  const uint64_t layer0_bytes = uint64_t{g0.kv_heads_local} * g0.head_dim * scalar_bytes(g0.k_dtype);
  constexpr uint32_t kSteps = 12;
  double worst_logits = 0, worst_row = 0;
  uint32_t worst_ulps = 0;  // over every scalar, whatever its magnitude
  uint64_t rows = 0, inexact_rows = 0, steps = 0, flips = 0;
  struct Case {
    uint64_t seed;
    uint32_t document_rows, sequences, first_question;
  };
  // Documents of 96 rows (the shared chunk ends mid tile window) and 128
  // (on a window edge); 2 to 6 sequences; in the last case sequence 0 asks
  // nothing, so its first private chunk is the decode row alone.
  for (const Case c : {Case{1, 96, 2, 3}, Case{7, 128, 3, 3}, Case{20240611, 96, 6, 3}, Case{99, 128, 5, 0}}) {
    const ReferenceModel model = make_model(seeded_config(c.seed), layout);
    DocumentBatch b =
        make_batch(layout, model.config().vocab, c.seed, c.document_rows, c.sequences, kSteps, c.first_question);
    auto shared_cache = make_cache(layout, b.slots), plain_cache = make_cache(layout, b.slots);
    std::vector<std::vector<float>> plain = prefill(model, *plain_cache, b), shared = prefill(model, *shared_cache, b);
    REQUIRE(whole_cache(*shared_cache) == whole_cache(*plain_cache));
    const std::vector<uint8_t> document = canonical_rows(*plain_cache, b.blocks[0], c.document_rows);
    for (uint32_t step = 0; step < kSteps; ++step) {
      for (uint32_t s = 0; s < c.sequences; ++s, ++steps) {
        INFO("seed " << c.seed << ", sequence " << s << ", step " << step);
        // forward() is the reference path; both follow its token.
        const TokenId want = greedy_token(plain[s]), got = greedy_token(shared[s]);
        if (got != want) {
          // A near tie flipped by the bounded difference: the reference's
          // margin between the two must be within twice the bound.
          ++flips;
          CHECK(plain[s][want] - plain[s][got] <= 2 * kLogitBound * max_abs(plain[s]));
        }
        b.tokens[s].push_back(want);
      }
      const std::vector<ForwardChunk> chunks = decode_chunks(b);
      auto shared_out = model.forward_shared_prefix(*shared_cache, chunks, c.document_rows);
      auto plain_out = model.forward(*plain_cache, chunks);
      REQUIRE(shared_out.ok());
      REQUIRE(plain_out.ok());
      shared = std::move(*shared_out);
      plain = std::move(*plain_out);
      for (uint32_t s = 0; s < c.sequences; ++s) {
        INFO("seed " << c.seed << ", sequence " << s << ", step " << step);
        const double d = logit_difference(shared[s], plain[s]);
        worst_logits = std::max(worst_logits, d);
        CHECK(d <= kLogitBound);
        const uint32_t row = uint32_t(b.tokens[s].size() - 1);
        for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
          const std::vector<uint8_t> mine = canonical_row(*shared_cache, g, b.blocks[s], row);
          const std::vector<uint8_t> want = canonical_row(*plain_cache, g, b.blocks[s], row);
          auto diff = canonical_row_difference(layout, g, mine, want);
          REQUIRE(diff.ok());
          worst_row = std::max(worst_row, *diff);
          CHECK(*diff <= kRowBound);
          // At the rows' scale, one fp16 ulp at most (kRowBound's reason);
          // scalars far below it may differ by a few of their own tiny ulps.
          CHECK(max_fp16_ulps(mine, want, kOneUlpFrom) <= 1);
          worst_ulps = std::max(worst_ulps, max_fp16_ulps(mine, want, 0.0f));
          ++rows;
          inexact_rows += mine != want ? 1 : 0;
          if (g == 0) {
            CHECK(std::equal(mine.begin(), mine.begin() + layer0_bytes, want.begin()));
            CHECK(std::equal(mine.begin() + g0.k_row_bytes(), mine.begin() + g0.k_row_bytes() + layer0_bytes,
                             want.begin() + g0.k_row_bytes()));
          }
        }
      }
    }
    // Decoding never wrote into the shared document.
    CHECK(canonical_rows(*shared_cache, b.blocks[0], c.document_rows) == document);
    CHECK(canonical_rows(*plain_cache, b.blocks[0], c.document_rows) == document);
  }
  std::printf(
      "[model] shared-prefix decode vs forward(): worst logit difference %.3g of max |logit|, worst K/V row "
      "difference %.3g (%u fp16 ulps at most, any magnitude); %llu of %llu new group rows not bitwise equal; "
      "%llu greedy near-tie flips in %llu sequence-steps\n",
      worst_logits, worst_row, worst_ulps, (unsigned long long)inexact_rows, (unsigned long long)rows,
      (unsigned long long)flips, (unsigned long long)steps);
  // 0 observed; each flip is checked against its margin above, and more
  // than one in 192 steps would mean the differences are not rounding-sized.
  CHECK(flips <= 1);
}

TEST_CASE("shared-prefix decode does not depend on the thread count or on the other sequences", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel solo = make_model(seeded_config(3, 1), layout);
  const ReferenceModel threaded = make_model(seeded_config(3, 3), layout);
  DocumentBatch b = make_batch(layout, solo.config().vocab, 3, 80, 4, 1);
  auto all = make_cache(layout, b.slots), split = make_cache(layout, b.slots);
  const std::vector<std::vector<float>> first = prefill(solo, *all, b);
  prefill(solo, *split, b);
  for (uint32_t s = 0; s < 4; ++s) b.tokens[s].push_back(greedy_token(first[s]));
  const std::vector<ForwardChunk> chunks = decode_chunks(b);
  // All four sequences in one call on 3 threads ...
  auto together = threaded.forward_shared_prefix(*all, chunks, 80);
  REQUIRE(together.ok());
  // ... and two calls of two, one of them in reverse order, on 1 thread.
  const std::vector<ForwardChunk> pair_a{chunks[1], chunks[0]}, pair_b{chunks[2], chunks[3]};
  auto a = solo.forward_shared_prefix(*split, pair_a, 80);
  auto c = solo.forward_shared_prefix(*split, pair_b, 80);
  REQUIRE(a.ok());
  REQUIRE(c.ok());
  CHECK(same_bits((*together)[0], (*a)[1]));
  CHECK(same_bits((*together)[1], (*a)[0]));
  CHECK(same_bits((*together)[2], (*c)[0]));
  CHECK(same_bits((*together)[3], (*c)[1]));
  CHECK(whole_cache(*all) == whole_cache(*split));
}

TEST_CASE("SharedPrefixReads counts the shared rows once per layer and once per request per layer", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(4), layout);
  // Independently of the model: the layout's layer count (4: groups [0,3) and [3,4)).
  const uint64_t layers = layout.layer_count();
  REQUIRE(layers == 4);
  for (const uint32_t sequences : {2u, 5u}) {
    for (const uint32_t shared : {16u, 48u, 64u}) {
      INFO(sequences << " sequences, " << shared << " shared rows");
      DocumentBatch b = make_batch(layout, model.config().vocab, 40 + sequences, 64, sequences, 1);
      auto cache = make_cache(layout, b.slots);
      const std::vector<std::vector<float>> first = prefill(model, *cache, b);
      for (uint32_t s = 0; s < sequences; ++s) b.tokens[s].push_back(greedy_token(first[s]));
      // Sharing fewer rows than the tables share is allowed: the rest of the
      // document is then read as part of every private chunk.
      SharedPrefixReads reads;
      REQUIRE(model.forward_shared_prefix(*cache, decode_chunks(b), shared, &reads).ok());
      CHECK(reads.shared_rows_read_once == shared * layers);
      CHECK(reads.shared_rows_per_request == shared * layers * sequences);
    }
  }
}

TEST_CASE("forward_shared_prefix refuses bad arguments before writing any row", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(6), layout);
  // Questions of 3, 10 and 17 rows over 32 document rows: decode rows 35, 42, 49.
  DocumentBatch b = make_batch(layout, model.config().vocab, 6, 32, 3, 2);
  auto cache = make_cache(layout, b.slots + 1);  // one spare slot, never in a table
  const uint32_t spare = b.slots;
  const std::vector<std::vector<float>> first = prefill(model, *cache, b);
  for (uint32_t s = 0; s < 3; ++s) b.tokens[s].push_back(greedy_token(first[s]));
  std::vector<ForwardChunk> chunks = decode_chunks(b);
  const std::vector<uint8_t> before = whole_cache(*cache);
  const auto refuse = [&](std::span<const ForwardChunk> bad, uint32_t shared_rows, ErrorCode code,
                          const std::string& field) {
    SharedPrefixReads reads{7, 7};
    auto r = model.forward_shared_prefix(*cache, bad, shared_rows, &reads);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    CHECK(r.error().field == field);
    CHECK(reads.shared_rows_read_once == 7);  // untouched on failure
    CHECK(whole_cache(*cache) == before);
  };

  SECTION("forward()'s own checks come first") {
    std::vector<TokenId> bad_tokens = b.tokens[2];
    bad_tokens[40] = TokenId(model.config().vocab);
    chunks[2].tokens = bad_tokens;
    refuse(chunks, 32, ErrorCode::invalid_argument, "chunks[2].tokens[40]");
    chunks[2] = chunks[1];  // sequence 1's decode row twice
    refuse(chunks, 32, ErrorCode::invalid_argument, "chunks[2].blocks.slots[0][2]");
  }
  SECTION("fewer than two chunks") {
    refuse(std::span<const ForwardChunk>(), 32, ErrorCode::invalid_argument, "chunks");
    refuse(std::span<const ForwardChunk>(chunks).first(1), 32, ErrorCode::invalid_argument, "chunks");
  }
  SECTION("a chunk that is not a single decode row") {
    chunks[1].first_row -= 1;  // two rows of sequence 1
    refuse(chunks, 32, ErrorCode::invalid_argument, "chunks[1].first_row");
  }
  SECTION("shared_rows zero, not whole blocks, or past a chunk's cached rows") {
    refuse(chunks, 0, ErrorCode::invalid_argument, "shared_rows");
    refuse(chunks, 31, ErrorCode::invalid_argument, "shared_rows");
    refuse(chunks, 33, ErrorCode::invalid_argument, "shared_rows");
    // 48 is whole blocks, but sequence 0 has only 35 rows before its decode row.
    refuse(chunks, 48, ErrorCode::invalid_argument, "shared_rows");
  }
  SECTION("tables that do not share the blocks physically") {
    // Sequence 2 reads document block 1 of group 1 from another slot (the
    // same bytes would not make it shared: the slot is what is read once).
    SequenceBlocks moved = b.blocks[2];
    moved.slots[1][1] = spare;
    chunks[2].blocks = &moved;
    refuse(chunks, 32, ErrorCode::incompatible, "shared_rows");
    // Group 0 checked too; sharing only block 0 is still fine for 16 rows.
    moved = b.blocks[2];
    moved.slots[0][1] = spare;
    refuse(chunks, 32, ErrorCode::incompatible, "shared_rows");
    CHECK(model.forward_shared_prefix(*cache, chunks, 16).ok());
  }
  SECTION("a cache of another layout") {
    CacheLayoutManifest other = layout;
    other.manifest_id = "another";
    auto other_cache = make_cache(other, cache->slot_count());
    auto r = model.forward_shared_prefix(*other_cache, chunks, 32);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::incompatible);
    CHECK(r.error().field == "cache.layout");
    CHECK(whole_cache(*other_cache) == std::vector<uint8_t>(before.size(), 0));
  }
}

namespace {

// The committed rows' attention as the FP64 reference computes it, from the
// tables alone (what a node's executor answers, independently derived).
ReferenceModel::CommittedAttention reference_committed(const ModelKvCache& cache, std::span<const ForwardChunk> chunks,
                                                       uint64_t* calls) {
  return [&cache, chunks, calls](uint32_t layer, std::span<const float> queries, std::span<float> outputs,
                                 std::span<float> lse) -> Status {
    ++*calls;
    const executor::PagedKvView& view = cache.layer_view(layer);
    const CacheLayoutManifest& layout = cache.layout();
    uint32_t g = 0;
    while (!layout.cache_groups[g].contains_layer(layer)) ++g;
    const uint32_t p = layout.allocator_block_size, d = view.k.head_dim;
    const uint32_t q_heads = uint32_t(queries.size() / chunks.size() / d), group = q_heads / view.kv_heads;
    std::vector<double> q(d), out(d);
    for (size_t c = 0; c < chunks.size(); ++c) {
      std::vector<executor::KeyLocation> keys;
      for (uint32_t i = 0; i < chunks[c].first_row; ++i) keys.push_back({chunks[c].blocks->slots[g][i / p], i % p});
      for (uint32_t h = 0; h < q_heads; ++h) {
        const size_t at = (c * q_heads + h) * d;
        for (uint32_t x = 0; x < d; ++x) q[x] = queries[at + x];
        double l = 0;
        executor::reference_row(view, h / group, q.data(), keys, out.data(), &l);
        for (uint32_t x = 0; x < d; ++x) outputs[at + x] = float(out[x]);
        lse[c * q_heads + h] = float(l);
      }
    }
    return Status::success();
  };
}

}  // namespace

TEST_CASE("merged decode (committed rows attended elsewhere, the new row merged) follows forward()", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  constexpr uint32_t kSteps = 8;
  double worst_logits = 0, worst_row = 0;
  uint64_t calls = 0, flips = 0;
  for (const uint64_t seed : {5ull, 77ull}) {
    const ReferenceModel model = make_model(seeded_config(seed), layout);
    DocumentBatch b = make_batch(layout, model.config().vocab, seed, 64, 3, kSteps);
    auto merged_cache = make_cache(layout, b.slots), plain_cache = make_cache(layout, b.slots);
    std::vector<std::vector<float>> plain = prefill(model, *plain_cache, b);
    prefill(model, *merged_cache, b);
    std::vector<std::vector<float>> merged = plain;
    for (uint32_t step = 0; step < kSteps; ++step) {
      for (size_t s = 0; s < b.tokens.size(); ++s) {
        const TokenId want = greedy_token(plain[s]), got = greedy_token(merged[s]);
        if (got != want) {
          ++flips;
          CHECK(plain[s][want] - plain[s][got] <= 2 * kLogitBound * max_abs(plain[s]));
        }
        b.tokens[s].push_back(want);
      }
      const std::vector<ForwardChunk> chunks = decode_chunks(b);
      const uint64_t calls_before = calls;
      auto merged_out =
          model.forward_decode_merged(*merged_cache, chunks, reference_committed(*merged_cache, chunks, &calls));
      auto plain_out = model.forward(*plain_cache, chunks);
      REQUIRE(merged_out.ok());
      REQUIRE(plain_out.ok());
      CHECK(calls - calls_before == layout.layer_count());  // one call per layer
      merged = std::move(*merged_out);
      plain = std::move(*plain_out);
      for (size_t s = 0; s < b.tokens.size(); ++s) {
        INFO("seed " << seed << ", sequence " << s << ", step " << step);
        const double d = logit_difference(merged[s], plain[s]);
        worst_logits = std::max(worst_logits, d);
        CHECK(d <= kLogitBound);
        const uint32_t row = uint32_t(b.tokens[s].size() - 1);
        for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
          auto diff = canonical_row_difference(layout, g, canonical_row(*merged_cache, g, b.blocks[s], row),
                                               canonical_row(*plain_cache, g, b.blocks[s], row));
          REQUIRE(diff.ok());
          worst_row = std::max(worst_row, *diff);
          CHECK(*diff <= kRowBound);
        }
      }
    }
  }
  std::printf(
      "[model] merged decode vs forward(): worst logit difference %.3g, worst K/V row difference %.3g, %llu "
      "near-tie flips\n",
      worst_logits, worst_row, (unsigned long long)flips);
  CHECK(flips <= 1);
}

TEST_CASE("merged decode refuses a chunk without committed rows and stops at the attention's error", "[model]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(8), layout);
  DocumentBatch b = make_batch(layout, model.config().vocab, 8, 32, 2, 1);
  auto cache = make_cache(layout, b.slots);
  const std::vector<std::vector<float>> first = prefill(model, *cache, b);
  for (uint32_t s = 0; s < 2; ++s) b.tokens[s].push_back(greedy_token(first[s]));
  std::vector<ForwardChunk> chunks = decode_chunks(b);
  const std::vector<uint8_t> before = whole_cache(*cache);
  uint64_t calls = 0;
  SECTION("a prefill chunk, or a decode row with nothing committed before it") {
    std::vector<ForwardChunk> bad = chunks;
    bad[1].first_row -= 2;
    auto r = model.forward_decode_merged(*cache, bad, reference_committed(*cache, bad, &calls));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().field == "chunks[1].first_row");
    const std::vector<TokenId> one{b.tokens[0][0]};
    const std::vector<ForwardChunk> lone{{&b.blocks[0], one, 0}};
    r = model.forward_decode_merged(*cache, lone, reference_committed(*cache, lone, &calls));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().field == "chunks[0].first_row");
    CHECK(calls == 0);
    CHECK(whole_cache(*cache) == before);
  }
  SECTION("the committed attention's error ends the pass with it") {
    auto failing = [&](uint32_t layer, std::span<const float>, std::span<float>, std::span<float>) -> Status {
      ++calls;
      if (layer == 1) return make_error(ErrorCode::node_lost, "the node went away", "executor");
      return Status::success();
    };
    auto r = model.forward_decode_merged(*cache, chunks, failing);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::node_lost);
    CHECK(calls == 2);
  }
}

TEST_CASE("shared-prefix decode throughput against forward() (prints rows/s, asserts nothing)", "[.][model-speed]") {
  using Clock = std::chrono::steady_clock;
  const CacheLayoutManifest layout = model_layout();
  constexpr uint32_t kSequences = 8, kDocument = 768, kSteps = 32;
  for (const uint32_t threads : {1u, 2u}) {
    const ReferenceModel model = make_model(seeded_config(1, threads), layout);
    DocumentBatch b = make_batch(layout, model.config().vocab, 1, kDocument, kSequences, kSteps);
    auto shared_cache = make_cache(layout, b.slots), plain_cache = make_cache(layout, b.slots);
    std::vector<std::vector<float>> logits = prefill(model, *plain_cache, b);
    prefill(model, *shared_cache, b);
    // Both paths decode the same rows (forward()'s greedy tokens), step by
    // step, each in its own cache, so they see the same context lengths.
    double seconds[2] = {0, 0};  // forward(), forward_shared_prefix() [s]
    for (uint32_t i = 0; i < kSteps; ++i) {
      for (uint32_t s = 0; s < kSequences; ++s) b.tokens[s].push_back(greedy_token(logits[s]));
      const std::vector<ForwardChunk> chunks = decode_chunks(b);
      auto t0 = Clock::now();
      auto plain = model.forward(*plain_cache, chunks);
      seconds[0] += std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
      auto shared = model.forward_shared_prefix(*shared_cache, chunks, kDocument);
      seconds[1] += std::chrono::duration<double>(Clock::now() - t0).count();
      REQUIRE(plain.ok());
      REQUIRE(shared.ok());
      logits = std::move(*plain);
    }
    const double plain_rate = kSequences * kSteps / seconds[0], shared_rate = kSequences * kSteps / seconds[1];
    // Contexts at the last step: the document, a question of 3 + 7 s rows, kSteps decoded rows.
    std::printf(
        "[model-speed] threads %u, %u sequences over a %u-row document, %u steps, last contexts %zu..%zu "
        "[rows/s]: forward() %.0f, forward_shared_prefix() %.0f (x%.2f); document K/V rows read per step "
        "(all layers): %u vs %u\n",
        threads, kSequences, kDocument, kSteps, b.tokens.front().size(), b.tokens.back().size(), plain_rate,
        shared_rate, shared_rate / plain_rate, kDocument * layout.layer_count() * kSequences,
        kDocument * layout.layer_count());
  }
}
