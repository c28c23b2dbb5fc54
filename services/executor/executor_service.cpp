#include "services/executor/executor_service.hpp"

#include <algorithm>
#include <string>

#include "services/executor/chunk_attention.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/shared_prefix_plan.hpp"

namespace kvrt {

ExecutorService::ExecutorService(CacheLayoutManifest layout, std::vector<executor::PagedKvView> views,
                                 std::vector<uint64_t> base, unsigned threads)
    : layout_(std::move(layout)), views_(std::move(views)), block_id_base_(std::move(base)) {
  if (threads > 1) pool_ = std::make_unique<executor::ThreadPool>(threads);
}

Result<std::unique_ptr<ExecutorService>> ExecutorService::create(const CacheLayoutManifest& layout,
                                                                 std::vector<executor::PagedKvView> layer_views,
                                                                 std::vector<uint64_t> block_id_base, unsigned threads,
                                                                 DecodeKernel kernel,
                                                                 SharedPrefixKernel shared_kernel) {
  uint32_t layers = 0;
  for (const CacheGroupLayout& g : layout.cache_groups) layers = std::max(layers, g.layer_end);
  if (layer_views.size() != layers)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(layer_views.size()) + " layer views for " + std::to_string(layers) + " layers",
                      "layer_views");
  if (block_id_base.size() != layout.cache_groups.size())
    return make_error(ErrorCode::invalid_argument, "one block id base per cache group", "block_id_base");
  std::unique_ptr<ExecutorService> s(
      new ExecutorService(layout, std::move(layer_views), std::move(block_id_base), kernel ? 1 : threads));
  s->kernel_ = std::move(kernel);
  s->shared_kernel_ = std::move(shared_kernel);
  return s;
}

Result<uint32_t> ExecutorService::check_layer(uint32_t layer, uint32_t q_heads) const {
  if (layer >= views_.size())
    return make_error(
        ErrorCode::coordinate_out_of_range,
        "layer " + std::to_string(layer) + " of a model with " + std::to_string(views_.size()) + " layers", "layer");
  uint32_t g = 0;
  while (g < layout_.cache_groups.size() && !layout_.cache_groups[g].contains_layer(layer)) ++g;
  KVRT_TRY(executor::check_head_mapping(executor::HeadMapping{q_heads, views_[layer].kv_heads}, views_[layer].kv_heads,
                                        "q_heads"));
  return g;
}

namespace {

Status check_version(RequestId request, TableVersion asked, const BlockTableView& table) {
  if (asked.value != 0 && asked != table.fence.table_version)
    return make_error(ErrorCode::stale_table_version,
                      "request " + std::to_string(request.value) + "'s queries were computed against table version " +
                          std::to_string(asked.value) + "; it is at " + std::to_string(table.fence.table_version.value),
                      "table_version");
  return Status::success();
}

}  // namespace

Result<executor::DecodeReceipt> ExecutorService::decode_rows(uint32_t layer, uint32_t g, uint32_t q_heads,
                                                             const BlockTableView& table,
                                                             std::span<const float> queries, std::span<float> outputs,
                                                             std::span<float> lse, uint32_t kernel_block_tokens) {
  if (g >= table.groups.size())
    return make_error(ErrorCode::invalid_argument, "the request's table has no group for this layer", "layer");
  std::vector<uint32_t> slots, valid;
  for (const BlockTableEntry& e : table.groups[g]) {
    slots.push_back(static_cast<uint32_t>(e.handle.block.value - block_id_base_[g]));
    valid.push_back(e.valid_rows);
  }
  const executor::PagedKvView& view = views_[layer];
  const executor::DecodeRequest request{executor::KvBlockTable{slots, valid, table.context_tokens}};
  executor::AttentionOptions options;
  options.kernel_block_tokens = kernel_block_tokens;  // 0: P_k = P_a
  const executor::DecodeArgs args{
      executor::HeadMapping{q_heads, view.kv_heads}, std::span(&request, 1), queries, outputs, lse, options};
  return kernel_ ? kernel_(view, args) : executor::paged_decode(view, args, pool_.get());
}

Result<AttentionOutput> ExecutorService::decode(const DecodeAttentionOp& op, const BlockTableView& table) {
  auto fail = [&](Error e) -> Result<AttentionOutput> {
    ++errors_;
    return e;
  };
  const Result<uint32_t> g = check_layer(op.layer, op.q_heads);
  if (!g.ok()) return fail(g.error());
  if (Status st = check_version(op.request, op.table_version, table); !st.ok()) return fail(st.error());
  const executor::PagedKvView& view = views_[op.layer];
  AttentionOutput out;
  out.request = op.request;
  out.table_version = table.fence.table_version;
  out.layer = op.layer;
  out.context_tokens = table.context_tokens;
  out.outputs.assign(uint64_t{op.q_heads} * view.v.head_dim, 0.0f);
  out.lse.assign(op.q_heads, 0.0f);
  auto receipt = decode_rows(op.layer, *g, op.q_heads, table, op.queries, out.outputs, out.lse, op.kernel_block_tokens);
  if (!receipt.ok()) return fail(receipt.error());
  out.kv_rows = receipt->kv_rows;
  out.kernel_block_tokens = receipt->kernel_block_tokens;
  out.kernel_blocks = receipt->kernel_blocks;
  out.partitions = receipt->partitions;
  ++executions_;
  kv_rows_ += receipt->kv_rows;
  kv_bytes_ += receipt->kv_bytes;
  return out;
}

Result<SharedPrefixOutput> ExecutorService::shared_decode(const SharedPrefixDecodeOp& op,
                                                          std::span<const BlockTableView> read_tables) {
  auto fail = [&](Error e) -> Result<SharedPrefixOutput> {
    ++errors_;
    return e;
  };
  const size_t B = op.members.size();
  if (B == 0) return fail(make_error(ErrorCode::invalid_argument, "a shared batch needs a request", "members"));
  if (read_tables.size() != B) return fail(make_error(ErrorCode::invalid_argument, "one table per member", "members"));
  // Each member's keys: its whole context, or the prefix of it the op names.
  std::vector<BlockTableView> tables(read_tables.begin(), read_tables.end());
  for (size_t i = 0; i < B; ++i) {
    const uint32_t limit = op.members[i].context_tokens;
    if (limit == 0) continue;
    if (limit > tables[i].context_tokens)
      return fail(make_error(ErrorCode::invalid_argument,
                             "request " + std::to_string(op.members[i].request.value) + " has " +
                                 std::to_string(tables[i].context_tokens) + " context tokens, not " +
                                 std::to_string(limit),
                             "members[" + std::to_string(i) + "].context_tokens"));
    tables[i].context_tokens = limit;
  }
  const Result<uint32_t> g = check_layer(op.layer, op.q_heads);
  if (!g.ok()) return fail(g.error());
  const executor::PagedKvView& view = views_[op.layer];
  const uint64_t q_row = uint64_t{op.q_heads} * view.k.head_dim, o_row = uint64_t{op.q_heads} * view.v.head_dim;
  if (op.queries.size() != B * q_row)
    return fail(make_error(ErrorCode::executor_shape_mismatch,
                           "queries hold " + std::to_string(op.queries.size()) + " values; " + std::to_string(B) +
                               " members x " + std::to_string(op.q_heads) + " heads x " +
                               std::to_string(view.k.head_dim) + " lanes expected",
                           "queries"));
  std::vector<executor::MemberBlocks> members(B);
  for (size_t i = 0; i < B; ++i) {
    const BlockTableView& table = tables[i];
    if (Status st = check_version(op.members[i].request, op.members[i].table_version, table); !st.ok())
      return fail(st.error());
    if (*g >= table.groups.size())
      return fail(make_error(ErrorCode::invalid_argument, "a member's table has no group for this layer", "layer"));
    members[i].request = op.members[i].request;
    members[i].table_version = table.fence.table_version;
    members[i].context_tokens = table.context_tokens;
    for (const BlockTableEntry& e : table.groups[*g]) {
      members[i].slots.push_back(static_cast<uint32_t>(e.handle.block.value - block_id_base_[*g]));
      members[i].valid.push_back(e.valid_rows);
    }
  }
  const executor::ExecutionContract contract{
      executor::HeadMapping{op.q_heads, view.kv_heads}, view.k.head_dim, view.v.head_dim, view.k.dtype, view.v.dtype,
      std::max<uint32_t>(1, op.shared_threshold)};
  Result<executor::SharedPrefixPlan> plan =
      executor::plan_shared_prefix(members, layout_.allocator_block_size, contract);
  if (!plan.ok()) return fail(plan.error());

  SharedPrefixOutput out;
  out.levels = plan->levels;
  out.chunks = static_cast<uint32_t>(plan->snapshot.chunks.size());
  out.shared_chunks = plan->shared_chunks;
  out.snapshot_sha256 = plan->snapshot.digest();
  // The layout's logical cache ABI is 64 hex digits (a valid manifest's);
  // a manifest without one leaves the digest zero.
  (void)Sha256Digest::from_hex(layout_.logical_cache_abi_sha256, out.kernel_abi_sha256);
  out.outputs.resize(B);
  for (size_t i = 0; i < B; ++i) {
    AttentionOutput& o = out.outputs[i];
    o.request = op.members[i].request;
    o.table_version = tables[i].fence.table_version;
    o.layer = op.layer;
    o.context_tokens = tables[i].context_tokens;
    o.kv_rows = uint64_t{tables[i].context_tokens} * view.kv_heads;  // the keys it attends, per K/V head
    o.outputs.assign(o_row, 0.0f);
    o.lse.assign(op.q_heads, 0.0f);
    out.rows_per_request += tables[i].context_tokens;
  }

  SharedPrefixDesign design = op.design;
  if (design != SharedPrefixDesign::per_request) {
    if (kernel_ && !shared_kernel_) {
      out.fallback_reason = "the node's pools are GPU memory and it has no shared-prefix kernel for them";
      ++shared_fallbacks_gpu_;
    } else if (plan->shared_chunks == 0) {
      out.fallback_reason = "no block is shared by two of the requests";
      ++shared_fallbacks_unshared_;
    }
    if (!out.fallback_reason.empty()) design = SharedPrefixDesign::per_request;
  }
  if (design == SharedPrefixDesign::auto_)
    design = plan->levels > 1 ? SharedPrefixDesign::chunk_attention : SharedPrefixDesign::hydragen;
  if (shared_kernel_ && design == SharedPrefixDesign::hydragen) {
    out.fallback_reason = "the node's pools are GPU memory: the CUDA cascade runs ChunkAttention's two phases";
    design = SharedPrefixDesign::chunk_attention;
  }
  out.design = design;

  if (design == SharedPrefixDesign::per_request) {
    for (size_t i = 0; i < B; ++i) {
      AttentionOutput& o = out.outputs[i];
      auto r = decode_rows(op.layer, *g, op.q_heads, tables[i], std::span(op.queries).subspan(i * q_row, q_row),
                           o.outputs, o.lse);
      if (!r.ok()) return fail(r.error());
      out.rows_read += tables[i].context_tokens;
      kv_bytes_ += r->kv_bytes;
    }
  } else {
    // The kernels take queries in the snapshot's sequence order.
    const std::vector<uint32_t>& member = plan->member_of_sequence;
    std::vector<float> queries(op.queries.size()), outputs(B * o_row), lse(B * op.q_heads);
    for (size_t s = 0; s < B; ++s)
      std::copy_n(op.queries.begin() + static_cast<ptrdiff_t>(member[s] * q_row), q_row,
                  queries.begin() + static_cast<ptrdiff_t>(s * q_row));
    const executor::SharedPrefixArgs args{
        &plan->snapshot, plan->snapshot.fence(), contract.heads, queries, outputs, lse};
    auto r = shared_kernel_                           ? shared_kernel_(view, args)
             : design == SharedPrefixDesign::hydragen ? executor::hydragen_attention(view, args, pool_.get())
                                                      : executor::chunk_attention(view, args, pool_.get());
    if (!r.ok()) return fail(r.error());
    for (size_t s = 0; s < B; ++s) {
      AttentionOutput& o = out.outputs[member[s]];
      std::copy_n(outputs.begin() + static_cast<ptrdiff_t>(s * o_row), o_row, o.outputs.begin());
      std::copy_n(lse.begin() + static_cast<ptrdiff_t>(s * op.q_heads), op.q_heads, o.lse.begin());
    }
    out.rows_read = r->ledger.unique_rows;
    kv_bytes_ += r->ledger.shared_kv_bytes;
    ++shared_batches_;
    shared_rows_saved_ += out.rows_per_request - out.rows_read;
  }
  executions_ += B;
  kv_rows_ += out.rows_read * view.kv_heads;  // per K/V head, as decode() counts
  return out;
}

Status ExecutorService::validate() const {
  for (size_t l = 0; l < views_.size(); ++l)
    if (views_[l].k.base == nullptr || views_[l].v.base == nullptr)
      return make_error(ErrorCode::invariant_violated, "layer " + std::to_string(l) + " has no pool view", "views");
  return Status::success();
}

SnapshotAnswer ExecutorService::freeze_reuse(const ReuseSnapshotRequest& request) {
  const ExecutionSnapshotVersion version{++snapshots_frozen_};
  return SnapshotAnswer{
      version,         version,         layout_.logical_cache_abi_sha256, request.planned_kernel_abi_id,
      request.handles, request.interval};
}

OwnerStats ExecutorService::stats() const {
  OwnerStats out;
  out.owner = "executor";
  auto put = [&](std::string name, uint64_t value) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(value)});
  };
  put("reuse_snapshots_frozen", snapshots_frozen_);
  put("executions", executions_);
  put("errors", errors_);
  put("kv_rows_read", kv_rows_);
  put("kv_bytes_read", kv_bytes_);
  put("shared_prefix_batches", shared_batches_);
  // By reason: nothing shared, or pools on a GPU.
  put("shared_prefix_fallbacks", shared_fallbacks_unshared_ + shared_fallbacks_gpu_);
  put("shared_prefix_fallbacks_unshared", shared_fallbacks_unshared_);
  put("shared_prefix_fallbacks_gpu_pools", shared_fallbacks_gpu_);
  put("shared_prefix_rows_saved", shared_rows_saved_);
  put("threads", pool_ ? pool_->workers() : 1);
  return out;
}

}  // namespace kvrt
