#include "services/executor/executor_service.hpp"

#include <string>

#include "services/executor/paged_decode.hpp"

namespace kvrt {

ExecutorService::ExecutorService(CacheLayoutManifest layout, std::vector<executor::PagedKvView> views,
                                 std::vector<uint64_t> base, unsigned threads)
    : layout_(std::move(layout)), views_(std::move(views)), block_id_base_(std::move(base)) {
  if (threads > 1) pool_ = std::make_unique<executor::ThreadPool>(threads);
}

Result<std::unique_ptr<ExecutorService>> ExecutorService::create(const CacheLayoutManifest& layout,
                                                                 std::vector<executor::PagedKvView> layer_views,
                                                                 std::vector<uint64_t> block_id_base, unsigned threads,
                                                                 DecodeKernel kernel) {
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
  return s;
}

Result<AttentionOutput> ExecutorService::decode(const DecodeAttentionOp& op, const BlockTableView& table) {
  auto fail = [&](Error e) -> Result<AttentionOutput> {
    ++errors_;
    return e;
  };
  if (op.layer >= views_.size())
    return fail(make_error(
        ErrorCode::coordinate_out_of_range,
        "layer " + std::to_string(op.layer) + " of a model with " + std::to_string(views_.size()) + " layers",
        "layer"));
  if (op.table_version.value != 0 && op.table_version != table.fence.table_version)
    return fail(make_error(ErrorCode::stale_table_version,
                           "the queries were computed against table version " + std::to_string(op.table_version.value) +
                               "; the request is at " + std::to_string(table.fence.table_version.value),
                           "table_version"));
  uint32_t g = 0;
  while (g < layout_.cache_groups.size() && !layout_.cache_groups[g].contains_layer(op.layer)) ++g;
  const executor::PagedKvView& view = views_[op.layer];
  const executor::HeadMapping heads{op.q_heads, view.kv_heads};
  if (Status st = executor::check_head_mapping(heads, view.kv_heads, "q_heads"); !st.ok()) return fail(st.error());
  if (g >= table.groups.size())
    return fail(make_error(ErrorCode::invalid_argument, "the request's table has no group for this layer", "layer"));
  std::vector<uint32_t> slots, valid;
  for (const BlockTableEntry& e : table.groups[g]) {
    slots.push_back(static_cast<uint32_t>(e.handle.block.value - block_id_base_[g]));
    valid.push_back(e.valid_rows);
  }
  const executor::DecodeRequest request{executor::KvBlockTable{slots, valid, table.context_tokens}};
  AttentionOutput out;
  out.request = op.request;
  out.table_version = table.fence.table_version;
  out.layer = op.layer;
  out.context_tokens = table.context_tokens;
  out.outputs.assign(uint64_t{op.q_heads} * view.v.head_dim, 0.0f);
  out.lse.assign(op.q_heads, 0.0f);
  const executor::DecodeArgs args{heads, std::span(&request, 1), op.queries, out.outputs, out.lse, {}};
  auto receipt = kernel_ ? kernel_(view, args) : executor::paged_decode(view, args, pool_.get());
  if (!receipt.ok()) return fail(receipt.error());
  out.kv_rows = receipt->kv_rows;
  ++executions_;
  kv_rows_ += receipt->kv_rows;
  kv_bytes_ += receipt->kv_bytes;
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
  put("threads", pool_ ? pool_->workers() : 1);
  return out;
}

}  // namespace kvrt
