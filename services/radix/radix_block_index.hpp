#pragma once
// RadixBlockIndex: the radix index owner of spec 0x08 over the allocator's
// paged blocks, as the node serves it for radix reuse.
//
// SGLang's radix cache maps token paths to slots of a token K/V pool. Here
// the K/V rows live in the allocator's blocks of P_a rows per cache group, so
// the tree runs with page size P_a (0x08A "page size >= 1": every edge is
// whole pages) and a page's slots name one CachedPage: the bundle of blocks
// (one per cache group) holding that page's rows. Slot s of row o of cached
// page e is e * P_a + o + 1.
//
// Ownership (0x08A, 0x08E): the tree holds one allocator lease per block of
// every cached page, a strong reference, so the allocator never recycles a
// cached block behind the tree's back, and the tree alone chooses victims,
// leaf first, by its eviction policy. A request that reuses a page takes its
// own allocator reference at allocate time, so evicting the page (releasing
// the tree's leases) never frees rows a running request reads. The cache
// keeps at most `budget_pages` pages; a publication beyond that evicts
// least-recently-used leaves until it fits, so the tree never holds more of
// the pools than the node gave it.
//
// The owner's two-phase publication (like the hash-chain index's tags): adopt()
// inserts the request's pages into the tree and lists the newly adopted ones;
// the node asks the allocator for their leases; confirm() records them, or
// withdraws the adoption when a lease was refused.
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "schema/prefix_types.hpp"
#include "services/common/fault_points.hpp"
#include "services/common/ids.hpp"
#include "services/common/receipt_ids.hpp"
#include "services/common/result.hpp"
#include "services/radix/radix_tree.hpp"

namespace kvrt {

// The fault point of a budget or pressure eviction, reached before each
// victim leaves the tree (named "radix.evict" on a node).
inline constexpr const char* kRadixEvictFaultPoint = "evict";

struct RadixBlockIndexConfig {
  uint32_t block_tokens = 0;  // P_a: a cached page's rows [tokens]
  uint32_t groups = 0;        // cache groups: blocks per page [blocks]
  uint32_t budget_pages = 0;  // cached pages kept at most [pages]
  EvictionPolicy eviction = EvictionPolicy::lru;
  // The immutable partial-tail policy (0x07D). Off: the tree runs with page
  // size P_a, every edge is whole pages and a hit is page aligned (SGLang's
  // paged radix cache). On: the tree runs token by token over the same
  // pages, so a publication may end with a partly filled page and a hit may
  // end inside a page. A page position's rows are then read from the page
  // named by the deepest matched slot of that position: the request that
  // adopted it computed exactly the path's tokens up to that row, so its
  // block holds the path's rows [0, row] of the page. A hit ending inside a
  // page names it last, to be copied (AllocateOp.copy_tail_rows), and a
  // page leaves the cache when no slot of the tree names it any more.
  bool partial_tails = false;
};

// A page the tree holds: its blocks and the tree's lease on each.
struct CachedPage {
  std::vector<PhysicalBlockHandle> handles;  // one per cache group
  std::vector<LeaseId> leases;               // one per cache group once confirmed
  uint32_t rows = 0;                         // the rows it was adopted with: P, or a partial tail's v [rows]
  uint32_t named = 0;                        // tree slots naming it [slots]; 0 frees it
  bool live = false;
};

struct RadixBlockMatch {
  uint32_t hit_tokens = 0;                  // page aligned unless partial tails are on [tokens]
  std::vector<MatchedBlockBundle> bundles;  // page positions [0, ceil(hit_tokens / P))
  uint32_t tail_rows = 0;                   // hit_tokens % P: rows of the last bundle to copy [rows]
  RadixNodeRef terminal;                    // the node ending at hit_tokens (root when 0)
};

// What one publication added to the tree.
struct RadixAdoption {
  std::optional<RadixNodeId> leaf;  // the new leaf holding the adopted pages
  std::vector<uint32_t> pages;      // cached-page ids adopted, each needing one lease per group
  uint32_t duplicates = 0;          // pages the tree held already [pages]
  RadixInsertUndo undo;             // what the insert changed, for a withdrawal
};

class RadixBlockIndex {
 public:
  static Result<RadixBlockIndex> create(const RadixBlockIndexConfig& config);

  // The longest cached page-aligned prefix of `tokens` under `extra_key` (the
  // namespace, 0x0CE), at most `cap_tokens` long. A hit stamps the path for
  // the eviction policy (0x08C) and may split an edge (0x08B).
  RadixBlockMatch match(uint64_t extra_key, std::span<const TokenId> tokens, uint32_t cap_tokens);
  // match()'s answer without its stamps and split (RadixTree::peek): the
  // same hit, bundles and tail; no terminal.
  RadixBlockMatch peek(uint64_t extra_key, std::span<const TokenId> tokens, uint32_t cap_tokens) const;

  // Publishes pages [0, pages.size()) of a request: tokens holds exactly
  // pages.size() * P tokens (with partial tails: or (pages.size() - 1) * P + v,
  // the last page a tail of v rows), pages[j] the request's blocks of page j.
  // Pages the tree holds already are duplicates; the rest become one new
  // leaf. Errors: invalid_argument for a token count or bundle width that
  // does not fit (the tree is unchanged).
  Result<RadixAdoption> adopt(uint64_t extra_key, std::span<const TokenId> tokens,
                              const std::vector<std::vector<PhysicalBlockHandle>>& pages);
  // The allocator's answer for adoption.pages (leases[i][g], nullopt =
  // refused). All granted and not `withdrawn`: recorded. Otherwise the
  // leases that were granted are returned to release and the adoption is
  // taken back: when nothing changed the tree since, node for node
  // (RadixTree::undo_insert: its leaf, its split of an existing edge, its
  // stamps), else its leaf leaves the tree (a split and the stamps stay).
  std::vector<LeaseId> confirm(const RadixAdoption& adoption,
                               const std::vector<std::vector<std::optional<LeaseId>>>& leases, bool withdrawn = false);
  // Evicts leaves by the policy until at most budget_pages pages remain;
  // returns the leases to release. With `faults`, the point "evict"
  // (kRadixEvictFaultPoint) may stop it before any victim: the pages evicted
  // so far are gone with their leases returned, the rest stay in order.
  std::vector<LeaseId> enforce_budget(FaultPoints* faults = nullptr);
  // Evicts at least `pages` pages (whole leaves), policy order; returns the
  // leases to release. `faults` as for enforce_budget.
  std::vector<LeaseId> evict_pages(uint32_t pages, FaultPoints* faults = nullptr);
  // Evicts every page (empties the cache); returns the leases to release.
  std::vector<LeaseId> evict_all();
  // Evicts every unlocked page under `extra_key` (a namespace generation
  // nothing can match again) and advances the retraction version even when
  // nothing was evicted: a candidate of that generation found before is
  // stale (0x0CD step 5). Returns the leases to release.
  std::vector<LeaseId> evict_extra_key(uint64_t extra_key);

  // Lock references on the path ending at `terminal` (0x08D): a locked path
  // is never evicted. Errors: the tree's (unknown node, lock underflow).
  Status lock_path(RadixNodeRef terminal);
  Status unlock_path(RadixNodeRef terminal);
  // v_tree of 0x0CD as this owner keeps it: advances with every change that
  // takes cached tokens out of the tree (an eviction, a withdrawn adoption).
  // A split or an insertion leaves every cached token where it was, on a
  // path that still reaches it, so it cannot invalidate a candidate found
  // earlier; recency stamps and lock counts do not move it either.
  TreeVersion retraction_version() const { return TreeVersion{retraction_version_}; }

  uint32_t cached_pages() const { return live_pages_; }
  bool partial_tails() const { return config_.partial_tails; }
  uint64_t evicted_pages() const { return evicted_pages_; }
  const RadixTree& tree() const { return tree_; }
  const CachedPage& page(uint32_t id) const { return pages_.at(id); }
  uint32_t block_tokens() const { return config_.block_tokens; }
  // With tracking on, the ids of the pages that left the cache since the
  // last take (an owner that announced pages learns which are gone before
  // their ids are reused).
  void track_freed_pages(bool on) { track_freed_ = on; }
  std::vector<uint32_t> take_freed_pages() { return std::exchange(freed_, {}); }

  // The tree's own laws, then: every tree slot names a live page at a row it
  // was adopted with, each live page is named by as many slots as it counts
  // (exactly P without partial tails, so live pages = tree tokens / P), the
  // named slots add up to the tree's tokens, and every live page outside a
  // pending adoption holds one lease per group.
  Status validate() const;

 private:
  RadixBlockIndex(RadixBlockIndexConfig config, RadixTree tree) : config_(config), tree_(std::move(tree)) {}
  uint32_t new_page(std::span<const PhysicalBlockHandle> handles, uint32_t rows);
  bool track_freed_ = false;
  std::vector<uint32_t> freed_;
  void free_page(uint32_t id, std::vector<LeaseId>& leases_out);
  std::vector<LeaseId> evict_tokens(uint64_t target_tokens, FaultPoints* faults);
  // The part of a prompt a lookup may match: at most cap_tokens, whole pages
  // unless partial tails are on.
  std::span<const TokenId> usable_prefix(std::span<const TokenId> tokens, uint32_t cap_tokens) const;
  // A hit of `matched` tokens as page bundles, from its matched slots.
  RadixBlockMatch bundles_of(uint32_t matched, const std::vector<TokenSlotId>& slots) const;

  RadixBlockIndexConfig config_;
  RadixTree tree_;
  std::vector<CachedPage> pages_;
  std::vector<uint32_t> free_ids_;
  uint32_t live_pages_ = 0;
  uint64_t evicted_pages_ = 0;
  uint64_t retraction_version_ = 0;
};

}  // namespace kvrt
