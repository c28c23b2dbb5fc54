#pragma once
// Hydragen (spec 0x0BC): for every chunk of the snapshot, batch all the query
// rows its coverage names (coverage x G rows per K/V head) into one
// matrix-matrix product against the chunk's K/V, emit each row's
// (O, LSE) coordinates for that chunk, then merge every sequence's path
// partitions with the LSE merge:
//
//   for chunk c, K/V head h:  Q_group = Q[coverage(c)] heads of h
//                             (O, LSE)[s, c] = attention_with_lse(Q_group, K_c, V_c)
//   for sequence s:           O_s = merge_lse((O, LSE)[s, c] for c in path(s))
//
// A chunk covering one sequence still runs as its own partition (the rows
// kernel: G rows are too few for the tile kernel). Every sequence's logical
// query-key pairs are unchanged; the gain is that a shared chunk's K/V is
// loaded once per product instead of once per sequence (0x0BC).
#include "services/common/result.hpp"
#include "services/executor/shared_prefix_args.hpp"

namespace kvrt::executor {

// Errors (before any write): those of check_shared_prefix_args.
Result<SharedPrefixReceipt> hydragen_attention(const PagedKvView& view, const SharedPrefixArgs& args,
                                               ThreadPool* pool = nullptr, Workspace* workspace = nullptr);
Result<SharedPrefixReceipt> hydragen_attention(const PagedKvView& view, const SharedPrefixArgs64& args,
                                               ThreadPool* pool = nullptr, Workspace* workspace = nullptr);

}  // namespace kvrt::executor
