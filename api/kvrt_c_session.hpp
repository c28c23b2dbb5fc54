#pragma once
// Internal to libkvrt (api/*.cpp): the C session's state and the boundary's
// helpers every kvrt_* function shares. Not installed, not part of kvrt.h.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/kvrt.h"
#include "engine/engine_session.hpp"
#include "engine/node_stats_json.hpp"
#include "shm/shared_pool_store.hpp"

struct kvrt_session {
  std::unique_ptr<kvrt::EngineSession> engine;
  std::unique_ptr<kvrt::shm::SharedPoolStore> pools;  // shared memory or CUDA IPC imports
  struct Live {
    kvrt::RequestFence fence;
    std::vector<std::vector<uint32_t>> table;  // [group][logical block] -> pool block
    // What besides the tokens keys its K/V (adapter, cache salt, ...), as
    // admitted: a publication of its blocks is keyed by it, so blocks
    // computed with an adapter never answer a request without it (0x07B).
    kvrt::RequestIdentity identity;
  };
  std::map<uint64_t, Live> live;  // admitted requests, by id
  // Reuse attempts admitted and not yet ended: an end of any other is
  // refused here, typed, rather than sent to be refused by the node.
  std::set<uint64_t> open_attempts;
  // Handoff receipts whose lock this session holds, by lease: a caller
  // names the lease, the receipt the node issued travels back unchanged.
  std::map<uint64_t, kvrt::RadixSchedulerHandoffReceipt> handoffs;
  // Reused prompt modules whose leases this session holds, by handle.
  std::map<uint64_t, kvrt::PromptModuleUse> prompt_modules;
  uint64_t next_prompt_module = 0;
  uint64_t trace = 0;
  // Where kvrt_stats_json reads from: the node's descriptor, and the
  // statistics connection, opened on the first read.
  kvrt::NodeDescriptor node;
  std::unique_ptr<kvrt::NodeStatsReader> stats;
  // Each pool's first model layer, by group index: a group's layers are the
  // model's [first, first + layers) (0x03C), not in group order in general.
  std::vector<uint32_t> first_layer;
};

namespace kvrt {

inline void copy_text(char* out, size_t capacity, std::string_view text) {
  const size_t n = std::min(capacity - 1, text.size());
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

inline void fill(kvrt_error* out, const Error& e) {
  if (out == nullptr) return;
  out->code = static_cast<int32_t>(e.code);
  copy_text(out->name, sizeof(out->name), to_string(e.code));
  copy_text(out->field, sizeof(out->field), e.field);
  copy_text(out->reason, sizeof(out->reason), e.reason);
}

inline int32_t fail(kvrt_error* out, const Error& e) {
  fill(out, e);
  return static_cast<int32_t>(e.code);
}

inline int32_t ok(kvrt_error* out) {
  if (out != nullptr) *out = kvrt_error{};
  return KVRT_OK;
}

inline int32_t bad(kvrt_error* out, const std::string& reason, const std::string& field) {
  return fail(out, make_error(ErrorCode::invalid_argument, reason, field));
}

inline TraceContext next_trace(kvrt_session* s) { return TraceContext{0, ++s->trace, 0}; }

inline uint32_t group_index_of(const kvrt_session* s, CacheGroupId group) {
  for (uint32_t g = 0; g < s->pools->group_count(); ++g)
    if (s->pools->group(g) == group) return g;
  return 0;
}

inline void apply_entries(kvrt_session* s, kvrt_session::Live& r, const std::vector<TableEntryUpdate>& entries) {
  for (const TableEntryUpdate& e : entries) {
    std::vector<uint32_t>& t = r.table.at(group_index_of(s, e.handle.group));
    if (t.size() <= e.logical_block) t.resize(e.logical_block + 1, UINT32_MAX);
    t[e.logical_block] = e.handle.block.value;  // the node's pools use block id == slot
  }
}

// The live request `id`, or an invalid_argument naming it.
inline Result<kvrt_session::Live*> live_request(kvrt_session* s, uint64_t id, const std::string& field) {
  const auto it = s->live.find(id);
  if (it == s->live.end())
    return make_error(ErrorCode::invalid_argument,
                      "request " + std::to_string(id) + " is not an admitted request of this session", field);
  return &it->second;
}

// An exception reaching the boundary is a kvrt bug; it never crosses into C.
inline int32_t caught(kvrt_error* out, const char* call, const std::exception& e) {
  return fail(out, make_error(ErrorCode::invariant_violated, std::string(call) + ": " + e.what(), call));
}

// The request's table reaches row end - 1 in every group (end > 0), or
// invalid_argument naming `field`: checked before rows are moved, so a
// refused call writes nothing.
inline Status table_holds_rows(const kvrt_session& s, const kvrt_session::Live& r, uint64_t end,
                               const std::string& field) {
  const uint32_t P = s.pools->block_tokens();
  for (uint32_t g = 0; g < s.pools->group_count(); ++g) {
    const uint64_t j = (end - 1) / P;
    if (j >= r.table[g].size() || r.table[g][j] == UINT32_MAX)
      return make_error(
          ErrorCode::invalid_argument,
          "the request's table does not reach row " + std::to_string(end - 1) + " of group " + std::to_string(g),
          field);
  }
  return Status::success();
}

}  // namespace kvrt
