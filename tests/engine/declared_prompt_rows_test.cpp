// [model][prompt] Prompt Cache's contract in the reference model (0x0CB):
// K/V at declared position ids decoupled from storage rows; a module
// computed alone is the same bits wherever the assembled prompt stores it
// and whatever surrounds it, and other bits at other positions; the
// recomputation of a whole assembled prompt reproduces a served one that
// reused modules computed in other prompts; with identity positions and no
// module it is plain generation.
#include "engine/model/declared_prompt_rows.hpp"

#include <random>

#include "tests/engine/model_fixture.hpp"

namespace kvrt::model::test {
namespace {

constexpr uint32_t kVocab = 256;

// The canonical rows [begin, end) of a sequence, row-major then group.
std::vector<uint8_t> rows_of(const ModelKvCache& cache, const SequenceBlocks& blocks, uint32_t begin, uint32_t end) {
  const CacheLayoutManifest& layout = cache.layout();
  const uint32_t p = layout.allocator_block_size;
  std::vector<uint8_t> all;
  for (uint32_t t = begin; t < end; ++t)
    for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
      std::vector<uint8_t> row(layout.cache_groups[g].row_bytes());
      REQUIRE(cache.read_canonical_row(g, blocks.slots[g][t / p], t % p, row).ok());
      all.insert(all.end(), row.begin(), row.end());
    }
  return all;
}

// A prompt of free text, a module, free text (the question).
std::vector<DeclaredSegmentRows> three_segments(uint32_t lead, uint32_t module, uint32_t module_at, uint32_t tail) {
  return {{0, lead, 0, false}, {lead, module, module_at, true}, {lead + module, tail, module_at + module + 5, false}};
}

}  // namespace

TEST_CASE("declared positions: a module's rows depend on its positions, not on its storage row or neighbours",
          "[model][prompt]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(3), layout);
  auto cache = make_cache(layout, 64);
  const std::vector<TokenId> module = seeded_tokens(11, 40, kVocab);

  // Alone at [100, 140), and alone at [0, 40): other bits (RoPE rotates K).
  const SequenceBlocks at_100 = blocks_for(layout, 40, 0), at_0 = blocks_for(layout, 40, 3);
  REQUIRE(compute_module_alone(model, *cache, at_100, module, 100).ok());
  REQUIRE(compute_module_alone(model, *cache, at_0, module, 0).ok());
  CHECK(rows_of(*cache, at_100, 0, 40) != rows_of(*cache, at_0, 0, 40));
  // At [0, 40) it is exactly the plain sequence (identity positions).
  const SequenceBlocks plain = blocks_for(layout, 40, 6);
  forward_rows(model, *cache, plain, module, 0);
  CHECK(rows_of(*cache, plain, 0, 40) == rows_of(*cache, at_0, 0, 40));

  // Inside two prompts with different free text before it, stored at other
  // rows: the module's rows are the same bits, the question's are not.
  const std::vector<TokenId> lead_a = seeded_tokens(12, 9, kVocab), lead_b = seeded_tokens(13, 23, kVocab);
  const std::vector<TokenId> question = seeded_tokens(14, 7, kVocab);
  std::vector<std::vector<uint8_t>> module_rows, question_rows;
  for (const auto* lead : {&lead_a, &lead_b}) {
    std::vector<TokenId> prompt = *lead;
    prompt.insert(prompt.end(), module.begin(), module.end());
    prompt.insert(prompt.end(), question.begin(), question.end());
    const uint32_t L = static_cast<uint32_t>(lead->size());
    const auto segments = three_segments(L, 40, 100, 7);
    auto replay = make_cache(layout, 16);
    SequenceBlocks blocks;
    const auto generated = generate_declared_prompt(model, *replay, prompt, segments, 0, prompt.size() + 3, &blocks);
    REQUIRE(generated.ok());
    module_rows.push_back(rows_of(*replay, blocks, L, L + 40));
    question_rows.push_back(rows_of(*replay, blocks, L + 40, L + 47));
  }
  CHECK(module_rows[0] == module_rows[1]);
  CHECK(module_rows[0] == rows_of(*cache, at_100, 0, 40));
  CHECK(question_rows[0] != question_rows[1]);
}

TEST_CASE("declared positions: identity positions and one free-text segment are plain generation", "[model][prompt]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(4), layout);
  const std::vector<TokenId> prompt = seeded_tokens(21, 37, kVocab);
  auto a = make_cache(layout, 16), b = make_cache(layout, 16);
  SequenceBlocks ba;
  const std::vector<DeclaredSegmentRows> one{{0, 37, 0, false}};
  const auto declared = generate_declared_prompt(model, *a, prompt, one, 1, 45, &ba);
  REQUIRE(declared.ok());
  // Plain generation: prefill, the second-best first token, then greedy.
  const SequenceBlocks bb = blocks_for(layout, 45, 2);
  std::vector<TokenId> plain = prompt;
  plain.push_back(ranked_tokens(forward_rows(model, *b, bb, plain, 0), 2).at(1));
  while (plain.size() < 45)
    plain.push_back(greedy_token(forward_rows(model, *b, bb, plain, static_cast<uint32_t>(plain.size() - 1))));
  CHECK(*declared == plain);
  CHECK(rows_of(*a, ba, 0, 44) == rows_of(*b, bb, 0, 44));
}

TEST_CASE("declared positions: malformed layouts and position ids are refused, typed", "[model][prompt]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(5), layout);
  auto cache = make_cache(layout, 16);
  const std::vector<TokenId> prompt = seeded_tokens(31, 20, kVocab);
  const auto refused = [&](std::vector<DeclaredSegmentRows> s, const std::string& field) {
    const auto r = generate_declared_prompt(model, *cache, prompt, s, 0, 22);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
    CHECK(r.error().field == field);
  };
  refused({}, "segments");
  refused({{0, 10, 0, false}, {11, 10, 20, false}}, "segments[1]");  // a hole in storage
  refused({{0, 10, 50, true}, {10, 10, 20, false}}, "segments[1]");  // positions going back
  refused({{0, 10, 0, false}, {10, 10, 20, true}}, "segments[1]");   // ends with a module
  refused({{0, 10, 0, false}, {10, 9, 20, false}}, "segments");      // short of the prompt
  refused({{0, 10, 0, false}, {10, 0, 20, false}, {10, 10, 30, false}}, "segments[1]");

  const SequenceBlocks blocks = blocks_for(layout, 20, 0);
  const std::vector<uint32_t> short_positions(19), flat(20, 4);
  for (const auto& [positions, field] : {std::pair{&short_positions, std::string("chunks[0].positions")},
                                         std::pair{&flat, std::string("chunks[0].positions[1]")}}) {
    const ForwardChunk chunk{&blocks, prompt, 0, *positions};
    const auto r = model.forward(*cache, std::span(&chunk, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().field == field);
  }
}

TEST_CASE(
    "declared positions property: a served prompt with modules reused from other prompts equals its recomputation",
    "[model][prompt]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel model = make_model(seeded_config(6), layout);
  const uint32_t P = layout.allocator_block_size;
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint32_t lo, uint32_t hi) { return static_cast<uint32_t>(lo + rng() % (hi - lo + 1)); };
  for (int round = 0; round < 6; ++round) {
    // A random layout: free text, modules and gaps alternating, a question last.
    std::vector<DeclaredSegmentRows> segments;
    uint32_t row = 0, position = pick(0, 30);
    const uint32_t n = pick(1, 4);
    for (uint32_t i = 0; i < n; ++i) {
      if (rng() % 2) {
        const uint32_t rows = pick(1, 12);
        segments.push_back({row, rows, position, false});
        row += rows;
        position += rows + pick(0, 9);
      }
      const uint32_t rows = pick(1, 2 * P + 3);
      segments.push_back({row, rows, position, true});
      row += rows;
      position += rows + pick(0, 40);
    }
    const uint32_t tail = pick(1, 10);
    segments.push_back({row, tail, position, false});
    row += tail;
    const std::vector<TokenId> prompt = seeded_tokens(rng(), row, kVocab);
    const size_t total = row + pick(1, 5);

    // Served: every module computed alone in its own blocks (as another
    // prompt's worker did), copied in; free text computed in place.
    auto served = make_cache(layout, 128);
    const SequenceBlocks blocks = blocks_for(layout, static_cast<uint32_t>(total), 0);
    const std::vector<uint32_t> positions = declared_positions(segments, static_cast<uint32_t>(total - row));
    uint32_t next_slot = 40;
    std::vector<float> logits;
    for (const DeclaredSegmentRows& s : segments) {
      const std::span<const TokenId> tokens = std::span(prompt).subspan(s.row_begin, s.rows);
      if (s.module) {
        const SequenceBlocks own = blocks_for(layout, s.rows, next_slot);
        next_slot += (s.rows + P - 1) / P;
        REQUIRE(compute_module_alone(model, *served, own, tokens, s.position_begin).ok());
        REQUIRE(copy_kv_rows(*served, own, *served, blocks, 0, s.rows, s.row_begin).ok());
      } else {
        auto l = compute_free_text(model, *served, blocks, std::span(prompt).first(s.row_begin + s.rows), positions,
                                   s.row_begin);
        REQUIRE(l.ok());
        logits = *l;
      }
    }
    std::vector<TokenId> tokens = prompt;
    tokens.push_back(greedy_token(logits));
    while (tokens.size() < total) {
      const ForwardChunk step{&blocks, tokens, static_cast<uint32_t>(tokens.size() - 1),
                              std::span(positions).first(tokens.size())};
      auto next = model.forward(*served, std::span(&step, 1));
      REQUIRE(next.ok());
      tokens.push_back(greedy_token((*next)[0]));
    }
    // The recomputation of the whole prompt under the same contract.
    auto again = make_cache(layout, 64);
    SequenceBlocks replay_blocks;
    const auto replay = generate_declared_prompt(model, *again, prompt, segments, 0, total, &replay_blocks);
    REQUIRE(replay.ok());
    CHECK(*replay == tokens);
    CHECK(rows_of(*served, blocks, 0, static_cast<uint32_t>(total - 1)) ==
          rows_of(*again, replay_blocks, 0, static_cast<uint32_t>(total - 1)));
  }
}

}  // namespace kvrt::model::test
