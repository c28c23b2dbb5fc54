#include "services/executor/shared_prefix_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "services/common/digest.hpp"

namespace kvrt::executor {

namespace {

// A trie node: one logical block position read as (slot, rows).
struct TrieNode {
  uint32_t slot = 0, rows = 0, valid = 0;
  uint64_t position = 0;                                       // first token position of the block
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> children;  // (slot, rows) -> node
  std::vector<uint32_t> ending;                                // members whose last block this is
  uint32_t readers = 0;                                        // members whose path passes here
};

}  // namespace

Result<SharedPrefixPlan> plan_shared_prefix(std::span<const MemberBlocks> members, uint32_t block_tokens,
                                            const ExecutionContract& contract) {
  if (members.empty()) return make_error(ErrorCode::invalid_argument, "a shared batch needs a request", "members");
  if (block_tokens == 0) return make_error(ErrorCode::invalid_argument, "block size 0", "block_tokens");
  std::set<uint64_t> named;
  std::vector<TrieNode> trie(1);  // node 0: the root (no block)
  for (uint32_t m = 0; m < members.size(); ++m) {
    const MemberBlocks& b = members[m];
    const std::string field = "members[" + std::to_string(m) + "]";
    if (!named.insert(b.request.value).second)
      return make_error(ErrorCode::invalid_argument, "request " + std::to_string(b.request.value) + " is named twice",
                        field);
    if (b.slots.size() != b.valid.size())
      return make_error(ErrorCode::invalid_argument, "slots and valid rows differ in length", field);
    const uint64_t blocks = (b.context_tokens + block_tokens - 1) / block_tokens;
    if (b.context_tokens == 0 || blocks > b.slots.size())
      return make_error(ErrorCode::invalid_argument,
                        "request " + std::to_string(b.request.value) + " has " + std::to_string(b.context_tokens) +
                            " context tokens over " + std::to_string(b.slots.size()) + " blocks",
                        field);
    uint32_t node = 0;
    ++trie[0].readers;
    for (uint64_t j = 0; j < blocks; ++j) {
      const auto rows = static_cast<uint32_t>(std::min<uint64_t>(block_tokens, b.context_tokens - j * block_tokens));
      const std::pair<uint32_t, uint32_t> key{b.slots[j], rows};
      auto it = trie[node].children.find(key);
      if (it == trie[node].children.end()) {
        TrieNode child;
        child.slot = key.first;
        child.rows = rows;
        child.valid = b.valid[j];
        child.position = j * block_tokens;
        trie.push_back(std::move(child));
        it = trie[node].children.emplace(key, static_cast<uint32_t>(trie.size() - 1)).first;
      }
      node = it->second;
      ++trie[node].readers;
    }
    trie[node].ending.push_back(m);
  }

  // Depth-first: chunks open at a node whose readers differ from its
  // parent's (or whose parent branches or ends a member), and extend down
  // single-child chains with the same readers.
  SharedPrefixPlan plan;
  ExecutionSnapshot& s = plan.snapshot;
  s.contract = contract;
  CanonicalWriter tree("kvrt.executor.shared_prefix_tree.v1");
  std::vector<uint32_t> path;  // chunk indices of the walk's current path
  struct Frame {
    uint32_t node;
    size_t path_size;
  };
  std::vector<Frame> stack;
  // Visits `node` (a block) as a new chunk or as the continuation of the
  // chunk on top of `path`.
  auto emit_sequences = [&](const TrieNode& n) {
    for (uint32_t m : n.ending) {
      const MemberBlocks& b = members[m];
      s.sequences.push_back(SnapshotSequence{b.request, b.table_version, b.context_tokens, path});
      plan.member_of_sequence.push_back(m);
    }
  };
  // Children of the root, in key order, pushed in reverse so they pop in order.
  auto push_children = [&](uint32_t node) {
    const auto& children = trie[node].children;
    for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back(Frame{it->second, path.size()});
  };
  push_children(0);
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    path.resize(f.path_size);
    uint32_t node = f.node;
    SnapshotChunk chunk;
    chunk.name = "chunk " + std::to_string(s.chunks.size());
    chunk.first_position = trie[node].position;
    CanonicalWriter id("kvrt.executor.shared_prefix_chunk.v1");
    id.u64("first_position", chunk.first_position);
    // Extend down the chain while the next block has the same readers and
    // nothing ends or branches here.
    while (true) {
      const TrieNode& n = trie[node];
      chunk.runs.push_back(KvRowRun{n.slot, 0, n.rows, n.valid});
      id.u32("slot", n.slot).u32("rows", n.rows);
      if (!n.ending.empty() || n.children.size() != 1) break;
      const uint32_t next = n.children.begin()->second;
      if (trie[next].readers != n.readers) break;
      node = next;
    }
    chunk.identity = id.finish();
    tree.digest("chunk", chunk.identity).u32("readers", trie[node].readers);
    path.push_back(static_cast<uint32_t>(s.chunks.size()));
    s.chunks.push_back(std::move(chunk));
    emit_sequences(trie[node]);
    push_children(node);
  }
  for (const SnapshotSequence& q : s.sequences) tree.u64("request", q.request.value).u64("context", q.context_tokens);
  // Planned and executed inside one call over tables just read, so the
  // fence is self-consistent; the digest names every chunk and reader.
  s.tree_version = 0;
  s.tree_state_digest = tree.finish();
  KVRT_TRY(s.assign_coverage());
  for (const SnapshotChunk& c : s.chunks)
    if (c.coverage() > 1) ++plan.shared_chunks;
  for (const SnapshotSequence& q : s.sequences) {
    uint32_t shared = 0;
    for (uint32_t c : q.path) shared += s.chunks[c].coverage() > 1 ? 1 : 0;
    plan.levels = std::max(plan.levels, shared);
  }
  return plan;
}

}  // namespace kvrt::executor
