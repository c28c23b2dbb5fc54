#include "services/prefix/publication_range.hpp"

#include <string>

namespace kvrt {

Status check_publication_range(const PrefixPublishOp& op, uint32_t block_tokens, bool publishes_tails) {
  const uint32_t P = block_tokens;
  if (op.first_block > op.end_block)
    return make_error(ErrorCode::invalid_argument, "first_block after end_block", "first_block");
  if (uint64_t{op.end_block} * P > op.tokens.size())
    return make_error(ErrorCode::invalid_argument, "only full blocks are published", "end_block");
  if (op.tail_rows == 0) return Status::success();
  if (!publishes_tails)
    return make_error(ErrorCode::invalid_argument,
                      "the node's reuse policy is full_block: partial tails are not published (0x07D)", "tail_rows");
  if (op.tail_rows >= P)
    return make_error(ErrorCode::invalid_argument,
                      "a partial tail holds 0 < v < P rows; got " + std::to_string(op.tail_rows), "tail_rows");
  if (uint64_t{op.end_block} * P + op.tail_rows > op.tokens.size())
    return make_error(ErrorCode::invalid_argument, "the tail's rows lie beyond the request's tokens", "tail_rows");
  return Status::success();
}

}  // namespace kvrt
