#pragma once
// The range checks of a PrefixPublishOp that both index owners make before
// they read the request's table: full blocks [first_block, end_block) inside
// the tokens, and a partial tail (tail_rows, 0x07D) only where the node's
// policy publishes tails, shorter than a block and covered by the tokens.
#include <cstdint>

#include "schema/prefix_types.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// Errors: invalid_argument on first_block, end_block or tail_rows.
Status check_publication_range(const PrefixPublishOp& op, uint32_t block_tokens, bool publishes_tails);

}  // namespace kvrt
