// The mapper's one-step-ahead plan (spec 0x06D: "decode growth is predictable
// one iteration ahead: each decode request adds at most one token"). Pure
// reads of the core's state: the plan mirrors step()'s choices so that a
// PrefetchingBacking can perform those OS mappings before step() asks for
// them. If anything changes in between (a free, an unmap, a different batch),
// step() simply decides differently and the backing maps synchronously: the
// plan is a timing hint, never an input to a decision.
#include "services/mapper/vmm_mapper.hpp"

namespace kvrt {

std::vector<PlannedMapping> VmmMapper::plan_frontier_mappings(const std::vector<StepRequest>& next) const {
  std::vector<PlannedMapping> plan;
  if (phase_ != MapperPhase::va_reserved) return plan;
  plan.reserve(2 * geometry_.tensor_count());  // decode: about one crossing per step
  const uint64_t g = geometry_.config().page_group_bytes;
  const uint32_t tensors = geometry_.tensor_count();
  // step() takes the lowest free handles first (take_free_bundle), so walking
  // the ordered free set in order reproduces its choices.
  auto free_it = free_handles_.begin();
  uint64_t free_left = free_handles_.size();
  // This runs on the owner thread after every step, so its cost counts
  // against what prefetching hides: one small vector, no hashing.
  std::vector<bool> planned_slot(slots_.size(), false);
  for (const StepRequest& r : next) {
    // Skip what step() would reject; it would then map nothing at all, and the
    // prefetched pages are revoked or replaced (prefetching_backing.hpp).
    if (r.target_tokens > geometry_.config().max_tokens) continue;
    int found = -1;
    for (uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].active && slots_[s].request == r.request) found = static_cast<int>(s);
    if (found < 0 || planned_slot[found] || r.target_tokens < slots_[found].valid_tokens) continue;
    const uint32_t s = static_cast<uint32_t>(found);
    planned_slot[s] = true;
    const uint32_t needed = geometry_.pages_for_tokens(r.target_tokens);
    for (uint32_t page = static_cast<uint32_t>(slots_[s].pages.size()); page < needed; ++page) {
      // A missing free bundle means step() reclaims an inactive slot's page
      // first; that unmap changes what the core reports, so it is not planned.
      if (free_left < tensors) return plan;
      for (uint32_t t = 0; t < tensors; ++t, ++free_it, --free_left)
        plan.push_back(PlannedMapping{geometry_.page_offset(t, s, page), *free_it * g, g});
    }
  }
  return plan;
}

std::vector<StepRequest> next_decode_step(const std::vector<StepRequest>& published, uint32_t max_tokens) {
  std::vector<StepRequest> next = published;
  for (StepRequest& r : next)
    if (r.target_tokens < max_tokens) ++r.target_tokens;
  return next;
}

}  // namespace kvrt
