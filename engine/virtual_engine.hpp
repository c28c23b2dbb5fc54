#pragma once
// The engine loop of `kvrt run` over virtual reservations (vAttention,
// spec 0x06): used when the node's layout declares physical_mode =
// "virtual_pages". Every request is bound to a request slot of the node's
// mapper owner (alloc_reqid), each iteration steps every active frontier to
// the rows the next forward writes and one beyond (step, map before use and
// map ahead: 0x06D), the worker maps the receipts' pages into its own view
// of the same memfd pool (those needed now at once, the rest on a background
// thread behind the forward or the verification) and
// runs the model over the slot's contiguous range (VirtualModelKvCache),
// reports the rows written (append) and, when a request finishes, frees its
// slot with its pages retained for the next owner (0x06E: capacity, not
// prefix identity — a new owner writes its own rows).
//
// Prefix reuse (with `pools`, the node's block pools as a model cache): a
// retained mapping is capacity, never an exact-prefix hit (0x06E), so
// identity comes from the index as in the paged loop. Each new request is
// admitted through the executable-reuse transaction once its slot is stepped
// over its prompt; the hit's rows are read in the pools and copied into the
// slot, so the node's step 7 checks that the slot's published frontier covers
// them (short: the funnel's mapping_lag, and the request computes every
// row). The admission also allocates the prompt's blocks in the pools; after
// the prefill the slot's computed prompt rows are copied there, committed
// and published (as the attempt's successor after a hit), so other workers
// find them. Forks are not shared: each branch prefills its prompt.
//
// The exactness verdict is the paged loop's: every request replayed without
// reuse in a private cache, tokens identical and every row bitwise equal
// (reused rows counted separately).
#include <vector>

#include "engine/engine_session.hpp"
#include "engine/engine_worker.hpp"
#include "engine/virtual_model_kv_cache.hpp"

namespace kvrt::engine {

// Serves `jobs` through `session`'s mapper owner. A lost session (node_lost,
// session_ended) sends the rest of the share down the private path when
// options.serve_privately_on_loss, and is the run's error otherwise. Other
// errors: the round trips', a receipt that does not answer its batch
// (invariant_violated), run_stalled when the mapper cannot back the
// requests for 30 s.
// `pools`: the node's block pools mapped as a cache, or null for no reuse
// (options.reuse is then ignored).
Result<EngineResult> run_virtual_engine(EngineSession& session, MapperPoolView& view, VirtualModelKvCache& cache,
                                        model::ModelKvCache* pools, const model::ReferenceModel& model,
                                        const EngineOptions& options, std::vector<const workload::Job*> jobs);

}  // namespace kvrt::engine
