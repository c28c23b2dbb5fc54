// [radix][blocks] The radix index over paged blocks (services/radix/
// radix_block_index.hpp): publication adopts new pages and counts the rest
// as duplicates, a match returns the first publisher's blocks page by page,
// namespaces never meet, the budget evicts least-recently-used leaves and
// returns their leases, a refused lease withdraws the adoption; and a seeded
// random trace against a reference map of every cached page prefix.
#include "services/radix/radix_block_index.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 4;  // tokens per page
constexpr uint32_t kG = 2;  // cache groups

// A stand-in allocator: every block handle and every lease is fresh.
struct FakeBlocks {
  uint32_t next_block = 1;
  uint64_t next_lease = 1;
  std::vector<std::vector<PhysicalBlockHandle>> pages(size_t n) {
    std::vector<std::vector<PhysicalBlockHandle>> out(n);
    for (auto& page : out)
      for (uint32_t g = 0; g < kG; ++g)
        page.push_back(
            PhysicalBlockHandle{PoolId{g}, CacheGroupId{g}, PhysicalBlockId{next_block++}, BlockGeneration{1}});
    return out;
  }
  std::vector<std::vector<std::optional<LeaseId>>> leases(const RadixAdoption& a, int refuse_at = -1) {
    std::vector<std::vector<std::optional<LeaseId>>> out(a.pages.size());
    int k = 0;
    for (auto& page : out)
      for (uint32_t g = 0; g < kG; ++g, ++k)
        page.push_back(k == refuse_at ? std::nullopt : std::optional(LeaseId{next_lease++}));
    return out;
  }
};

std::vector<TokenId> tokens(std::initializer_list<TokenId> pages_first_token) {
  std::vector<TokenId> t;
  for (TokenId f : pages_first_token)
    for (uint32_t o = 0; o < kP; ++o) t.push_back(f * 10 + static_cast<TokenId>(o));
  return t;
}

RadixBlockIndex make(uint32_t budget, bool partial_tails = false) {
  auto r = RadixBlockIndex::create(RadixBlockIndexConfig{kP, kG, budget, EvictionPolicy::lru, partial_tails});
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("radix blocks: publication adopts new pages, a match returns the first publisher's blocks",
          "[radix][blocks]") {
  RadixBlockIndex idx = make(100);
  FakeBlocks blocks;
  const auto a_tokens = tokens({1, 2, 3, 4, 5});
  const auto a_pages = blocks.pages(5);
  auto a = idx.adopt(7, a_tokens, a_pages);
  REQUIRE(a.ok());
  CHECK(a->pages.size() == 5);
  CHECK(a->duplicates == 0);
  REQUIRE(idx.confirm(*a, blocks.leases(*a)).empty());
  // B shares pages 1-3, then diverges: 3 duplicates, 2 adopted.
  const auto b_tokens = tokens({1, 2, 3, 8, 9});
  auto b = idx.adopt(7, b_tokens, blocks.pages(5));
  REQUIRE(b.ok());
  CHECK(b->duplicates == 3);
  CHECK(b->pages.size() == 2);
  REQUIRE(idx.confirm(*b, blocks.leases(*b)).empty());
  CHECK(idx.cached_pages() == 7);
  REQUIRE(idx.validate().ok());

  // A query sharing A's first four pages and two more tokens: four pages,
  // A's blocks, page by page.
  auto q = tokens({1, 2, 3, 4, 6});
  q.resize(q.size() - 2);
  const RadixBlockMatch m = idx.match(7, q, 1000);
  REQUIRE(m.hit_tokens == 4 * kP);
  REQUIRE(m.bundles.size() == 4);
  for (uint32_t j = 0; j < 4; ++j) {
    CHECK(m.bundles[j].logical_block == j);
    CHECK(m.bundles[j].handles == a_pages[j]);
  }
  CHECK(idx.match(7, q, 2 * kP + 1).hit_tokens == 2 * kP);  // the cap, page aligned
  CHECK(idx.match(8, q, 1000).hit_tokens == 0);             // another namespace
  REQUIRE(idx.validate().ok());
}

TEST_CASE("radix blocks: the budget evicts least-recently-used leaves and returns their leases", "[radix][blocks]") {
  RadixBlockIndex idx = make(6);
  FakeBlocks blocks;
  auto a = idx.adopt(1, tokens({1, 2, 3, 4, 5}), blocks.pages(5));
  const auto a_leases = blocks.leases(*a);
  REQUIRE(idx.confirm(*a, a_leases).empty());
  auto b = idx.adopt(1, tokens({1, 2, 3, 8, 9}), blocks.pages(5));
  REQUIRE(idx.confirm(*b, blocks.leases(*b)).empty());
  REQUIRE(idx.cached_pages() == 7);
  // A's tail (pages 4-5) is the least recently used leaf: its two pages and
  // their four leases go; the shared pages stay.
  const std::vector<LeaseId> released = idx.enforce_budget();
  REQUIRE(released.size() == 2 * kG);
  for (size_t k = 0; k < released.size(); ++k) CHECK(released[k] == *a_leases[3 + k / kG][k % kG]);
  CHECK(idx.cached_pages() == 5);
  CHECK(idx.evicted_pages() == 2);
  CHECK(idx.match(1, tokens({1, 2, 3, 4, 5}), 1000).hit_tokens == 3 * kP);
  CHECK(idx.match(1, tokens({1, 2, 3, 8, 9}), 1000).hit_tokens == 5 * kP);
  REQUIRE(idx.validate().ok());
  CHECK(idx.evict_all().size() == 5 * kG);
  CHECK(idx.cached_pages() == 0);
  REQUIRE(idx.validate().ok());
}

TEST_CASE("radix blocks: a refused lease withdraws the adoption, bad input changes nothing", "[radix][blocks]") {
  RadixBlockIndex idx = make(100);
  FakeBlocks blocks;
  auto a = idx.adopt(1, tokens({1, 2}), blocks.pages(2));
  REQUIRE(idx.confirm(*a, blocks.leases(*a)).empty());
  auto b = idx.adopt(1, tokens({1, 2, 3, 4}), blocks.pages(4));
  REQUIRE(b->pages.size() == 2);
  const auto granted_but_one = blocks.leases(*b, /*refuse_at=*/3);
  const std::vector<LeaseId> back = idx.confirm(*b, granted_but_one);
  CHECK(back.size() == 2 * kG - 1);  // the granted ones return
  CHECK(idx.cached_pages() == 2);
  CHECK(idx.match(1, tokens({1, 2, 3, 4}), 1000).hit_tokens == 2 * kP);
  REQUIRE(idx.validate().ok());

  const StateDigest before = idx.tree().state_digest();
  auto short_tokens = tokens({5, 6});
  short_tokens.pop_back();
  CHECK(idx.adopt(1, short_tokens, blocks.pages(2)).error().field == "tokens");
  auto narrow = blocks.pages(1);
  narrow[0].pop_back();
  CHECK(idx.adopt(1, tokens({5}), narrow).error().field == "pages");
  CHECK(idx.tree().state_digest() == before);
  CHECK(idx.cached_pages() == 2);
  REQUIRE(idx.validate().ok());
}

TEST_CASE("radix blocks: a random trace agrees with a map of every cached page prefix", "[radix][blocks]") {
  const uint64_t seed = 0x8AD1;
  std::mt19937_64 rng(seed);
  RadixBlockIndex idx = make(40);
  FakeBlocks blocks;
  // (namespace, tokens of pages [0, j]) -> blocks of page j, while cached.
  std::map<std::pair<uint64_t, std::vector<TokenId>>, std::vector<PhysicalBlockHandle>> cached;
  std::map<uint64_t, std::pair<uint64_t, std::vector<TokenId>>> lease_owner;  // lease -> cached key
  auto forget = [&](const std::vector<LeaseId>& released) {
    for (LeaseId l : released) {
      const auto it = lease_owner.find(l.value);
      REQUIRE(it != lease_owner.end());
      cached.erase(it->second);
      lease_owner.erase(it);
    }
  };
  auto random_sequence = [&] {
    std::vector<TokenId> pages;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int j = 0; j < n; ++j) pages.push_back(static_cast<TokenId>(1 + rng() % 3));  // few symbols: much sharing
    std::vector<TokenId> t;
    for (TokenId f : pages)
      for (uint32_t o = 0; o < kP; ++o) t.push_back(f * 10 + static_cast<TokenId>(o));
    return t;
  };
  for (int step = 0; step < 3000; ++step) {
    INFO("seed " << seed << " step " << step);
    const uint64_t ns = 1 + rng() % 2;
    const std::vector<TokenId> t = random_sequence();
    if (rng() % 60 == 0) {
      // The namespace's generation was invalidated: every page keyed by it
      // goes (nothing is locked here), the other namespace's stay.
      forget(idx.evict_extra_key(ns));
      for (const auto& [key, handles] : cached) REQUIRE(key.first != ns);
    } else if (rng() % 3 != 0) {
      const auto pages = blocks.pages(t.size() / kP);
      auto a = idx.adopt(ns, t, pages);
      REQUIRE(a.ok());
      const uint32_t first_new = a->duplicates;
      const bool refuse = rng() % 10 == 0 && !a->pages.empty();
      const auto leases = blocks.leases(*a, refuse ? 0 : -1);
      const auto back = idx.confirm(*a, leases);
      if (!refuse) {
        REQUIRE(back.empty());
        for (size_t i = 0; i < a->pages.size(); ++i) {
          const uint32_t j = first_new + static_cast<uint32_t>(i);
          const auto key = std::make_pair(ns, std::vector<TokenId>(t.begin(), t.begin() + (j + 1) * kP));
          REQUIRE(cached.find(key) == cached.end());
          cached[key] = pages[j];
          for (const auto& l : leases[i]) lease_owner[l->value] = key;
        }
      }
      forget(idx.enforce_budget());
    } else {
      const RadixBlockMatch m = idx.match(ns, t, 1000);
      uint32_t expect = 0;
      while (expect < t.size() / kP &&
             cached.count({ns, std::vector<TokenId>(t.begin(), t.begin() + (expect + 1) * kP)}) != 0)
        ++expect;
      REQUIRE(m.hit_tokens == expect * kP);
      for (uint32_t j = 0; j < expect; ++j)
        REQUIRE(m.bundles[j].handles == cached.at({ns, std::vector<TokenId>(t.begin(), t.begin() + (j + 1) * kP)}));
    }
    REQUIRE(idx.cached_pages() == cached.size());
    REQUIRE(idx.cached_pages() <= 40);
    if (step % 100 == 0) REQUIRE(idx.validate().ok());
  }
  REQUIRE(idx.validate().ok());
}

TEST_CASE("radix blocks: evicting a namespace key takes its unlocked pages only", "[radix][blocks]") {
  RadixBlockIndex idx = make(100);
  FakeBlocks blocks;
  // The same tokens in two namespaces, and a branch in the first.
  for (uint64_t ns : {1, 2}) {
    auto a = idx.adopt(ns, tokens({1, 2, 3}), blocks.pages(3));
    REQUIRE(idx.confirm(*a, blocks.leases(*a)).empty());
  }
  auto b = idx.adopt(1, tokens({1, 2, 7, 8}), blocks.pages(4));
  REQUIRE(idx.confirm(*b, blocks.leases(*b)).empty());
  REQUIRE(idx.cached_pages() == 3 + 3 + 2);
  // A request still reads pages 1-2-7 of namespace 1: its path is locked.
  const RadixBlockMatch locked = idx.match(1, tokens({1, 2, 7}), 1000);
  REQUIRE(locked.hit_tokens == 3 * kP);
  REQUIRE(idx.lock_path(locked.terminal).ok());
  const TreeVersion v0 = idx.retraction_version();
  // Page 3 of the first sequence and page 8 of the branch are unlocked
  // leaves; the shared path 1-2-7 stays while it is locked.
  CHECK(idx.evict_extra_key(1).size() == 2 * kG);
  CHECK(idx.retraction_version().value == v0.value + 1);
  CHECK(idx.cached_pages() == 3 + 3);
  CHECK(idx.match(2, tokens({1, 2, 3}), 1000).hit_tokens == 3 * kP);
  REQUIRE(idx.validate().ok());
  // Unlocked, a second call takes the rest; an unknown key evicts nothing
  // but still moves the version.
  REQUIRE(idx.unlock_path(locked.terminal).ok());
  CHECK(idx.evict_extra_key(1).size() == 3 * kG);
  CHECK(idx.cached_pages() == 3);
  CHECK(idx.match(1, tokens({1, 2, 7}), 1000).hit_tokens == 0);
  const TreeVersion v1 = idx.retraction_version();
  CHECK(idx.evict_extra_key(99).empty());
  CHECK(idx.retraction_version().value == v1.value + 1);
  REQUIRE(idx.validate().ok());
}

TEST_CASE("radix blocks: a locked path survives eviction, and only retractions move the version", "[radix][blocks]") {
  RadixBlockIndex idx = make(100);
  FakeBlocks blocks;
  auto a = idx.adopt(1, tokens({1, 2, 3, 4, 5}), blocks.pages(5));
  REQUIRE(idx.confirm(*a, blocks.leases(*a)).empty());
  const TreeVersion v0 = idx.retraction_version();
  // An insertion and a split (B diverges inside A's edge) retract nothing.
  auto b = idx.adopt(1, tokens({1, 2, 3, 8, 9}), blocks.pages(5));
  REQUIRE(idx.confirm(*b, blocks.leases(*b)).empty());
  CHECK(idx.retraction_version() == v0);

  // Lock A's whole path; evicting everything takes only B's unlocked tail.
  const RadixBlockMatch m = idx.match(1, tokens({1, 2, 3, 4, 5}), 1000);
  REQUIRE(m.hit_tokens == 5 * kP);
  REQUIRE(idx.lock_path(m.terminal).ok());
  REQUIRE(idx.validate().ok());
  CHECK(idx.evict_all().size() == 2 * kG);  // B's pages 4-5
  CHECK(idx.retraction_version().value == v0.value + 1);
  CHECK(idx.match(1, tokens({1, 2, 3, 4, 5}), 1000).hit_tokens == 5 * kP);
  CHECK(idx.cached_pages() == 5);
  // Unlocked, the path goes too; a second unlock is refused (lock underflow).
  REQUIRE(idx.unlock_path(m.terminal).ok());
  CHECK(idx.evict_all().size() == 5 * kG);
  CHECK(idx.retraction_version().value == v0.value + 2);
  CHECK_FALSE(idx.unlock_path(m.terminal).ok());
  REQUIRE(idx.validate().ok());
}

}  // namespace kvrt::test

namespace kvrt::test {

TEST_CASE("radix blocks, partial tails: a hit ends inside a page, named by its deepest matched slot",
          "[radix][blocks][partial]") {
  RadixBlockIndex idx = make(100, true);
  FakeBlocks blocks;
  // A publishes 10 tokens: pages [0, 4), [4, 8) and a 2-row tail.
  const std::vector<TokenId> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const auto a_pages = blocks.pages(3);
  auto adopted = idx.adopt(7, a, a_pages);
  REQUIRE(adopted.ok());
  CHECK(adopted->pages.size() == 3);
  CHECK(idx.page(adopted->pages[2]).rows == 2);
  REQUIRE(idx.confirm(*adopted, blocks.leases(*adopted)).empty());
  // A prompt agreeing with A's first 9 tokens hits 9: two pages shared, then
  // A's tail named for one row to copy.
  RadixBlockMatch m = idx.match(7, std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7, 8, 9, 99}, 100);
  CHECK(m.hit_tokens == 9);
  CHECK(m.tail_rows == 1);
  REQUIRE(m.bundles.size() == 3);
  CHECK(m.bundles[2].handles == a_pages[2]);
  // B diverges inside A's second page, at row 2, and publishes 8 tokens.
  const std::vector<TokenId> b{1, 2, 3, 4, 5, 6, 70, 80};
  const auto b_pages = blocks.pages(2);
  adopted = idx.adopt(7, b, b_pages);
  REQUIRE(adopted.ok());
  CHECK(adopted->duplicates == 1);  // page 0 was A's; B's page 1 is named from its row 2 on
  REQUIRE(adopted->pages.size() == 1);
  CHECK(idx.page(adopted->pages[0]).named == 2);
  REQUIRE(idx.confirm(*adopted, blocks.leases(*adopted)).empty());
  REQUIRE(idx.validate().ok());
  // A lookup along B reads B's page 1 (its rows 0-1 equal A's: the same tokens).
  m = idx.match(7, std::vector<TokenId>{1, 2, 3, 4, 5, 6, 70, 80, 1}, 100);
  CHECK(m.hit_tokens == 8);
  CHECK(m.tail_rows == 0);
  REQUIRE(m.bundles.size() == 2);
  CHECK(m.bundles[0].handles == a_pages[0]);
  CHECK(m.bundles[1].handles == b_pages[1]);
  // Ending at row 1 of page 1 (above the split) reads A's page.
  m = idx.match(7, std::vector<TokenId>{1, 2, 3, 4, 5, 6, 0}, 100);
  CHECK(m.hit_tokens == 6);
  CHECK(m.tail_rows == 2);
  CHECK(m.bundles[1].handles == a_pages[1]);
  // The cap: a hit never passes it.
  CHECK(idx.match(7, a, 5).hit_tokens == 5);
  // Bad shapes change nothing: a "tail" of a whole page or more, a page short.
  const StateDigest before = idx.tree().state_digest();
  CHECK_FALSE(idx.adopt(7, std::vector<TokenId>(9, 1), blocks.pages(2)).ok());
  CHECK_FALSE(idx.adopt(7, std::vector<TokenId>(8, 1), blocks.pages(3)).ok());
  CHECK(idx.tree().state_digest() == before);
  // Evicting everything releases every page's leases exactly once.
  const std::vector<LeaseId> released = idx.evict_all();
  CHECK(released.size() == 4 * kG);
  CHECK(idx.cached_pages() == 0);
  REQUIRE(idx.validate().ok());
}

TEST_CASE("radix blocks, partial tails: a random trace agrees with a token trie, and every hit is sound",
          "[radix][blocks][partial]") {
  for (const uint64_t seed : {uint64_t{0x7A11}, uint64_t{42}, uint64_t{20261204}}) {
    for (const uint32_t budget : {1000u, 12u}) {
      INFO("seed " << seed << " budget " << budget);
      std::mt19937_64 rng(seed);
      RadixBlockIndex idx = make(budget, true);
      FakeBlocks blocks;
      // Every handle's adopter: its tokens, so a hit can be checked row by row.
      std::map<uint32_t, std::vector<TokenId>> adopter;  // block id of group 0 -> tokens
      // Without budget eviction, the exact trie: (namespace, tokens [0, i]) ->
      // the page blocks naming position i.
      std::map<std::pair<uint64_t, std::vector<TokenId>>, std::vector<PhysicalBlockHandle>> trie;
      const bool exact = budget >= 1000;
      auto random_sequence = [&] {
        const size_t n = 1 + rng() % (5 * kP);
        std::vector<TokenId> t(n);
        for (TokenId& x : t) x = static_cast<TokenId>(1 + rng() % 3);  // few symbols: mid-page divergence
        return t;
      };
      for (int step = 0; step < 3000; ++step) {
        INFO("step " << step);
        const uint64_t ns = 1 + rng() % 2;
        const std::vector<TokenId> t = random_sequence();
        const uint64_t op = rng() % 10;
        if (op == 0 && rng() % 8 == 0) {
          (void)idx.evict_extra_key(ns);
          for (auto it = trie.begin(); it != trie.end();) it = it->first.first == ns ? trie.erase(it) : std::next(it);
        } else if (op < 6) {
          const auto pages = blocks.pages((t.size() + kP - 1) / kP);
          for (const auto& p : pages) adopter[p[0].block.value] = t;
          auto a = idx.adopt(ns, t, pages);
          REQUIRE(a.ok());
          const bool refuse = rng() % 10 == 0 && !a->pages.empty();
          (void)idx.confirm(*a, blocks.leases(*a, refuse ? 0 : -1));
          if (!refuse)
            for (size_t i = 0; i < t.size(); ++i)
              trie.emplace(std::make_pair(ns, std::vector<TokenId>(t.begin(), t.begin() + i + 1)), pages[i / kP]);
          (void)idx.enforce_budget();
        } else {
          const uint32_t cap = static_cast<uint32_t>(rng() % (t.size() + 1));
          const RadixBlockMatch m = idx.match(ns, t, cap);
          REQUIRE(m.hit_tokens <= cap);
          REQUIRE(m.tail_rows == m.hit_tokens % kP);
          REQUIRE(m.bundles.size() == (m.hit_tokens + kP - 1) / kP);
          // Sound: the page read for each position was adopted by a request
          // whose tokens equal the prompt's through the rows it serves.
          for (uint32_t j = 0; j < m.bundles.size(); ++j) {
            const uint32_t end = std::min<uint32_t>((j + 1) * kP, m.hit_tokens);
            const std::vector<TokenId>& owner = adopter.at(m.bundles[j].handles[0].block.value);
            REQUIRE(owner.size() >= end);
            REQUIRE(std::equal(t.begin(), t.begin() + end, owner.begin()));
          }
          if (exact) {
            uint32_t expect = 0;
            while (expect < cap && trie.count({ns, std::vector<TokenId>(t.begin(), t.begin() + expect + 1)}) != 0)
              ++expect;
            REQUIRE(m.hit_tokens == expect);
            for (uint32_t j = 0; j < m.bundles.size(); ++j) {
              const uint32_t end = std::min<uint32_t>((j + 1) * kP, m.hit_tokens);
              REQUIRE(m.bundles[j].handles == trie.at({ns, std::vector<TokenId>(t.begin(), t.begin() + end)}));
            }
          }
        }
        REQUIRE(idx.cached_pages() <= budget);
        if (step % 50 == 0) {
          const Status v = idx.validate();
          if (!v.ok()) FAIL(v.error().describe());
        }
      }
      const Status v = idx.validate();
      if (!v.ok()) FAIL(v.error().describe());
    }
  }
}

}  // namespace kvrt::test
