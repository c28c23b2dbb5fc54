// VmmMapper's ledgers (0x06A), receipts (0x06D) and validator, which tests
// run after every transition (habit 2, docs/conventions.md).
#include <map>
#include <string>

#include "services/mapper/vmm_mapper.hpp"

namespace kvrt {
namespace {

Error broken(std::string reason, std::string field) {
  return make_error(ErrorCode::invariant_violated, std::move(reason), std::move(field));
}

}  // namespace

MappingLedger VmmMapper::ledger() const {
  MappingLedger l;
  if (phase_ != MapperPhase::va_reserved) return l;  // VA_RELEASED: nothing reserved, nothing created
  const uint64_t bundle = geometry_.bundle_bytes();
  l.virtual_reserved_bytes = geometry_.virtual_reserved_bytes();
  l.physical_pool_bytes = geometry_.physical_pool_bytes();
  for (const SlotRecord& s : slots_) {
    const uint64_t mapped = s.pages.size() * bundle;
    l.mapped_bytes += mapped;
    if (s.active) {
      const uint64_t valid = uint64_t{s.valid_tokens} * geometry_.row_bytes() * geometry_.tensor_count();
      l.active_valid_bytes += valid;
      l.active_slack_bytes += mapped - valid;
    } else {
      l.inactive_retained_bytes += mapped;
    }
  }
  l.free_handle_bytes = free_handles_.size() * geometry_.config().page_group_bytes;
  return l;
}

MultisetDigest::Entry VmmMapper::header_entry() const {
  return {1, static_cast<uint64_t>(phase_), bundle_maps_, bundle_unmaps_};
}

MultisetDigest::Entry VmmMapper::slot_frontier_entry(uint32_t s) const {
  const SlotRecord& r = slots_[s];
  return {2, s, r.generation.value, (uint64_t{r.valid_tokens} << 32) | r.target_tokens};
}

MultisetDigest::Entry VmmMapper::slot_binding_entry(uint32_t s) const {
  const SlotRecord& r = slots_[s];
  return {3, s, r.active ? r.request.value : ~0ull, (uint64_t{r.request_generation.value} << 1) | r.active};
}

MultisetDigest::Entry VmmMapper::handle_entry(uint64_t h) const {
  const HandleRecord& r = handles_[h];
  return {4, h, (uint64_t{r.slot.value} << 40) | (uint64_t{r.tensor} << 8) | static_cast<uint64_t>(r.state),
          (uint64_t{r.page} << 32) | r.generation.value};
}

StateDigest VmmMapper::recompute_digest() const {
  MultisetDigest d;
  d.add(header_entry());
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    d.add(slot_frontier_entry(s));
    d.add(slot_binding_entry(s));
  }
  for (uint64_t h = 0; h < handles_.size(); ++h) d.add(handle_entry(h));
  return d.value();
}

Status VmmMapper::validate() const {
  if (recompute_digest() != state_digest())
    return broken("incremental digest " + state_digest().hex() + " != recomputed " + recompute_digest().hex(),
                  "digest");
  const uint32_t tensors = geometry_.tensor_count();
  const uint64_t g = geometry_.config().page_group_bytes;
  if (phase_ == MapperPhase::va_released) {
    for (const HandleRecord& h : handles_)
      if (h.state != HandleState::released) return broken("handle alive after shutdown", "handles");
    for (const SlotRecord& s : slots_)
      if (s.active || !s.pages.empty()) return broken("slot alive after shutdown", "slots");
    return Status::success();
  }
  if (phase_ != MapperPhase::va_reserved) return broken("mapper not reserved", "phase");
  // Page tables and handle records must describe the same mapping, both ways.
  uint64_t mapped_handles = 0;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    const SlotRecord& slot = slots_[s];
    if (slot.pages.size() > geometry_.pages_per_slot()) return broken("slot maps beyond R", "pages");
    if (!slot.active && (slot.valid_tokens != 0 || slot.target_tokens != 0))
      return broken("inactive slot " + std::to_string(s) + " claims valid rows", "valid_tokens");
    if (slot.valid_tokens > slot.pages.size() * geometry_.tokens_per_page())
      return broken("slot " + std::to_string(s) + " has valid rows outside its mapping", "valid_tokens");
    for (uint32_t q = 0; q < slot.pages.size(); ++q) {
      if (slot.pages[q].size() != tensors) return broken("half-mapped page bundle", "pages");
      for (uint32_t t = 0; t < tensors; ++t) {
        const uint64_t id = slot.pages[q][t].value;
        if (id >= handles_.size()) return broken("unknown handle in page table", "pages");
        const HandleRecord& h = handles_[id];
        if (h.state != HandleState::mapped || h.slot.value != s || h.tensor != t || h.page != q)
          return broken("handle " + std::to_string(id) + " disagrees with slot " + std::to_string(s) + " page " +
                            std::to_string(q),
                        "handles");
        if (free_handles_.count(id) != 0) return broken("mapped handle on the free list", "free_handles");
        ++mapped_handles;
      }
    }
  }
  uint64_t states_mapped = 0;
  for (uint64_t h = 0; h < handles_.size(); ++h) {
    if (handles_[h].state == HandleState::mapped) ++states_mapped;
    if (handles_[h].state == HandleState::released) return broken("released handle before shutdown", "handles");
    if (handles_[h].state == HandleState::created_free && free_handles_.count(h) == 0)
      return broken("free handle missing from the free list", "free_handles");
  }
  if (states_mapped != mapped_handles) return broken("a mapped handle belongs to no page table", "handles");
  // 0x06A reconciliations; M_VA appears in neither.
  const MappingLedger l = ledger();
  if (l.mapped_bytes != mapped_handles * g) return broken("M_mapped != mapped handles * G", "mapped_bytes");
  if (l.mapped_bytes != l.active_valid_bytes + l.active_slack_bytes + l.inactive_retained_bytes)
    return make_error(ErrorCode::ledger_identity_broken, "M_mapped != active valid + slack + retained", "mapped_bytes");
  if (l.physical_pool_bytes != l.mapped_bytes + l.free_handle_bytes)
    return make_error(ErrorCode::ledger_identity_broken, "M_phys,pool != M_mapped + free handles",
                      "physical_pool_bytes");
  if (l.virtual_reserved_bytes != uint64_t{tensors} * geometry_.config().request_slots * geometry_.slot_range_bytes())
    return broken("M_VA != 2LBR", "virtual_reserved_bytes");
  return Status::success();
}

MappedFrontierReceipt VmmMapper::make_receipt(uint32_t s, MappingPath path, const MappingLedger& ledger_after) const {
  const SlotRecord& slot = slots_[s];
  MappedFrontierReceipt r;
  r.request_id = slot.request;
  r.request_generation = slot.request_generation;
  r.request_slot = RequestSlot{s};
  r.slot_generation = slot.generation;
  r.mapper_epoch = epoch_;
  r.local_layers = geometry_.config().local_layers;
  r.page_group_bytes = geometry_.config().page_group_bytes;
  r.tokens_per_page = geometry_.tokens_per_page();
  r.target_tokens = slot.target_tokens;
  r.mapped_pages = static_cast<uint32_t>(slot.pages.size());
  r.valid_tokens = slot.valid_tokens;
  r.retained_mapping_reused = reused_retained_[s];
  r.old_kv_semantically_valid = false;  // never across owners (0x06E)
  r.mapping_path = path;
  r.ready_before_use = true;  // every bundle above was mapped before publication (0x06D)
  r.ledger = ledger_after;
  return r;
}

Status VmmMapper::verify_receipt(const MappedFrontierReceipt& r) const {
  KVRT_TRY(require_reserved());
  uint32_t s = 0;
  KVRT_TRY_ASSIGN(s, find_active(r.request_id, r.slot_generation));
  const SlotRecord& slot = slots_[s];
  if (r.request_slot.value != s)
    return make_error(ErrorCode::stale_slot_generation, "receipt names another slot", "request_slot");
  if (r.request_generation != slot.request_generation)
    return make_error(ErrorCode::stale_generation, "receipt of another request generation", "request_generation");
  if (r.local_layers != geometry_.config().local_layers || r.page_group_bytes != geometry_.config().page_group_bytes ||
      r.tokens_per_page != geometry_.tokens_per_page())
    return make_error(ErrorCode::incompatible, "receipt geometry differs from the mapper's", "page_group_bytes");
  if (r.old_kv_semantically_valid || r.valid_tokens > slot.valid_tokens)
    return make_error(ErrorCode::rows_not_valid,
                      "a retained mapping is reusable capacity, never an exact-prefix hit (0x06E)",
                      "old_kv_semantically_valid");
  // Every page this receipt maps must appear in all 2L tensors at once (0x06D).
  std::map<uint32_t, uint32_t> tensors_per_page;
  for (const PageMapping& m : r.new_mappings) {
    if (m.local_layer >= geometry_.config().local_layers)
      return make_error(ErrorCode::coordinate_out_of_range, "mapping layer", "new_mappings");
    ++tensors_per_page[m.page_index];
  }
  for (const auto& [page, count] : tensors_per_page)
    if (count != geometry_.tensor_count())
      return make_error(ErrorCode::half_mapped_frontier,
                        "page q=" + std::to_string(page) + " is mapped in " + std::to_string(count) + " of " +
                            std::to_string(geometry_.tensor_count()) + " K/V layer tensors",
                        "new_mappings");
  for (const PageMapping& m : r.new_mappings) {
    const uint32_t t = geometry_.tensor_index(m.local_layer, m.tensor);
    const bool current = m.page_index < slot.pages.size() && slot.pages[m.page_index][t] == m.handle &&
                         handles_[m.handle.value].generation == m.handle_generation;
    if (!current)
      return make_error(
          ErrorCode::stale_generation,
          "handle " + std::to_string(m.handle.value) + " no longer backs page q=" + std::to_string(m.page_index),
          "new_mappings");
  }
  if (!r.ready_before_use || r.mapped_pages > slot.pages.size() ||
      uint64_t{r.mapped_pages} * geometry_.tokens_per_page() < r.target_tokens)
    return make_error(ErrorCode::page_not_mapped, "receipt frontier is not backed", "mapped_pages");
  return Status::success();
}

}  // namespace kvrt
