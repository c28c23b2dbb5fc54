#include "engine/templated_prompt.hpp"

namespace kvrt::engine {

std::vector<model::DeclaredSegmentRows> declared_segments(const workload::TemplatedPrompt& prompt) {
  std::vector<model::DeclaredSegmentRows> out;
  uint32_t row = 0;
  for (const workload::TemplatedItem& item : prompt.items) {
    const uint32_t rows = static_cast<uint32_t>(item.tokens.size());
    out.push_back(model::DeclaredSegmentRows{row, rows, item.position_begin, !item.module_id.empty()});
    row += rows;
  }
  return out;
}

PromptAssembleRequest assemble_request(const workload::Job& job, const workload::TemplatedSchema& schema,
                                       const TraceContext& trace) {
  PromptAssembleRequest r;
  r.trace = trace;
  r.namespace_name = job.namespace_name;
  r.schema_id = schema.schema_id;
  r.schema_generation = schema.generation;
  for (const workload::TemplatedItem& item : job.templated->items) {
    PromptItemSpec spec;
    spec.module_id = item.module_id;
    for (const auto& [name, value] : item.parameters) spec.parameters.push_back(PromptParameter{name, value});
    spec.tokens = item.tokens;
    spec.gap_begin = item.module_id.empty() ? item.position_begin : 0;
    spec.use_cache = true;
    r.items.push_back(std::move(spec));
  }
  return r;
}

}  // namespace kvrt::engine
