#pragma once
// A templated job of the workload (Prompt Cache, 0x0CB) as the engine
// serves it: its items in declared position order are stored one after
// another, so each item is one segment of rows (declared_prompt_rows.hpp),
// and the node is asked to assemble it from the same items.
#include <vector>

#include "engine/model/declared_prompt_rows.hpp"
#include "schema/reuse_types.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt::engine {

// The rows of a templated prompt, one segment per item (a module computed
// alone, or free text), in storage order.
std::vector<model::DeclaredSegmentRows> declared_segments(const workload::TemplatedPrompt& prompt);

// The node's assembly request for the prompt, against its schema.
PromptAssembleRequest assemble_request(const workload::Job& job, const workload::TemplatedSchema& schema,
                                       const TraceContext& trace);

}  // namespace kvrt::engine
