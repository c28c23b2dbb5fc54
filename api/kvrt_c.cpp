// libkvrt: the C ABI of api/kvrt.h over EngineSession (engine/
// engine_session.hpp), the same engine-facing path `kvrt worker` and `kvrt
// run`'s engines take. This file: connecting, pools, admission, rows,
// publication and statistics; kvrt_c_session_tier.cpp and
// kvrt_c_prompt_cache.cpp: the reuse beyond prefixes (0x0CC, 0x0CB). What C adds: the session keeps each admitted
// request's fence and block table, so callers name requests by id; every
// argument is checked before anything is sent, and no exception crosses
// the boundary.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/kvrt_c_session.hpp"
#include "engine/session_pools.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/pool_geometry.hpp"
#include "shm/pool_row_plan.hpp"
#include "shm/shared_pool_store.hpp"

static_assert(KVRT_FP32 == static_cast<int>(kvrt::ScalarType::fp32) &&
              KVRT_FP16 == static_cast<int>(kvrt::ScalarType::fp16) &&
              KVRT_BF16 == static_cast<int>(kvrt::ScalarType::bf16) &&
              KVRT_FP8_E4M3 == static_cast<int>(kvrt::ScalarType::fp8_e4m3) &&
              KVRT_INT8 == static_cast<int>(kvrt::ScalarType::int8));

namespace kvrt {
namespace {
// An op's status (kvrt.h): 0, a refusal that changed nothing (negative),
// or the op's error code.
int32_t code_of(const AllocatorOutcome& o) {
  if (const auto* e = std::get_if<Error>(&o)) return static_cast<int32_t>(e->code);
  const auto* r = std::get_if<AllocationReceipt>(&o);
  if (r == nullptr) return KVRT_OK;  // a release's or another op's receipt
  switch (r->outcome) {
    case AllocationOutcome::committed:
      return KVRT_OK;
    case AllocationOutcome::out_of_capacity:
      return KVRT_S_NO_ROOM;
    case AllocationOutcome::quota_exceeded:
      return KVRT_S_QUOTA_EXCEEDED;
    case AllocationOutcome::rolled_back:
      return KVRT_S_ROLLED_BACK;
  }
  return KVRT_S_ROLLED_BACK;
}

// Rows [first_row, first_row + rows) of a pool block exist, and a buffer of
// `size` bytes holds exactly them.
Status check_row_span(const kvrt_session& s, uint32_t g, uint32_t block, uint32_t first_row, uint32_t rows,
                      size_t size) {
  KVRT_TRY(s.pools->check_rows(g, block, first_row, rows));
  const uint64_t want = uint64_t{rows} * s.pools->row_bytes(g);
  if (size != want)
    return make_error(ErrorCode::invalid_argument,
                      "the buffer holds " + std::to_string(size) + " bytes; " + std::to_string(rows) + " rows are " +
                          std::to_string(want),
                      "size");
  return Status::success();
}

// The engine session's form of kvrt_admit_request[count]; the first bad
// entry is refused, naming its index.
Result<std::vector<AdmissionRequest>> admission_requests(const kvrt_admit_request* requests, size_t count) {
  std::vector<AdmissionRequest> asks;
  for (size_t i = 0; i < count; ++i) {
    const kvrt_admit_request& r = requests[i];
    const std::string at = "requests[" + std::to_string(i) + "]";
    if (r.namespace_name == nullptr || *r.namespace_name == '\0')
      return make_error(ErrorCode::invalid_argument, "a namespace name is required", at + ".namespace_name");
    if (r.tokens == nullptr || r.token_count == 0)
      return make_error(ErrorCode::invalid_argument, "a prompt of at least one token is required", at + ".tokens");
    AdmissionRequest a;
    a.namespace_name = r.namespace_name;
    a.tokens.assign(r.tokens, r.tokens + r.token_count);
    if (r.adapter_id != nullptr) a.identity.adapter_id = r.adapter_id;
    if (r.cache_salt != nullptr) a.identity.cache_salt = r.cache_salt;
    asks.push_back(std::move(a));
  }
  return asks;
}

// An allocator batch of one op kind over `count` requests: the call's own
// error, or each op's outcome.
template <class MakeOp>
Result<AllocatorBatchReceipt> per_request(kvrt_session* s, const uint64_t* requests, size_t count, MakeOp make,
                                          std::vector<kvrt_session::Live*>& targets) {
  if (count > 0 && requests == nullptr) return make_error(ErrorCode::invalid_argument, "requests is NULL", "requests");
  AllocatorBatch batch{next_trace(s), {}};
  for (size_t i = 0; i < count; ++i) {
    Result<kvrt_session::Live*> r = live_request(s, requests[i], "requests[" + std::to_string(i) + "]");
    if (!r.ok()) return r.error();
    targets.push_back(*r);
  }
  for (size_t i = 0; i < count; ++i) batch.ops.push_back(make(i, *targets[i]));
  Result<AllocatorBatchReceipt> answer = s->engine->allocator(batch);
  if (answer.ok() && answer->outcomes.size() != count)
    return make_error(ErrorCode::rpc_failed, "the allocator answered another number of ops", "allocator");
  return answer;
}

}  // namespace
}  // namespace kvrt

using namespace kvrt;

extern "C" {

uint32_t kvrt_abi_version(void) { return KVRT_ABI_VERSION; }

const char* kvrt_error_name(int32_t code) {
  if (code == KVRT_OK) return "ok";
  if (code < 0 || code > UINT16_MAX) return "unknown";
  static thread_local std::string name;
  name = std::string(to_string(static_cast<ErrorCode>(code)));
  return name.c_str();
}

int32_t kvrt_connect(const char* descriptor_path, const char* principal, const kvrt_connect_options* options,
                     kvrt_session** out, kvrt_error* error) try {
  if (out == nullptr) return bad(error, "out is NULL", "out");
  *out = nullptr;
  if (descriptor_path == nullptr || *descriptor_path == '\0')
    return bad(error, "a node descriptor path is required", "descriptor_path");
  if (principal == nullptr || *principal == '\0') return bad(error, "a principal name is required", "principal");
  if (options != nullptr && options->struct_size < sizeof(uint32_t))
    return bad(error, "options->struct_size must be sizeof(kvrt_connect_options)", "struct_size");
  Result<NodeDescriptor> node = read_node_descriptor(descriptor_path);
  if (!node.ok()) return fail(error, node.error());
  const auto has = [&](size_t end) { return options != nullptr && options->struct_size >= end; };
  Result<std::string> token = std::string();
  if (has(offsetof(kvrt_connect_options, token_hex) + sizeof(const char*)) && options->token_hex != nullptr)
    token = std::string(options->token_hex);
  else
    token = read_token_file(node->token_path(principal));
  if (!token.ok()) return fail(error, token.error());
  ClientOptions o;
  o.worker_name = "engine";
  o.channel_only = true;
  // Fields past what the caller's struct_size covers keep their defaults.
  if (has(offsetof(kvrt_connect_options, worker_name) + sizeof(const char*)) && options->worker_name != nullptr)
    o.worker_name = options->worker_name;
  if (has(offsetof(kvrt_connect_options, call_timeout_ms) + sizeof(uint32_t)) && options->call_timeout_ms != 0)
    o.timeout = std::chrono::milliseconds(options->call_timeout_ms);
  if (has(offsetof(kvrt_connect_options, middleman) + sizeof(int32_t)) && options->middleman != 0)
    o.channel_only = false;
  Result<std::unique_ptr<EngineSession>> engine = EngineSession::connect(*node, *token, o);
  if (!engine.ok()) return fail(error, engine.error());
  Result<std::unique_ptr<shm::SharedPoolStore>> pools = attach_session_pools((*engine)->client());
  if (!pools.ok()) return fail(error, pools.error());
  // The node's layout says which model layers each pool holds; it is read
  // from the path the descriptor names, as `kvrt worker` reads it.
  Result<CacheLayoutManifest> layout = load_layout_manifest(node->layout_path);
  if (!layout.ok()) return fail(error, layout.error());
  if (layout->digest() != (*engine)->session().layout_sha256)
    return fail(error,
                make_error(ErrorCode::incompatible,
                           "layout file " + node->layout_path + " changed since the node started", "layout_sha256"));
  std::vector<uint32_t> first_layer;
  for (uint32_t g = 0; g < (*pools)->group_count(); ++g) {
    const CacheGroupLayout* group = layout->group((*pools)->group(g));
    if (group == nullptr)
      return fail(error,
                  make_error(ErrorCode::incompatible,
                             "the layout has no cache group " + std::to_string((*pools)->group(g).value), "layout"));
    first_layer.push_back(group->layer_start);
  }
  auto s = std::make_unique<kvrt_session>();
  s->engine = std::move(engine).value();
  s->pools = std::move(pools).value();
  s->node = std::move(node).value();
  s->first_layer = std::move(first_layer);
  *out = s.release();
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "connect", e);
}

void kvrt_close(kvrt_session* session) {
  // The pools go before the session: the node may reuse nothing of them
  // until the session has ended anyway, but the mapping is this process's.
  if (session == nullptr) return;
  session->pools.reset();
  session->engine.reset();
  delete session;
}

uint64_t kvrt_session_id(const kvrt_session* session) {
  return session == nullptr ? 0 : session->engine->session().session.value;
}

const char* kvrt_session_principal(const kvrt_session* session) {
  return session == nullptr ? "" : session->engine->session().principal.c_str();
}

int32_t kvrt_authorize(kvrt_session* s, const char* namespace_name, uint64_t* generation, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (namespace_name == nullptr || *namespace_name == '\0')
    return bad(error, "a namespace name is required", "namespace_name");
  Result<NamespaceGrantReceipt> grant = s->engine->authorize(namespace_name, next_trace(s));
  if (!grant.ok()) return fail(error, grant.error());
  if (generation != nullptr) *generation = grant->generation.value;
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "authorize", e);
}

int32_t kvrt_get_geometry(const kvrt_session* s, kvrt_geometry* out, kvrt_error* error) {
  if (s == nullptr || out == nullptr) return bad(error, "session and out are required", "session");
  out->groups = s->pools->group_count();
  out->block_tokens = s->pools->block_tokens();
  out->capacity_blocks = s->pools->capacity_blocks();
  return ok(error);
}

int32_t kvrt_get_pool_view(const kvrt_session* s, uint32_t g, kvrt_pool_view* out, kvrt_error* error) try {
  if (s == nullptr || out == nullptr) return bad(error, "session and out are required", "session");
  if (g >= s->pools->group_count())
    return bad(error,
               "group index " + std::to_string(g) + " is outside the session's " +
                   std::to_string(s->pools->group_count()) + " pools",
               "group_index");
  // The caller writes rows through the view at its requests' blocks (the
  // pool is this session's to write there), whichever memory holds it.
  const shm::PoolMemory memory = s->pools->memory(g);
  const shm::PoolGeometry& geometry = memory.rows->geometry();
  const shm::PoolShape& shape = geometry.shape();
  *out = kvrt_pool_view{};
  out->cache_group = s->pools->group(g).value;
  out->row_bytes = memory.rows->row_bytes();
  out->k_row_bytes = memory.rows->k_row_bytes();
  out->layers = shape.layers;
  out->first_layer = s->first_layer.at(g);
  out->kv_heads = shape.kv_heads;
  out->head_dim = shape.head_dim;
  out->element_bytes = geometry.scalar_bytes(TensorKind::K);
  // kvrt_dtype's values are ScalarType's (checked below).
  out->dtype[0] = static_cast<int32_t>(shape.k_dtype);
  out->dtype[1] = static_cast<int32_t>(shape.v_dtype);
  // Offsets are linear in the coordinates (0x03E): each stride is the step
  // of one unit along its axis; an axis of extent 1 has none (0).
  for (const TensorKind kind : {TensorKind::K, TensorKind::V}) {
    const int t = kind == TensorKind::K ? 0 : 1;
    const shm::KvCoordinate zero{kind, 0, 0, 0, 0};
    Result<uint64_t> origin = geometry.byte_offset(PhysicalSlot{0}, zero);
    if (!origin.ok()) return fail(error, origin.error());
    out->origin[t] = *origin;
    const auto step = [&](PhysicalSlot block, shm::KvCoordinate c) -> int64_t {
      Result<uint64_t> at = geometry.byte_offset(block, c);
      return at.ok() ? static_cast<int64_t>(*at) - static_cast<int64_t>(*origin) : 0;
    };
    out->block_stride[t] = step(PhysicalSlot{1}, zero);
    out->row_stride[t] = step(PhysicalSlot{0}, shm::KvCoordinate{kind, 0, 1, 0, 0});
    out->layer_stride[t] = step(PhysicalSlot{0}, shm::KvCoordinate{kind, 1, 0, 0, 0});
    out->head_stride[t] = step(PhysicalSlot{0}, shm::KvCoordinate{kind, 0, 0, 1, 0});
    out->lane_stride[t] = step(PhysicalSlot{0}, shm::KvCoordinate{kind, 0, 0, 0, 1});
  }
  out->base = memory.base;
  out->memory = memory.device ? KVRT_MEMORY_CUDA : KVRT_MEMORY_HOST;
  out->device = 0;  // GPU pools live on device 0 (gpu/cuda_pool_store.hpp)
  for (const PoolAttachment& p : s->engine->session().pools)
    if (p.group == s->pools->group(g)) out->bytes = p.segment_bytes;
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "pool_view", e);
}

int32_t kvrt_write_rows(kvrt_session* s, uint32_t g, uint32_t block, uint32_t first_row, uint32_t rows,
                        const void* bytes, size_t size, kvrt_error* error) {
  if (s == nullptr || (bytes == nullptr && size > 0)) return bad(error, "session and bytes are required", "bytes");
  if (Status in = check_row_span(*s, g, block, first_row, rows, size); !in.ok()) return fail(error, in.error());
  s->pools->write_rows(g, block, first_row, rows, std::span<const uint8_t>(static_cast<const uint8_t*>(bytes), size));
  return ok(error);
}

int32_t kvrt_read_rows(const kvrt_session* s, uint32_t g, uint32_t block, uint32_t first_row, uint32_t rows, void* out,
                       size_t size, kvrt_error* error) {
  if (s == nullptr || (out == nullptr && size > 0)) return bad(error, "session and out are required", "out");
  if (Status in = check_row_span(*s, g, block, first_row, rows, size); !in.ok()) return fail(error, in.error());
  s->pools->read_rows(g, block, first_row, rows, std::span<uint8_t>(static_cast<uint8_t*>(out), size));
  return ok(error);
}

int32_t kvrt_admit(kvrt_session* s, const kvrt_admit_request* requests, size_t count, int32_t reuse,
                   kvrt_admission* out, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (count > 0 && (requests == nullptr || out == nullptr)) return bad(error, "requests and out are required", "out");
  Result<std::vector<AdmissionRequest>> asks = admission_requests(requests, count);
  if (!asks.ok()) return fail(error, asks.error());
  const TraceContext reuse_trace = next_trace(s);
  Result<std::vector<Admission>> answered = s->engine->admit(*asks, reuse != 0, reuse_trace, next_trace(s));
  if (!answered.ok()) return fail(error, answered.error());
  const uint32_t groups = s->pools->group_count();
  for (size_t i = 0; i < count; ++i) {
    const Admission& a = (*answered)[i];
    kvrt_admission& o = out[i];
    o = kvrt_admission{};
    o.reuse_rejection = a.rejection ? static_cast<int32_t>(a.rejection->reason) : -1;
    if (a.hit_withdrawn()) {
      o.status = KVRT_HIT_WITHDRAWN;
      fill(&o.error, *a.allocation_error);
      continue;
    }
    if (a.allocation_error) {
      o.status = KVRT_FAILED;
      fill(&o.error, *a.allocation_error);
      continue;
    }
    if (!a.admitted()) {
      o.status = a.allocation->outcome == AllocationOutcome::rolled_back ? KVRT_ROLLED_BACK : KVRT_NO_ROOM;
      continue;
    }
    kvrt_session::Live live;
    live.fence = a.fence();
    live.identity = (*asks)[i].identity;
    live.table.resize(groups);
    apply_entries(s, live, a.allocation->published_entries);
    o.status = KVRT_ADMITTED;
    o.request = live.fence.request.value;
    o.hit_tokens = a.hit_tokens();
    o.reuse_attempt = a.reuse_attempt() ? a.reuse_attempt()->value : 0;
    if (o.reuse_attempt != 0) s->open_attempts.insert(o.reuse_attempt);
    o.blocks = static_cast<uint32_t>(live.table.empty() ? 0 : live.table.front().size());
    s->live[o.request] = std::move(live);
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "admit", e);
}

int32_t kvrt_lookup(kvrt_session* s, const kvrt_admit_request* requests, size_t count, uint32_t* hit_tokens,
                    int32_t* statuses, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (count > 0 && (requests == nullptr || hit_tokens == nullptr))
    return bad(error, "requests and hit_tokens are required", "hit_tokens");
  Result<std::vector<AdmissionRequest>> asks = admission_requests(requests, count);
  if (!asks.ok()) return fail(error, asks.error());
  Result<std::vector<Result<PrefixMatchReceipt>>> seen = s->engine->lookup(*asks, next_trace(s));
  if (!seen.ok()) return fail(error, seen.error());
  for (size_t i = 0; i < count; ++i) {
    const Result<PrefixMatchReceipt>& r = (*seen)[i];
    hit_tokens[i] = r.ok() ? r->runtime_hit_tokens : 0;
    if (statuses != nullptr) statuses[i] = r.ok() ? KVRT_OK : static_cast<int32_t>(r.error().code);
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "lookup", e);
}

int32_t kvrt_handoff(kvrt_session* s, const kvrt_admit_request* requests, const uint64_t* request_ids,
                     const uint32_t* free_tail_rows, size_t count, kvrt_handoff_receipt* out, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (count > 0 && (requests == nullptr || request_ids == nullptr || out == nullptr))
    return bad(error, "requests, request_ids and out are required", "out");
  Result<std::vector<AdmissionRequest>> asks = admission_requests(requests, count);
  if (!asks.ok()) return fail(error, asks.error());
  std::vector<HandoffRequest> handoffs;
  handoffs.reserve(count);
  for (size_t i = 0; i < count; ++i)
    handoffs.push_back(HandoffRequest{std::move((*asks)[i]), RequestId{request_ids[i]},
                                      free_tail_rows != nullptr ? free_tail_rows[i] : 0});
  Result<std::vector<Result<RadixSchedulerHandoffReceipt>>> answered = s->engine->handoff(handoffs, next_trace(s));
  if (!answered.ok()) return fail(error, answered.error());
  for (size_t i = 0; i < count; ++i) {
    const Result<RadixSchedulerHandoffReceipt>& r = (*answered)[i];
    kvrt_handoff_receipt& o = out[i];
    o = kvrt_handoff_receipt{};
    if (!r.ok()) {
      o.status = static_cast<int32_t>(r.error().code);
      continue;
    }
    // The lease's serial: node lease ids carry an owner bit past int64,
    // which bindings with signed integers (NumPy's default) cannot hold.
    o.lease = r->lock_lease_id.value == 0 ? 0 : OwnerLeaseId::of(r->lock_lease_id).serial();
    o.hit_tokens = r->match.runtime_hit_tokens;
    o.suffix_begin = r->suffix_interval.begin;
    o.suffix_end = r->suffix_interval.end;
    o.new_physical_blocks = r->new_physical_blocks;
    o.new_useful_kv_bytes = r->new_useful_kv_bytes;
    o.new_physical_capacity_bytes = r->new_physical_capacity_bytes;
    o.tree_version = r->tree_version.value;
    if (o.lease != 0) s->handoffs[o.lease] = *r;
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "handoff", e);
}

int32_t kvrt_dispose_handoffs(kvrt_session* s, const uint64_t* leases, const int32_t* dispositions, size_t count,
                              int32_t* statuses, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (count > 0 && (leases == nullptr || dispositions == nullptr))
    return bad(error, "leases and dispositions are required", "leases");
  for (size_t i = 0; i < count; ++i)
    if (dispositions[i] != KVRT_HANDOFF_ADMIT && dispositions[i] != KVRT_HANDOFF_RELEASE)
      return bad(error, "disposition " + std::to_string(dispositions[i]) + " is neither admit (0) nor release (1)",
                 "dispositions");
  // Leases this session holds no receipt of are answered here, typed; the
  // rest go to the node in one message.
  std::vector<PrefixHandoffDispositionOp> ops;
  std::vector<size_t> sent;
  std::vector<int32_t> codes(count, KVRT_OK);
  for (size_t i = 0; i < count; ++i) {
    const auto it = s->handoffs.find(leases[i]);
    if (it == s->handoffs.end()) {
      codes[i] = static_cast<int32_t>(ErrorCode::unknown_lease);
      continue;
    }
    ops.push_back(PrefixHandoffDispositionOp{
        it->second, dispositions[i] == KVRT_HANDOFF_ADMIT ? HandoffDisposition::admit : HandoffDisposition::release});
    sent.push_back(i);
  }
  Result<std::vector<Result<HandoffDispositionReceipt>>> answered = s->engine->dispose_handoffs(ops, next_trace(s));
  if (!answered.ok()) return fail(error, answered.error());
  for (size_t k = 0; k < sent.size(); ++k) {
    const size_t i = sent[k];
    const Result<HandoffDispositionReceipt>& r = (*answered)[k];
    codes[i] = r.ok() ? KVRT_OK : static_cast<int32_t>(r.error().code);
    // Released, or a lock the node no longer knows (the session's end took it): forgotten.
    const bool gone =
        (r.ok() && r->disposition == HandoffDisposition::release) ||
        (!r.ok() && r.error().code == ErrorCode::unknown_lease && ops[k].disposition == HandoffDisposition::release);
    if (gone) s->handoffs.erase(leases[i]);
  }
  if (statuses != nullptr) std::copy(codes.begin(), codes.end(), statuses);
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "dispose_handoffs", e);
}

int32_t kvrt_block_table(const kvrt_session* s, uint64_t request, uint32_t g, uint32_t* blocks_out, size_t capacity,
                         size_t* count, kvrt_error* error) {
  if (s == nullptr || count == nullptr || (blocks_out == nullptr && capacity > 0))
    return bad(error, "session, count and blocks_out are required", "blocks_out");
  const auto it = s->live.find(request);
  if (it == s->live.end())
    return bad(error, "request " + std::to_string(request) + " is not an admitted request of this session", "request");
  if (g >= it->second.table.size()) return bad(error, "no group " + std::to_string(g), "group_index");
  const std::vector<uint32_t>& t = it->second.table[g];
  *count = t.size();
  std::copy_n(t.begin(), std::min(capacity, t.size()), blocks_out);
  return ok(error);
}

int32_t kvrt_commit_rows(kvrt_session* s, const uint64_t* requests, const uint32_t* valid_rows, size_t count,
                         int32_t* statuses, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (count > 0 && valid_rows == nullptr) return bad(error, "valid_rows is NULL", "valid_rows");
  std::vector<kvrt_session::Live*> targets;
  Result<AllocatorBatchReceipt> r = per_request(
      s, requests, count,
      [&](size_t i, const kvrt_session::Live& l) -> AllocatorOp {
        return CommitRowsOp{l.fence, valid_rows[i]};
      },
      targets);
  if (!r.ok()) return fail(error, r.error());
  for (size_t i = 0; i < count; ++i) {
    if (const auto* a = std::get_if<AllocationReceipt>(&r->outcomes[i]))
      targets[i]->fence.table_version = a->table_version_after;
    if (statuses != nullptr) statuses[i] = code_of(r->outcomes[i]);
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "commit_rows", e);
}

int32_t kvrt_append(kvrt_session* s, const uint64_t* requests, size_t count, uint32_t* positions, int32_t* statuses,
                    kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  std::vector<kvrt_session::Live*> targets;
  Result<AllocatorBatchReceipt> r = per_request(
      s, requests, count,
      [&](size_t, const kvrt_session::Live& l) -> AllocatorOp {
        return AppendOp{l.fence, {}, std::nullopt};
      },
      targets);
  if (!r.ok()) return fail(error, r.error());
  for (size_t i = 0; i < count; ++i) {
    const auto* a = std::get_if<AllocationReceipt>(&r->outcomes[i]);
    if (a != nullptr && a->outcome == AllocationOutcome::committed) {
      targets[i]->fence.generation = a->request_generation;
      targets[i]->fence.table_version = a->table_version_after;
      apply_entries(s, *targets[i], a->published_entries);
      if (positions != nullptr) positions[i] = a->context_tokens_after - 1;
    }
    if (statuses != nullptr) statuses[i] = code_of(r->outcomes[i]);
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "append", e);
}

int32_t kvrt_fork(kvrt_session* s, const uint64_t* parents, size_t count, uint64_t* children, int32_t* statuses,
                  kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (count > 0 && children == nullptr) return bad(error, "children is NULL", "children");
  std::vector<kvrt_session::Live*> targets;
  Result<AllocatorBatchReceipt> r = per_request(
      s, parents, count, [&](size_t, const kvrt_session::Live& l) -> AllocatorOp { return ForkOp{l.fence}; }, targets);
  if (!r.ok()) return fail(error, r.error());
  const uint32_t groups = s->pools->group_count();
  for (size_t i = 0; i < count; ++i) {
    children[i] = 0;
    const auto* a = std::get_if<AllocationReceipt>(&r->outcomes[i]);
    if (a != nullptr && a->outcome == AllocationOutcome::committed) {
      kvrt_session::Live child;
      child.fence = RequestFence{a->request_id, a->request_generation, a->table_version_after};
      child.identity = targets[i]->identity;  // a fork continues its parent's prompt
      child.table.resize(groups);
      apply_entries(s, child, a->published_entries);
      children[i] = child.fence.request.value;
      s->live[children[i]] = std::move(child);
    }
    if (statuses != nullptr) statuses[i] = code_of(r->outcomes[i]);
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "fork", e);
}

int32_t kvrt_release(kvrt_session* s, const uint64_t* requests, size_t count, int32_t reason, int32_t* statuses,
                     kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (reason != KVRT_FINISHED && reason != KVRT_CANCELLED && reason != KVRT_PREEMPTED)
    return bad(error, "reason must be KVRT_FINISHED, KVRT_CANCELLED or KVRT_PREEMPTED", "reason");
  for (size_t i = 0; i < count && requests != nullptr; ++i)
    if (s->engine->successor_pending(RequestId{requests[i]}))
      return bad(error,
                 "request " + std::to_string(requests[i]) +
                     " is named as a reuse successor that is not sent yet: kvrt_flush_reuse_ends first",
                 "requests[" + std::to_string(i) + "]");
  std::vector<kvrt_session::Live*> targets;
  Result<AllocatorBatchReceipt> r = per_request(
      s, requests, count,
      [&](size_t, const kvrt_session::Live& l) -> AllocatorOp {
        return ReleaseOp{l.fence, static_cast<ReleaseReason>(reason)};
      },
      targets);
  if (!r.ok()) return fail(error, r.error());
  for (size_t i = 0; i < count; ++i) {
    const int32_t code = code_of(r->outcomes[i]);
    if (code == KVRT_OK) s->live.erase(requests[i]);
    if (statuses != nullptr) statuses[i] = code;
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "release", e);
}

int32_t kvrt_publish(kvrt_session* s, uint64_t request, const char* namespace_name, const int32_t* tokens,
                     uint32_t token_count, uint32_t first_block, uint32_t end_block, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (namespace_name == nullptr || *namespace_name == '\0')
    return bad(error, "a namespace is required", "namespace_name");
  Result<kvrt_session::Live*> live = live_request(s, request, "request");
  if (!live.ok()) return fail(error, live.error());
  if (first_block > end_block) return bad(error, "first_block is past end_block", "first_block");
  if (tokens == nullptr || uint64_t{token_count} < uint64_t{end_block} * s->engine->block_tokens())
    return bad(error, "tokens must cover end_block full blocks", "tokens");
  PrefixPublishOp op{namespace_name,
                     RequestId{request},
                     std::vector<TokenId>(tokens, tokens + token_count),
                     first_block,
                     end_block,
                     (*live)->identity,
                     NamespaceGeneration{0},
                     0};
  Result<PrefixBatchReceipt> r = s->engine->prefix(PrefixBatch{next_trace(s), {std::move(op)}});
  if (!r.ok()) return fail(error, r.error());
  if (r->outcomes.size() != 1)
    return fail(error, make_error(ErrorCode::rpc_failed, "one publication, another answer", "prefix"));
  if (const auto* e = std::get_if<Error>(&r->outcomes[0])) return fail(error, *e);
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "publish", e);
}

int32_t kvrt_end_reuse(kvrt_session* s, uint64_t reuse_attempt, int32_t executed, uint64_t request,
                       const int32_t* tokens, uint32_t token_count, uint32_t successor_end_block,
                       kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (reuse_attempt == 0) return bad(error, "no reuse attempt (0)", "reuse_attempt");
  if (!s->open_attempts.contains(reuse_attempt))
    return fail(error, make_error(ErrorCode::reuse_attempt_closed,
                                  "reuse attempt " + std::to_string(reuse_attempt) +
                                      " is not open in this session (ended already, or never admitted here)",
                                  "reuse_attempt"));
  std::optional<ReuseSuccessor> successor;
  if (successor_end_block > 0) {
    if (executed == 0) return bad(error, "a successor needs executed work", "executed");
    Result<kvrt_session::Live*> live = live_request(s, request, "request");
    if (!live.ok()) return fail(error, live.error());
    const uint64_t rows = uint64_t{successor_end_block} * s->engine->block_tokens();
    if (tokens == nullptr || token_count < rows)
      return bad(error, "tokens must cover the successor's blocks", "tokens");
    successor = ReuseSuccessor{RequestId{request}, std::vector<TokenId>(tokens, tokens + rows), successor_end_block};
  }
  s->engine->end_reuse(ExecutionSnapshotVersion{reuse_attempt}, executed != 0, std::move(successor));
  s->open_attempts.erase(reuse_attempt);
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "end_reuse", e);
}

int32_t kvrt_flush_reuse_ends(kvrt_session* s, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  if (Status sent = s->engine->flush_reuse_ends(next_trace(s)); !sent.ok()) return fail(error, sent.error());
  const ReuseEndNotes notes = s->engine->take_reuse_end_notes();
  if (!notes.errors.empty()) return fail(error, notes.errors.front());
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "flush_reuse_ends", e);
}

int32_t kvrt_stats_json(kvrt_session* s, int32_t validate, char* out, size_t capacity, size_t* length,
                        kvrt_error* error) try {
  if (s == nullptr || length == nullptr) return bad(error, "session and length are required", "length");
  if (out == nullptr && capacity > 0) return bad(error, "out is NULL", "out");
  if (!s->stats) {
    Result<std::unique_ptr<NodeStatsReader>> reader = NodeStatsReader::connect(s->node);
    if (!reader.ok()) return fail(error, reader.error());
    s->stats = std::move(reader).value();
  }
  Result<NodeStats> stats = s->stats->read(validate != 0);
  if (!stats.ok()) {
    s->stats.reset();  // a node restarted behind the descriptor is connected again on the next read
    return fail(error, stats.error());
  }
  const std::string text = node_stats_json(*stats).dump(2);
  *length = text.size();
  if (capacity < text.size() + 1)
    return bad(
        error,
        "the statistics take " + std::to_string(text.size() + 1) + " bytes, out holds " + std::to_string(capacity),
        "capacity");
  std::memcpy(out, text.c_str(), text.size() + 1);
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "stats_json", e);
}

}  // extern "C"
