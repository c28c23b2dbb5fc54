#pragma once
// MappedFrontierReceipt (spec 0x06B-0x06F) is declared in schema/mapper.capnp:
// the mapper's proof that a request slot's virtual K/V range is physically
// backed up to a frontier, for all 2 L tensors of the slot, so that a kernel
// may dereference rows below it. This is the check a consumer makes.
#include <cstdint>

#include "schema/mapper_types.hpp"

namespace kvrt {

// covers(receipt, request_generation, target_tokens) of 0x06D: the kernel may
// read rows [0, tokens) of this request generation.
inline bool covers(const MappedFrontierReceipt& r, RequestGeneration generation, uint32_t tokens) {
  return r.ready_before_use && generation == r.request_generation &&
         uint64_t{r.mapped_pages} * r.tokens_per_page >= tokens;
}

}  // namespace kvrt
