// BlockAllocator operations that add references or rows: allocate, append
// (the three paths of 0x04E, COW in the nine-step order of 0x05C), fork,
// touch and commit_rows.
#include <algorithm>
#include <string>

#include "services/allocator/block_allocator_hot.hpp"
#include "services/common/units.hpp"

namespace kvrt {

namespace {
constexpr const char* kAfterReserveGroup = "after_reserve_group_";
}  // namespace

std::vector<std::string> BlockAllocator::fault_point_names() const {
  std::vector<std::string> names;
  for (uint32_t g = 0; g < group_count(); ++g) names.push_back(kAfterReserveGroup + std::to_string(g));
  return names;
}

bool BlockAllocator::fault(const char* prefix, uint32_t g) {
  if (!faults_.any_armed()) [[likely]]
    return false;
  return faults_.reached(std::string(prefix) + std::to_string(g));
}

bool BlockAllocator::take_request_slot(uint32_t& index) {
  if (!free_request_slots_.empty()) {
    index = free_request_slots_.back();
    free_request_slots_.pop_back();
    return true;
  }
  if (requests_.size() >= config_.max_requests) return false;
  index = static_cast<uint32_t>(requests_.size());
  requests_.emplace_back();
  requests_.back().tables.resize(pools_.size());
  return true;
}

void BlockAllocator::out_of_capacity(AllocationReceipt& out, AllocationOperation op, const char* why) {
  begin_receipt(out, op, nullptr);
  out.outcome = AllocationOutcome::out_of_capacity;
  out.rollback_reason = why;
  finish_receipt(out, nullptr, 0);
}

bool BlockAllocator::quota_refused(const BlockQuotaGate* gate, const QuotaCharge& charge, AllocationReceipt& out,
                                   AllocationOperation op) {
  if (gate == nullptr) [[likely]]
    return false;
  std::optional<std::string> why = gate->refuse(charge);
  if (!why) return false;
  begin_receipt(out, op, nullptr);
  out.outcome = AllocationOutcome::quota_exceeded;
  out.rollback_reason = std::move(*why);
  finish_receipt(out, nullptr, 0);
  return true;
}

uint64_t BlockAllocator::bundle_row_bytes() const {
  uint64_t total = 0;
  for (const Pool& p : pools_) total += p.config.row_bytes;
  return total;
}

template <class RowsNeeded>
Status BlockAllocator::resolve_bundles(std::span<const PhysicalBlockHandle> handles, RowsNeeded rows_needed) {
  const uint32_t G = group_count();
  scratch_slots_.clear();
  if (handles.size() % G != 0)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(handles.size()) + " handles do not form whole bundles of " + std::to_string(G) +
                          " cache groups (a half-bundle is never published, 0x04E)",
                      "prefix_hit");
  Status status;
  for (size_t i = 0; i < handles.size() && status.ok(); ++i) {
    const uint32_t g = static_cast<uint32_t>(i % G);
    auto slot = resolve(handles[i], g);
    if (!slot.ok()) {
      Error e = slot.error();
      e.field = "bundles[" + std::to_string(i / G) + "]." + e.field;
      status = e;
      break;
    }
    BlockMeta& b = pools_[g].blocks[*slot];
    if (b.state != BlockState::live && b.state != BlockState::evictable) {
      status = make_error(ErrorCode::unknown_physical,
                          "block " + std::to_string(handles[i].block.value) +
                              " holds no committed K/V (it is free or in a transaction)",
                          "bundles[" + std::to_string(i / G) + "]");
      break;
    }
    const uint32_t need = rows_needed(static_cast<uint32_t>(i / G));
    if (b.valid_rows < need) {
      status = make_error(ErrorCode::row_not_valid,
                          "block " + std::to_string(handles[i].block.value) + " has " + std::to_string(b.valid_rows) +
                              " valid rows, " + std::to_string(need) + " are needed",
                          "bundles[" + std::to_string(i / G) + "]");
      break;
    }
    if (b.named_in_call != 0) {
      status =
          make_error(ErrorCode::invalid_argument, "block " + std::to_string(handles[i].block.value) + " appears twice",
                     "bundles[" + std::to_string(i / G) + "]");
      break;
    }
    b.named_in_call = 1;
    scratch_slots_.push_back(*slot);
  }
  for (size_t i = 0; i < scratch_slots_.size(); ++i) pools_[i % G].blocks[scratch_slots_[i]].named_in_call = 0;
  if (!status.ok()) scratch_slots_.clear();
  return status;
}

void BlockAllocator::unlink_evictable_hits() {
  const uint32_t G = group_count();
  scratch_unlinked_.clear();
  for (size_t i = 0; i < scratch_slots_.size(); ++i) {
    const uint32_t g = static_cast<uint32_t>(i % G);
    const uint32_t slot = scratch_slots_[i];
    if (pools_[g].blocks[slot].refcount == 0)
      scratch_unlinked_.emplace_back(g, pools_[g].lru_queue.remove_logged(slot, links_of(g)));
  }
}

void BlockAllocator::relink_evictable_hits() {
  for (auto it = scratch_unlinked_.rbegin(); it != scratch_unlinked_.rend(); ++it)
    pools_[it->first].lru_queue.relink(it->second, links_of(it->first));
  scratch_unlinked_.clear();
}

bool BlockAllocator::reserve_bundles(uint32_t per_group, AllocationReceipt& out) {
  // 0x05C step 3: reserve every group's destinations as unpublished, with the
  // named fault point after each group (0x04F's injected failure).
  scratch_log_.clear();
  for (uint32_t g = 0; g < group_count(); ++g) {
    // FREE blocks come off the ring in one run, with the ring's indices and the
    // pool's counter in registers; the rest (EVICTABLE, or every block under
    // single_lru_queue) one at a time from the linked queue.
    Pool& p = pools_[g];
    const uint32_t from_ring = std::min(per_group, p.free_ring.size());
    const size_t base = scratch_log_.size();
    scratch_log_.resize(base + from_ring);
    Reservation* res = scratch_log_.data() + base;
    BlockMeta* blocks = p.blocks.data();
    const auto group_index = static_cast<uint16_t>(g);
    p.free_ring.pop_front_n(from_ring, [&](uint32_t slot) {
      blocks[slot].state = BlockState::reserved;
      *res++ = Reservation{slot, group_index, BlockState::free};
    });
    p.in_transaction += from_ring;
    for (uint32_t k = from_ring; k < per_group; ++k)
      KVRT_ASSERT(reserve_block(g, scratch_log_), "capacity was checked");
    if (fault(kAfterReserveGroup, g)) {
      rollback(scratch_log_);
      out.outcome = AllocationOutcome::rolled_back;
      out.rollback_reason = "fault point after_reserve_group_" + std::to_string(g);
      return false;
    }
  }
  // A reserved block may hold a released request's or an evicted page's
  // rows, possibly another namespace generation's or tenant's. Zeroed here,
  // the one step every path that hands out a block takes (allocate, append
  // into a new bundle, copy-on-write, whose copy then overwrites only the
  // rows it copies), and only once the reservation can no longer roll back:
  // a rolled-back evictable block keeps its cached rows.
  // A purge's overwrite mark (mark_all_for_overwrite) is honoured here too.
  if (store_ != nullptr && (config_.zero_on_recycle || overwrite_pending_count_ > 0))
    for (const Reservation& r : scratch_log_) {
      bool marked = false;
      if (overwrite_pending_count_ > 0 && r.slot < overwrite_pending_[r.group_index].size() &&
          overwrite_pending_[r.group_index][r.slot] != 0) {
        overwrite_pending_[r.group_index][r.slot] = 0;
        --overwrite_pending_count_;
        ++overwritten_blocks_;
        marked = true;
      }
      if (marked || config_.zero_on_recycle) store_->zero_block(r.group_index, r.slot);
    }
  return true;
}

uint64_t BlockAllocator::mark_all_for_overwrite() {
  if (store_ == nullptr) return 0;
  overwrite_pending_.resize(pools_.size());
  uint64_t marked = 0;
  for (size_t g = 0; g < pools_.size(); ++g) {
    overwrite_pending_[g].assign(pools_[g].capacity(), 1);
    marked += pools_[g].capacity();
  }
  overwrite_pending_count_ = marked;
  return marked;
}

uint64_t BlockAllocator::mark_for_overwrite(std::span<const std::pair<uint32_t, uint32_t>> blocks) {
  if (store_ == nullptr) return 0;
  overwrite_pending_.resize(pools_.size());
  uint64_t marked = 0;
  for (const auto& [g, slot] : blocks) {
    if (g >= pools_.size() || slot >= pools_[g].capacity()) continue;
    std::vector<uint8_t>& pending = overwrite_pending_[g];
    if (pending.size() < pools_[g].capacity()) pending.resize(pools_[g].capacity(), 0);
    if (pending[slot] != 0) continue;
    pending[slot] = 1;
    ++overwrite_pending_count_;
    ++marked;
  }
  return marked;
}

void BlockAllocator::record_eviction(const Reservation& res, AllocationReceipt& out) {
  // The block still carries its old generation and identity: publication has
  // not touched it yet.
  const BlockMeta& b = pools_[res.group_index].blocks[res.slot];
  const PhysicalBlockHandle old = handle_of(res.group_index, res.slot);
  events_.push_back(AllocatorEvent{AllocatorEvent::Kind::cache_key_evicted, old, b.cache_key});
  out.evicted_handles.push_back(old);
  digest_.remove_digest(cache_key_image(res.group_index, res.slot, b.cache_key));
}

PhysicalBlockHandle BlockAllocator::publish_fresh(const Reservation& res, uint16_t valid_rows, AllocationReceipt& out) {
  if (res.from_state == BlockState::evictable) record_eviction(res, out);
  publish_reserved(res, valid_rows);
  const PhysicalBlockHandle h = handle_of(res.group_index, res.slot);
  out.refcount_deltas.push_back(RefcountDelta{h, 0, 1});
  return h;
}

void BlockAllocator::publish_fresh_blocks(uint32_t index, uint16_t valid_rows, AllocationReceipt& out) {
  // One pass per reserved block, group by group (reserve_bundles lays the log
  // out group-major, the same count per group), with the table's end, the
  // pool's counters and the digest sums in registers: this loop is most of a
  // 128-block allocate (the 1 us target of `kvrt bench allocator`).
  RequestRecord& r = requests_[index];
  const uint32_t G = group_count();
  const size_t n = scratch_log_.size();
  KVRT_ASSERT(n % G == 0, "a reservation log holds whole bundles");
  const uint32_t per_group = static_cast<uint32_t>(n / G);
  out.refcount_deltas.reserve(out.refcount_deltas.size() + n);
  out.published_entries.reserve(out.published_entries.size() + n);
  StateDigest blocks{}, cells{};
  for (uint32_t g = 0; g < G; ++g) {
    Pool& p = pools_[g];
    auto& table = r.tables[g];
    const uint32_t j0 = static_cast<uint32_t>(table.size());
    table.resize(j0 + per_group);
    uint32_t* cell_slot = table.data() + j0;
    const PoolId pool = p.config.pool;
    const CacheGroupId group = p.config.group;
    const uint32_t id_base = p.config.block_id_base;
    const Reservation* run = scratch_log_.data() + size_t{g} * per_group;
    for (uint32_t k = 0; k < per_group; ++k) {
      const Reservation& res = run[k];
      KVRT_ASSERT(res.group_index == g, "reservation log is not group-major");
      const uint32_t slot = res.slot;
      if (res.from_state == BlockState::evictable) [[unlikely]]
        record_eviction(res, out);
      const StateDigest step = recycle_block(g, slot, valid_rows);
      blocks.lo += step.lo;
      blocks.hi += step.hi;
      const PhysicalBlockHandle h{pool, group, PhysicalBlockId{id_base + slot},
                                  BlockGeneration{p.blocks[slot].generation}};
      out.refcount_deltas.push_back(RefcountDelta{h, 0, 1});
      const uint32_t j = j0 + k;
      out.published_entries.push_back(TableEntryUpdate{j, h, valid_rows});
      const StateDigest cell = cell_image(index, g, j, slot);
      cells.lo += cell.lo;
      cells.hi += cell.hi;
      cell_slot[k] = slot;
    }
    p.in_transaction -= per_group;
    p.gain_live(per_group);
  }
  digest_.add_digest(blocks);
  digest_.add_digest(cells);
  r.cells.add_digest(cells);
}

Status BlockAllocator::allocate_into(const AllocateArgs& a, AllocationReceipt& out) {
  if (a.expected_epoch && a.expected_epoch->value != epoch_) [[unlikely]]
    return check_epoch(a.expected_epoch);
  const uint32_t G = group_count(), P = block_size();
  if (a.prompt_rows == 0) return make_error(ErrorCode::invalid_argument, "prompt_rows must be positive", "prompt_rows");
  const uint32_t need = static_cast<uint32_t>(ceil_div(a.prompt_rows, P));
  const uint32_t hit_bundles = static_cast<uint32_t>(a.prefix_hit.size() / G);
  if (a.prefix_hit.size() % G == 0 && hit_bundles > need)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(hit_bundles) + " prefix-hit bundles exceed the " + std::to_string(need) +
                          " blocks of a " + std::to_string(a.prompt_rows) + "-row prompt",
                      "prefix_hit");
  // With a copy-rows intent the last hit bundle is a partial tail: copied,
  // never shared (0x07D), so the request's own block at that position can
  // take the divergent rows without a copy-on-write later.
  const uint32_t tail_rows = a.copy_tail_rows;
  if (tail_rows > 0) KVRT_TRY(check_copy_tail(a, hit_bundles));
  const uint32_t shared = tail_rows > 0 ? hit_bundles - 1 : hit_bundles;
  // A hit block must hold every row the new request will see in it; the
  // tail, the rows it copies.
  KVRT_TRY(resolve_bundles(a.prefix_hit, [&](uint32_t j) {
    return j == shared && tail_rows > 0 ? tail_rows : std::min(P, a.prompt_rows - j * P);
  }));
  if (tail_rows > 0 && store_ == nullptr) {
    scratch_slots_.clear();
    return make_error(ErrorCode::invalid_argument, "a partial tail is copied, but the allocator has no payload store",
                      "copy_tail_rows");
  }
  const uint32_t fresh = need - shared;
  if (quota_refused(a.quota, QuotaCharge{fresh, a.prefix_hit.first(size_t{shared} * G), G, std::nullopt}, out,
                    AllocationOperation::allocate))
    return Status::success();
  for (uint32_t g = 0; g < G; ++g) {
    // Hits that wait unreferenced (the tail too) leave the queue for the
    // transaction, so they are not reservable.
    uint32_t evictable_hits = 0;
    for (uint32_t i = g; i < scratch_slots_.size(); i += G)
      evictable_hits += pools_[g].blocks[scratch_slots_[i]].refcount == 0 ? 1 : 0;
    const Pool& p = pools_[g];
    if (p.unreferenced() - evictable_hits < fresh) {
      out_of_capacity(out, AllocationOperation::allocate, "no free or evictable block for the prompt");
      return Status::success();
    }
  }
  uint32_t index = 0;
  if (!take_request_slot(index)) {
    out_of_capacity(out, AllocationOperation::allocate, "every request slot is in use");
    return Status::success();
  }

  begin_receipt(out, AllocationOperation::allocate, nullptr);
  unlink_evictable_hits();
  if (!reserve_bundles(fresh, out)) {
    relink_evictable_hits();
    free_request_slots_.push_back(index);
    finish_receipt(out, nullptr, 0);
    return Status::success();
  }
  // The copy-rows intent: the tail's valid rows into each group's first
  // reserved block (reserve_bundles lays the log out group-major), which
  // becomes logical block `shared`. Unpublished until step 8 below.
  if (tail_rows > 0)
    for (uint32_t g = 0; g < G; ++g) {
      const Reservation& res = scratch_log_[size_t{g} * fresh];
      pools_[g].blocks[res.slot].state = BlockState::copying;
      store_->copy_rows(g, scratch_slots_[size_t{shared} * G + g], res.slot, tail_rows);
    }

  // Step 8: publish the request, its tables and the reference deltas at once.
  RequestRecord& r = requests_[index];
  r.generation += 1;
  r.table_version = 1;
  r.context_tokens = a.prompt_rows;
  r.open = true;
  r.cells = MultisetDigest{};
  ++open_requests_;
  // One pass per block: table entry, digest cell, reference delta and the
  // published entry share one computed handle.
  for (uint32_t g = 0; g < G; ++g) {
    auto& table = r.tables[g];
    table.clear();
    for (uint32_t i = 0; i < shared; ++i) {
      const uint32_t slot = scratch_slots_[i * G + g];
      BlockMeta& b = pools_[g].blocks[slot];
      const uint32_t before = b.refcount;
      if (before == 0) {  // unlinked above: revive (touch) without touching the queue again
        b.state = BlockState::live;
        pools_[g].gain_live(1);
        --pools_[g].evictable;
      }
      ++b.refcount;
      const PhysicalBlockHandle h = handle_of(g, slot);
      out.refcount_deltas.push_back(RefcountDelta{h, before, before + 1});
      out.published_entries.push_back(TableEntryUpdate{i, h, b.valid_rows});
      add_cell(index, g, i, slot);
      table.push_back(slot);
    }
  }
  const size_t first_fresh_entry = out.published_entries.size();
  publish_fresh_blocks(index, 0, out);
  if (tail_rows > 0) {
    for (uint32_t g = 0; g < G; ++g) set_valid_rows(g, r.tables[g][shared], static_cast<uint16_t>(tail_rows));
    for (size_t e = first_fresh_entry; e < out.published_entries.size(); ++e)
      if (out.published_entries[e].logical_block == shared) out.published_entries[e].valid_rows = tail_rows;
    // The source stays cached and unreferenced by this request: back in its
    // queue, at the young end, since a hit is a use (the hits before it left
    // the queue for good: they are referenced now).
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t slot = scratch_slots_[size_t{shared} * G + g];
      if (pools_[g].blocks[slot].refcount == 0) pools_[g].lru_queue.push_back(slot, links_of(g));
    }
  }
  digest_.add_digest(request_image(index));
  scratch_unlinked_.clear();
  if (fresh > 0) bump_epoch();
  out.useful_new_rows = a.prompt_rows - std::min(a.prompt_rows, shared * P + tail_rows);
  out.new_physical_blocks = fresh * G;
  out.copied_rows = tail_rows;
  out.copy_payload_bytes = uint64_t{tail_rows} * bundle_row_bytes();
  finish_receipt(out, &r, index);
  return Status::success();
}

Status BlockAllocator::check_copy_tail(const AllocateArgs& a, uint32_t hit_bundles) const {
  const uint32_t P = block_size();
  if (a.copy_tail_rows >= P)
    return make_error(ErrorCode::invalid_argument,
                      "a partial tail holds 0 < v < P rows; got " + std::to_string(a.copy_tail_rows) + " of a " +
                          std::to_string(P) + "-row block (a full block is shared, not copied)",
                      "copy_tail_rows");
  if (hit_bundles == 0 || a.prefix_hit.size() % group_count() != 0)
    return make_error(ErrorCode::invalid_argument, "copy_tail_rows names the last prefix-hit bundle, and there is none",
                      "copy_tail_rows");
  if (uint64_t{hit_bundles - 1} * P + a.copy_tail_rows > a.prompt_rows)
    return make_error(ErrorCode::invalid_argument,
                      "the partial tail's rows end at " +
                          std::to_string(uint64_t{hit_bundles - 1} * P + a.copy_tail_rows) + ", past the " +
                          std::to_string(a.prompt_rows) + "-row prompt",
                      "copy_tail_rows");
  return Status::success();
}

Status BlockAllocator::check_append_rows(std::span<const std::span<const uint8_t>> rows) const {
  const uint32_t G = group_count();
  if (rows.size() != G)
    return make_error(ErrorCode::invalid_argument,
                      "rows for " + std::to_string(rows.size()) + " cache groups, the layout has " + std::to_string(G),
                      "rows");
  for (uint32_t g = 0; g < G; ++g)
    if (rows[g].size() != pools_[g].config.row_bytes)
      return make_error(ErrorCode::invalid_argument,
                        "row of group " + std::to_string(g) + " has " + std::to_string(rows[g].size()) +
                            " bytes, B_row is " + std::to_string(pools_[g].config.row_bytes),
                        "rows[" + std::to_string(g) + "]");
  if (store_ == nullptr)
    return make_error(ErrorCode::invalid_argument, "rows given but the allocator has no payload store", "rows");
  return Status::success();
}

Status BlockAllocator::append_into(const AppendArgs& a, AllocationReceipt& out) {
  if (!fence_current(a.fence)) [[unlikely]]
    return check_fence(a.fence);
  if (a.expected_epoch && a.expected_epoch->value != epoch_) [[unlikely]]
    return check_epoch(a.expected_epoch);
  if (!a.rows.empty()) KVRT_TRY(check_append_rows(a.rows));
  const uint32_t index = static_cast<uint32_t>(a.fence.request.value);
  const RequestRecord& r = requests_[index];
  const uint32_t j = r.context_tokens / block_size(), o = r.context_tokens % block_size();
  if (o == 0) {
    if (quota_refused(a.quota, QuotaCharge{1, {}, group_count(), std::nullopt}, out, AllocationOperation::append))
      return Status::success();
    if (!available_for(1)) {
      out_of_capacity(out, AllocationOperation::append, "no free or evictable block for a new bundle");
      return Status::success();
    }
    append_new_bundle(index, a.rows, out);
    return Status::success();
  }
  // Offset > 0: the tail is written in place only when every group's tail has
  // one strong owner and no published cache identity (a keyed block is
  // immutable); otherwise the bundle is copied first.
  bool shared = false;
  for (uint32_t g = 0; g < group_count(); ++g) {
    const BlockMeta& b = pools_[g].blocks[r.tables[g][j]];
    shared |= b.refcount > 1 || b.cache_key != kNoCacheKey;
  }
  if (!shared) {
    append_private_tail(index, o, a.rows, out);
    return Status::success();
  }
  return append_copy_on_write(index, o, a.rows, a.quota, out);
}

// Path 1 (0x04E): a new bundle, row 0, one new table entry per group.
void BlockAllocator::append_new_bundle(uint32_t index, std::span<const std::span<const uint8_t>> rows,
                                       AllocationReceipt& out) {
  RequestRecord& r = requests_[index];
  const bool with_rows = !rows.empty();
  begin_receipt(out, AllocationOperation::append, &r);
  if (!reserve_bundles(1, out)) {
    finish_receipt(out, &r, index);
    return;
  }
  for (const Reservation& res : scratch_log_) {
    if (with_rows) store_->write_rows(res.group_index, res.slot, 0, 1, rows[res.group_index]);
  }
  publish_fresh_blocks(index, with_rows ? 1 : 0, out);
  set_request_counters(index, r.table_version + 1, r.context_tokens + 1);
  bump_epoch();
  out.append_path = AppendPath::new_bundle;
  out.useful_new_rows = 1;
  out.new_physical_blocks = group_count();
  finish_receipt(out, &r, index);
}

// Path 2: a unique writer writes row o in place and publishes valid_rows = o + 1.
void BlockAllocator::append_private_tail(uint32_t index, uint32_t o, std::span<const std::span<const uint8_t>> rows,
                                         AllocationReceipt& out) {
  RequestRecord& r = requests_[index];
  const bool with_rows = !rows.empty();
  const uint32_t j = r.context_tokens / block_size();
  begin_receipt(out, AllocationOperation::append, &r);
  for (uint32_t g = 0; g < group_count(); ++g) {
    const uint32_t slot = r.tables[g][j];
    BlockMeta& b = pools_[g].blocks[slot];
    // Rows at or past o are not this request's history any more.
    const uint16_t valid = with_rows ? (b.valid_rows >= o ? static_cast<uint16_t>(o + 1) : b.valid_rows)
                                     : static_cast<uint16_t>(std::min<uint32_t>(b.valid_rows, o));
    if (with_rows) store_->write_rows(g, slot, o, 1, rows[g]);
    if (valid != b.valid_rows) set_valid_rows(g, slot, valid);
    out.published_entries.push_back(TableEntryUpdate{j, handle_of(g, slot), b.valid_rows});
  }
  set_request_counters(index, r.table_version + 1, r.context_tokens + 1);
  out.append_path = AppendPath::private_tail;
  out.useful_new_rows = 1;
  finish_receipt(out, &r, index);
}

// Path 3: copy-on-write in the nine-step order of 0x05C.
Status BlockAllocator::append_copy_on_write(uint32_t index, uint32_t o, std::span<const std::span<const uint8_t>> rows,
                                            const BlockQuotaGate* quota, AllocationReceipt& out) {
  RequestRecord& r = requests_[index];
  const bool with_rows = !rows.empty();
  const uint32_t G = group_count();
  const uint32_t j = r.context_tokens / block_size();
  // Steps 1-2 (versions checked by append; load the source handles and check
  // that the rows this request sees are committed, since only valid rows are
  // copied).
  for (uint32_t g = 0; g < G; ++g) {
    const BlockMeta& b = pools_[g].blocks[r.tables[g][j]];
    if (b.valid_rows < o)
      return make_error(ErrorCode::row_not_valid,
                        "shared tail of group " + std::to_string(g) + " has " + std::to_string(b.valid_rows) +
                            " valid rows; copy-on-write needs the " + std::to_string(o) +
                            " rows the request sees to be committed",
                        "tail.valid_rows");
  }
  // The copy is a new bundle; the shared source stops being this request's.
  if (quota_refused(quota, QuotaCharge{1, {}, G, handle_of(0, r.tables[0][j])}, out, AllocationOperation::append))
    return Status::success();
  if (!available_for(1)) {
    out_of_capacity(out, AllocationOperation::append, "no free or evictable block for the copy-on-write bundle");
    return Status::success();
  }
  begin_receipt(out, AllocationOperation::append, &r);
  // Step 3: reserve every group's destination as unpublished.
  if (!reserve_bundles(1, out)) {
    finish_receipt(out, &r, index);
    return Status::success();
  }
  // Step 4: the sources stay retained by this request's own references for the
  // whole synchronous transaction, so no extra lease is taken here.
  // Steps 5-6: copy exactly the predecessor's visible valid rows, then write
  // the appended row into every group destination.
  for (const Reservation& res : scratch_log_) {
    pools_[res.group_index].blocks[res.slot].state = BlockState::copying;
    if (store_ != nullptr) {
      store_->copy_rows(res.group_index, r.tables[res.group_index][j], res.slot, o);
      if (with_rows) store_->write_rows(res.group_index, res.slot, o, 1, rows[res.group_index]);
    }
  }
  // Step 7: destination frontiers are valid: o copied rows (+ the new row).
  const uint16_t valid = static_cast<uint16_t>(with_rows ? o + 1 : o);
  for (const Reservation& res : scratch_log_) pools_[res.group_index].blocks[res.slot].state = BlockState::ready;
  // Step 8 (linearization point): publish the successor tables, length and
  // reference deltas together; step 9: the source references drop.
  for (const Reservation& res : scratch_log_) {
    const uint32_t g = res.group_index;
    const uint32_t src = r.tables[g][j];
    const uint32_t src_before = pools_[g].blocks[src].refcount;
    const PhysicalBlockHandle src_handle = handle_of(g, src);
    const PhysicalBlockHandle h = publish_fresh(res, valid, out);
    remove_cell(index, g, j, src);
    r.tables[g][j] = res.slot;
    add_cell(index, g, j, res.slot);
    drop_ref(g, src);
    out.refcount_deltas.push_back(RefcountDelta{src_handle, src_before, src_before - 1});
    out.published_entries.push_back(TableEntryUpdate{j, h, valid});
  }
  set_request_counters(index, r.table_version + 1, r.context_tokens + 1);
  bump_epoch();
  out.append_path = AppendPath::copy_on_write;
  out.useful_new_rows = 1;
  out.new_physical_blocks = G;
  out.copied_rows = o;
  out.copy_payload_bytes = uint64_t{o} * bundle_row_bytes();
  finish_receipt(out, &r, index);
  return Status::success();
}

Status BlockAllocator::fork_into(const ForkArgs& a, AllocationReceipt& out) {
  if (!fence_current(a.parent)) [[unlikely]]
    return check_fence(a.parent);
  const uint32_t parent = static_cast<uint32_t>(a.parent.request.value);
  uint32_t index = 0;
  if (!take_request_slot(index)) {
    out_of_capacity(out, AllocationOperation::fork, "every request slot is in use");
    return Status::success();
  }
  begin_receipt(out, AllocationOperation::fork, nullptr);
  // take_request_slot may grow requests_: take references afterwards.
  const RequestRecord& p = requests_[parent];
  RequestRecord& c = requests_[index];
  c.generation += 1;
  c.table_version = 1;
  c.context_tokens = p.context_tokens;
  c.open = true;
  c.cells = MultisetDigest{};
  ++open_requests_;
  for (uint32_t g = 0; g < group_count(); ++g) {
    c.tables[g] = p.tables[g];
    for (uint32_t j = 0; j < c.tables[g].size(); ++j) {
      const uint32_t slot = c.tables[g][j];
      const uint32_t before = pools_[g].blocks[slot].refcount;
      add_ref(g, slot);
      record_delta(out.refcount_deltas, g, slot, before, before + 1);
      add_cell(index, g, j, slot);
      out.published_entries.push_back(TableEntryUpdate{j, handle_of(g, slot), pools_[g].blocks[slot].valid_rows});
    }
  }
  digest_.add_digest(request_image(index));
  finish_receipt(out, &c, index);
  return Status::success();
}

Status BlockAllocator::touch_into(const TouchArgs& a, AllocationReceipt& out) {
  if (!fence_current(a.fence)) [[unlikely]]
    return check_fence(a.fence);
  const uint32_t G = group_count(), P = block_size();
  const uint32_t index = static_cast<uint32_t>(a.fence.request.value);
  if (requests_[index].context_tokens % P != 0)
    return make_error(ErrorCode::invalid_argument,
                      "touch extends a request only at a block boundary; context is " +
                          std::to_string(requests_[index].context_tokens) + " tokens",
                      "bundles");
  if (a.bundles.empty()) return make_error(ErrorCode::invalid_argument, "no bundles to touch", "bundles");
  KVRT_TRY(resolve_bundles(a.bundles, [&](uint32_t) { return P; }));
  if (quota_refused(a.quota, QuotaCharge{0, a.bundles, G, std::nullopt}, out, AllocationOperation::touch))
    return Status::success();
  begin_receipt(out, AllocationOperation::touch, &requests_[index]);
  RequestRecord& r = requests_[index];
  for (size_t i = 0; i < scratch_slots_.size(); ++i) {
    const uint32_t g = static_cast<uint32_t>(i % G);
    const uint32_t slot = scratch_slots_[i];
    const uint32_t before = pools_[g].blocks[slot].refcount;
    add_ref(g, slot);  // a zero-ref cached block leaves the evictable queue (0x05E)
    record_delta(out.refcount_deltas, g, slot, before, before + 1);
    const uint32_t j = static_cast<uint32_t>(r.tables[g].size());
    r.tables[g].push_back(slot);
    add_cell(index, g, j, slot);
    out.published_entries.push_back(TableEntryUpdate{j, handle_of(g, slot), pools_[g].blocks[slot].valid_rows});
  }
  set_request_counters(index, r.table_version + 1,
                       r.context_tokens + static_cast<uint32_t>(scratch_slots_.size() / G) * P);
  finish_receipt(out, &r, index);
  return Status::success();
}

Status BlockAllocator::commit_rows_into(const CommitRowsArgs& a, AllocationReceipt& out) {
  if (!fence_current(a.fence)) [[unlikely]]
    return check_fence(a.fence);
  const uint32_t G = group_count(), P = block_size();
  const uint32_t index = static_cast<uint32_t>(a.fence.request.value);
  RequestRecord& r = requests_[index];
  if (a.valid_through > r.context_tokens)
    return make_error(ErrorCode::request_not_visible,
                      "cannot commit rows through " + std::to_string(a.valid_through) + ": the context has " +
                          std::to_string(r.context_tokens) + " tokens",
                      "valid_through");
  // Every block whose frontier moves must have one strong owner and no cached
  // identity: committing rows into a shared block would change what another
  // request or a cache key names.
  const uint32_t last_block = a.valid_through == 0 ? 0 : (a.valid_through - 1) / P + 1;
  for (uint32_t j = 0; j < last_block; ++j)
    for (uint32_t g = 0; g < G; ++g) {
      const BlockMeta& b = pools_[g].blocks[r.tables[g][j]];
      const uint32_t target = std::min(P, a.valid_through - j * P);
      if (b.valid_rows < target && (b.refcount > 1 || b.cache_key != kNoCacheKey))
        return make_error(ErrorCode::invalid_argument,
                          "block " + std::to_string(handle_of(g, r.tables[g][j]).block.value) +
                              " is shared or cached; its rows cannot be committed in place",
                          "valid_through");
    }
  begin_receipt(out, AllocationOperation::commit_rows, &r);
  for (uint32_t j = 0; j < last_block; ++j)
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t slot = r.tables[g][j];
      BlockMeta& b = pools_[g].blocks[slot];
      const uint16_t target = static_cast<uint16_t>(std::min(P, a.valid_through - j * P));
      if (b.valid_rows < target) {
        set_valid_rows(g, slot, target);
        out.published_entries.push_back(TableEntryUpdate{j, handle_of(g, slot), target});
      }
    }
  set_request_counters(index, r.table_version + 1, r.context_tokens);
  finish_receipt(out, &r, index);
  return Status::success();
}

}  // namespace kvrt
