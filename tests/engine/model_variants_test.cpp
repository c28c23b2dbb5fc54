// [model][variants] The weights of a namespace generation
// (engine/model/model_variants.hpp): the base variant is the configured
// model itself, every other (model generation, adapter) pair draws its own
// weights, the same pair always the same ones, and K/V computed with one
// variant differs from another's in every row, which is what lets the run's
// replay catch a reuse across a weights update.
#include "engine/model/model_variants.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "tests/engine/model_fixture.hpp"

namespace kvrt::model::test {

TEST_CASE("model variants: the base is the configured seed, every other variant its own", "[model][variants]") {
  const uint64_t base = 41, g0 = 7;
  CHECK(variant_weights_seed(base, g0, g0, "") == base);
  std::set<uint64_t> seeds{base};
  for (uint64_t g = g0; g < g0 + 20; ++g)
    for (const char* adapter : {"", "a", "b", "lora-7"}) {
      if (g == g0 && std::string(adapter).empty()) continue;
      const uint64_t s = variant_weights_seed(base, g0, g, adapter);
      CHECK(s == variant_weights_seed(base, g0, g, adapter));  // a function of its inputs alone
      CHECK(seeds.insert(s).second);
    }
  // Another base seed moves every variant.
  CHECK(variant_weights_seed(base + 1, g0, g0 + 1, "") != variant_weights_seed(base, g0, g0 + 1, ""));
}

TEST_CASE("model variants: the same weights for the same generation, other K/V for another", "[model][variants]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel base = make_model(seeded_config(5), layout);
  ModelVariants variants(base, layout);
  const uint64_t g0 = layout.model_generation;
  CHECK(variants.get(g0, "").value() == &base);
  CHECK(variants.drawn() == 0);
  const ReferenceModel* next = variants.get(g0 + 1, "").value();
  const ReferenceModel* adapter = variants.get(g0, "lora-a").value();
  CHECK(next != &base);
  CHECK(adapter != next);
  CHECK(variants.get(g0 + 1, "").value() == next);  // kept, not drawn again
  CHECK(variants.drawn() == 2);
  CHECK(next->config().seed == variant_weights_seed(5, g0, g0 + 1, ""));

  // The rows of one prompt under each variant: a variant drawn again (a
  // second worker) computes the same bits, another variant other bits in
  // every row.
  const uint32_t tokens = 40;
  const std::vector<TokenId> prompt = seeded_tokens(3, tokens, base.config().vocab);
  const SequenceBlocks blocks = blocks_for(layout, tokens, 0);
  auto rows_of = [&](const ReferenceModel& m) {
    auto cache = make_cache(layout);
    (void)forward_rows(m, *cache, blocks, prompt, 0);
    return canonical_rows(*cache, blocks, tokens);
  };
  ModelVariants twin(base, layout);
  CHECK(rows_of(*twin.get(g0 + 1, "").value()) == rows_of(*next));
  const std::vector<uint8_t> a = rows_of(base), b = rows_of(*next), c = rows_of(*adapter);
  REQUIRE(a.size() == b.size());
  size_t at = 0;  // group by group, row by row (canonical_rows' order)
  for (size_t g = 0; g < layout.cache_groups.size(); ++g) {
    const size_t row = layout.cache_groups[g].row_bytes();
    for (uint32_t t = 0; t < tokens; ++t, at += row) {
      INFO("group " << g << " row " << t);
      CHECK(!std::equal(a.begin() + at, a.begin() + at + row, b.begin() + at));
      CHECK(!std::equal(a.begin() + at, a.begin() + at + row, c.begin() + at));
    }
  }
  CHECK(at == a.size());
}

}  // namespace kvrt::model::test

namespace kvrt::model::test {

TEST_CASE("model variants: weights nobody uses are dropped and drawn again the same", "[model][variants]") {
  const CacheLayoutManifest layout = model_layout();
  const ReferenceModel base = make_model(seeded_config(9), layout);
  ModelVariants variants(base, layout);
  const uint64_t g0 = layout.model_generation;
  const ReferenceModel* kept = variants.get(g0 + 1, "").value();
  const ReferenceModel* dropped = variants.get(g0 + 2, "").value();
  const uint64_t dropped_seed = dropped->config().seed;
  CHECK(variants.retain({kept, &base}) == 1);
  CHECK(variants.held() == 1);
  CHECK(variants.drawn() == 2);
  CHECK(variants.get(g0 + 1, "").value() == kept);  // still the same object
  CHECK(variants.get(g0, "").value() == &base);     // the base is never dropped
  const ReferenceModel* again = variants.get(g0 + 2, "").value();
  CHECK(again->config().seed == dropped_seed);
  CHECK(variants.drawn() == 3);
  CHECK(variants.retain({}) == 2);
  CHECK(variants.held() == 0);
}

}  // namespace kvrt::model::test
