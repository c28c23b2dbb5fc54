#pragma once
// Brute-force reference of the prefix index for the seeded differential test:
// a plain list of stored blocks, each named by what it means (salt, adapter,
// the whole token prefix it ends, its rows) instead of by a digest, and by the
// physical block that realises it in one cache group. Every query is a linear
// scan; nothing is hashed, so agreement with PrefixIndex checks the chain,
// the table, the all-group rule, eviction bookkeeping and the four lengths.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "schema/common_types.hpp"
#include "services/prefix/block_hash.hpp"
#include "services/prefix/prefix_lengths.hpp"

namespace kvrt::test {

struct RefIdentity {
  std::string salt, lora;
  std::vector<TokenId> prefix;  // tokens [0, end of this block)
  uint32_t rows = 0;            // P for a full block, v for a tail
  bool tail = false;
  friend bool operator==(const RefIdentity&, const RefIdentity&) = default;
};

struct RefBlock {
  RefIdentity identity;
  uint32_t group = 0;
  PhysicalBlockHandle handle;
};

struct RefLookup {
  uint32_t indexed_full = 0;                 // full blocks present in every group, contiguous from block 0
  uint32_t extension = 0;                    // rows of the best child of the last matched block
  std::vector<PhysicalBlockHandle> handles;  // earliest stored block per group, bundle-major
  // Every child with the longest common prefix (ties may resolve either
  // way): its earliest stored block per group.
  std::vector<std::vector<PhysicalBlockHandle>> best_children;
};

class PrefixReference {
 public:
  PrefixReference(uint32_t block_tokens, uint32_t groups) : P_(block_tokens), G_(groups) {}

  bool present(const RefIdentity& id, uint32_t group) const { return first(id, group) != nullptr; }

  void store(const RefIdentity& id, uint32_t group, const PhysicalBlockHandle& h) {
    blocks_.push_back(RefBlock{id, group, h});
  }
  // Drops the block the allocator evicted (matched by its handle, generation included).
  void evict(const PhysicalBlockHandle& h) {
    blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(), [&](const RefBlock& b) { return b.handle == h; }),
                  blocks_.end());
  }
  void clear() { blocks_.clear(); }
  size_t size() const { return blocks_.size(); }

  RefIdentity full_identity(const std::string& salt, const std::string& lora, const std::vector<TokenId>& tokens,
                            uint32_t block) const {
    return RefIdentity{salt, lora, std::vector<TokenId>(tokens.begin(), tokens.begin() + (block + 1) * P_), P_, false};
  }

  RefLookup lookup(const std::string& salt, const std::string& lora, const std::vector<TokenId>& tokens) const {
    RefLookup out;
    const uint32_t full = static_cast<uint32_t>(tokens.size()) / P_;
    for (uint32_t j = 0; j < full; ++j) {
      const RefIdentity id = full_identity(salt, lora, tokens, j);
      std::vector<PhysicalBlockHandle> bundle;
      for (uint32_t g = 0; g < G_; ++g)
        if (const RefBlock* b = first(id, g)) bundle.push_back(b->handle);
      if (bundle.size() != G_) break;
      out.handles.insert(out.handles.end(), bundle.begin(), bundle.end());
      ++out.indexed_full;
    }
    // Children of the last matched block: stored identities that extend the
    // matched prefix by one block (full or tail), in every group.
    const size_t start = size_t{out.indexed_full} * P_;
    const size_t avail = std::min<size_t>(P_, tokens.size() - start);
    if (avail == 0) return out;
    for (const RefBlock& b : blocks_) {
      const RefIdentity& id = b.identity;
      if (id.salt != salt || id.lora != lora || id.prefix.size() != start + id.rows) continue;
      if (!std::equal(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(start), id.prefix.begin())) continue;
      uint32_t lcp = 0;
      while (lcp < id.rows && lcp < avail && id.prefix[start + lcp] == tokens[start + lcp]) ++lcp;
      if (lcp == 0 || lcp < out.extension) continue;
      std::vector<PhysicalBlockHandle> bundle;
      for (uint32_t g = 0; g < G_; ++g)
        if (const RefBlock* c = first(id, g)) bundle.push_back(c->handle);
      if (bundle.size() != G_) continue;
      if (lcp > out.extension) out.best_children.clear();
      out.extension = lcp;
      if (std::find(out.best_children.begin(), out.best_children.end(), bundle) == out.best_children.end())
        out.best_children.push_back(bundle);
    }
    return out;
  }

 private:
  const RefBlock* first(const RefIdentity& id, uint32_t group) const {
    for (const RefBlock& b : blocks_)
      if (b.group == group && b.identity == id) return &b;
    return nullptr;
  }

  uint32_t P_, G_;
  std::vector<RefBlock> blocks_;  // in publication order
};

}  // namespace kvrt::test
