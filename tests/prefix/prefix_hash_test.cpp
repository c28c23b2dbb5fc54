// The parent hash chain (0x07B) and partial-tail identity (0x07D): each
// digest equals the family's hash of the documented message bytes written out
// independently here; the SHA-extension pipeline agrees with OpenSSL EVP bit
// for bit; a change propagates to every descendant; extras land where 0x07B
// says; the digest table keeps its probe sequences under random churn.
#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <unordered_map>

#include "services/prefix/digest_table.hpp"
#include "services/prefix/hash_chain.hpp"
#include "services/prefix/sha256_compress.hpp"
#include "tests/prefix/prefix_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// The message of hash_chain.hpp, written out byte by byte.
std::vector<uint8_t> message(std::span<const TokenId> tokens, const BlockHash& parent, size_t parent_bytes,
                             const std::optional<ExtrasKey>& extras, const uint32_t* tail_rows = nullptr,
                             uint8_t policy = 0) {
  std::vector<uint8_t> m;
  for (TokenId t : tokens) {
    const auto u = static_cast<uint32_t>(t);
    for (int b = 0; b < 4; ++b) m.push_back(static_cast<uint8_t>(u >> (8 * b)));
  }
  m.insert(m.end(), parent.bytes.begin(), parent.bytes.begin() + static_cast<ptrdiff_t>(parent_bytes));
  uint8_t flags = 0;
  if (extras) {
    m.insert(m.end(), extras->digest.bytes.begin(), extras->digest.bytes.end());
    flags |= 1;
  }
  if (tail_rows != nullptr) {
    for (int b = 0; b < 4; ++b) m.push_back(static_cast<uint8_t>(*tail_rows >> (8 * b)));
    m.push_back(policy);
    flags |= 2;
  }
  m.push_back(flags);
  return m;
}

BlockHash sha_of(const std::vector<uint8_t>& m) {
  BlockHash h;
  h.bytes = sha256(std::span<const uint8_t>(m)).bytes;
  return h;
}

BlockHash xxh3_of(const std::vector<uint8_t>& m) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(m.data(), m.size()));
  BlockHash h;
  std::memcpy(h.bytes.data(), c.digest, 16);
  return h;
}

std::vector<TokenId> random_tokens(std::mt19937_64& rng, size_t n) {
  std::uniform_int_distribution<int64_t> d(INT32_MIN, INT32_MAX);
  std::vector<TokenId> t(n);
  for (auto& x : t) x = static_cast<TokenId>(d(rng));
  return t;
}

}  // namespace

TEST_CASE("each chain digest is the family hash of the documented message", "[prefix][hash]") {
  std::mt19937_64 rng(7);
  for (HashFamily family : {HashFamily::sha256, HashFamily::xxh3_bits128}) {
    for (uint32_t P : {1u, 4u, 16u, 32u, 48u}) {
      const ChainHasher h = ChainHasher::create(family, P).value();
      const size_t D = family == HashFamily::sha256 ? 32 : 16;
      const std::vector<TokenId> tokens = random_tokens(rng, 5 * P + P / 2);
      const BlockHash root = h.root("scope bytes");
      std::vector<BlockHash> chain;
      h.extend_chain(root, tokens, BlockExtrasPlan{}, chain);
      REQUIRE(chain.size() == 5);  // the partial sixth block gets no digest
      BlockHash parent = root;
      for (size_t i = 0; i < chain.size(); ++i) {
        const auto m = message(std::span(tokens).subspan(i * P, P), parent, D, std::nullopt);
        CHECK(chain[i] == (family == HashFamily::sha256 ? sha_of(m) : xxh3_of(m)));
        parent = chain[i];
      }
      if (family == HashFamily::xxh3_bits128)
        for (const auto& d : chain)
          CHECK(std::all_of(d.bytes.begin() + 16, d.bytes.end(), [](uint8_t b) { return b == 0; }));
      // With extras (an adapter on every block, a salt on block 0) the
      // message carries E_i's 32-byte key before the flags byte.
      RequestExtras extras;
      extras.lora_name = "adapter";
      extras.cache_salt = "salt";
      const BlockExtrasPlan plan(extras, P);
      std::vector<BlockHash> with_extras;
      h.extend_chain(root, tokens, plan, with_extras);
      parent = root;
      for (size_t i = 0; i < with_extras.size(); ++i) {
        const auto m = message(std::span(tokens).subspan(i * P, P), parent, D, plan.key(static_cast<uint32_t>(i)));
        CHECK(with_extras[i] == (family == HashFamily::sha256 ? sha_of(m) : xxh3_of(m)));
        parent = with_extras[i];
      }
    }
  }
}

TEST_CASE("the SHA-extension pipeline equals OpenSSL EVP on every block shape", "[prefix][hash]") {
  if (!sha256x::sha_ni_available()) SUCCEED("no SHA extensions on this CPU: the portable path is the only one");
  std::mt19937_64 rng(11);
  for (uint32_t P : {16u, 32u, 64u, 128u}) {
    const ChainHasher fast = ChainHasher::create(HashFamily::sha256, P, Sha256Path::automatic).value();
    const ChainHasher portable = ChainHasher::create(HashFamily::sha256, P, Sha256Path::portable).value();
    CHECK(fast.accelerated() == sha256x::sha_ni_available());
    CHECK_FALSE(portable.accelerated());
    for (size_t blocks : {1u, 2u, 3u, 17u}) {
      const std::vector<TokenId> tokens = random_tokens(rng, blocks * P + 3);
      const BlockHash root = portable.root("r");
      std::vector<BlockHash> a, b;
      fast.extend_chain(root, tokens, BlockExtrasPlan{}, a);
      portable.extend_chain(root, tokens, BlockExtrasPlan{}, b);
      REQUIRE(a == b);
      // Extending an existing chain continues from its last digest.
      std::vector<BlockHash> c(a.begin(), a.begin() + static_cast<ptrdiff_t>(blocks / 2));
      fast.extend_chain(root, tokens, BlockExtrasPlan{}, c);
      CHECK(c == a);
    }
  }
}

TEST_CASE("0x07B: a change inside block 2 moves h_2 and every descendant, nothing before", "[prefix][hash]") {
  PrefixRig rig;
  const std::vector<TokenId> a = iota_tokens(80);
  std::vector<TokenId> b = a;
  b[37] += 1000;  // position 37 lies in logical block 2 (P = 16)
  const auto ha = rig.chain(a), hb = rig.chain(b);
  REQUIRE(ha.size() == 5);
  CHECK(ha[0] == hb[0]);
  CHECK(ha[1] == hb[1]);
  for (size_t i = 2; i < 5; ++i) CHECK_FALSE(ha[i] == hb[i]);
}

TEST_CASE("extras: salt on block 0 only, adapter on every block, media on the blocks it covers", "[prefix][hash]") {
  PrefixRig rig;
  const std::vector<TokenId> t = iota_tokens(64);
  const auto plain = rig.chain(t);

  RequestExtras salted;
  salted.cache_salt = "s1";
  const BlockExtrasPlan sp = rig.plan(salted);
  CHECK(sp.key(0).has_value());
  CHECK_FALSE(sp.key(1).has_value());  // the salt reaches later blocks only through the chain
  const auto hs = rig.chain(t, salted);
  for (size_t i = 0; i < 4; ++i) CHECK_FALSE(hs[i] == plain[i]);

  RequestExtras lora;
  lora.lora_name = "adapter-x";
  const BlockExtrasPlan lp = rig.plan(lora);
  for (uint32_t i = 0; i < 4; ++i) CHECK(lp.key(i) == lp.key(0));  // the same adapter key on every block

  RequestExtras media;
  media.mm_features.push_back(MultimodalFeatureRef{"img-1", 20, 8});  // positions [20, 28): block 1
  const BlockExtrasPlan mp = rig.plan(media);
  CHECK_FALSE(mp.key(0).has_value());
  CHECK(mp.key(1).has_value());
  CHECK_FALSE(mp.key(2).has_value());
  const auto hm = rig.chain(t, media);
  CHECK(hm[0] == plain[0]);
  for (size_t i = 1; i < 4; ++i) CHECK_FALSE(hm[i] == plain[i]);
  // Block-relative offsets: the same feature four tokens later is another key.
  RequestExtras moved;
  moved.mm_features.push_back(MultimodalFeatureRef{"img-1", 24, 8});
  CHECK_FALSE(rig.plan(moved).key(1) == mp.key(1));

  RequestExtras embed;
  embed.prompt_embedding_digests = {sha256("rows of block 0")};
  const BlockExtrasPlan ep = rig.plan(embed);
  CHECK(ep.key(0).has_value());
  CHECK_FALSE(ep.key(1).has_value());
  RequestExtras bad;
  bad.mm_features.push_back(MultimodalFeatureRef{"", 0, 1});
  CHECK(rig.index.extras_plan(rig.scope, bad).error().field == "mm_features[0].identifier");
}

TEST_CASE("0x07D: a partial tail's identity includes valid_rows and the policy", "[prefix][hash]") {
  const ChainHasher h = ChainHasher::create(HashFamily::sha256, 16).value();
  const BlockHash parent = h.root("p");
  const std::vector<TokenId> t = iota_tokens(3);
  const BlockHash two = h.partial_tail(parent, std::span(t).first(2), 1, std::nullopt);
  const BlockHash three = h.partial_tail(parent, t, 1, std::nullopt);
  CHECK_FALSE(two == three);
  const uint32_t rows = 2;
  CHECK(two == sha_of(message(std::span(t).first(2), parent, 32, std::nullopt, &rows, 1)));
  CHECK_FALSE(two == h.partial_tail(parent, std::span(t).first(2), 0, std::nullopt));  // another policy id
}

TEST_CASE("families are separate identities", "[prefix][hash]") {
  const std::vector<TokenId> t = iota_tokens(16);
  const ChainHasher sha = ChainHasher::create(HashFamily::sha256, 16).value();
  const ChainHasher xxh = ChainHasher::create(HashFamily::xxh3_bits128, 16).value();
  CHECK_FALSE(sha.full_block(BlockHash{}, t, std::nullopt) == xxh.full_block(BlockHash{}, t, std::nullopt));
  CHECK(ChainHasher::create(HashFamily::sha256, 0).error().field == "hash_block_size");
}

TEST_CASE("digest table: random inserts and erases against std::unordered_map", "[prefix][hash]") {
  std::mt19937_64 rng(3);
  DigestTable table;
  std::unordered_map<BlockHash, std::pair<uint32_t, uint32_t>, BlockHashHasher> model;  // record, flags
  std::vector<BlockHash> keys;
  for (int i = 0; i < 600; ++i) {
    BlockHash k;
    // Few distinct home slots: long clusters exercise backward-shift deletion.
    const uint64_t low = rng() % 37;
    std::memcpy(k.bytes.data(), &low, 8);
    k.bytes[8] = static_cast<uint8_t>(i);
    k.bytes[9] = static_cast<uint8_t>(i >> 8);
    keys.push_back(k);
  }
  for (int step = 0; step < 5000; ++step) {
    const BlockHash& k = keys[rng() % keys.size()];
    if (model.count(k) != 0 && rng() % 2 == 0) {
      CHECK(table.erase(k));
      model.erase(k);
    } else if (model.count(k) == 0) {
      const uint32_t v = static_cast<uint32_t>(step);
      table.insert(k, DigestSlotValue{v, 0, {}, kNoCacheKey});
      model[k] = {v, 0};
    } else {
      // The payload moves with its key through every later backward shift.
      CHECK(table.find(k)->flags == model[k].second);
      table.find_mutable(k)->flags = static_cast<uint32_t>(step);
      model[k].second = static_cast<uint32_t>(step);
    }
    if (step % 97 == 0) {
      REQUIRE(table.probe_sequences_intact());
      REQUIRE(table.size() == model.size());
      for (const auto& key : keys)
        CHECK(table.record_of(key) == (model.count(key) != 0 ? model[key].first : DigestTable::kMissing));
    }
  }
  CHECK_FALSE(table.erase(BlockHash{}));
}
