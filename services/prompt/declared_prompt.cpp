#include "services/prompt/declared_prompt.hpp"

#include <algorithm>
#include <set>

namespace kvrt {
namespace {

std::vector<uint32_t> token_ids_of(const std::vector<TokenId>& tokens) {
  std::vector<uint32_t> out(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) out[i] = static_cast<uint32_t>(tokens[i]);
  return out;
}

Error item_error(size_t i, const std::string& why) {
  return make_error(ErrorCode::invalid_argument, why, "items[" + std::to_string(i) + "]");
}

// The first factor of H_module that fails, in the order T, Pi, S, A, then
// the namespace; nullopt: a hit.
std::optional<std::pair<RejectionReason, std::string>> miss_of(const PromptModuleReceipt& r, const AssembledSegment& s,
                                                               const PromptSchema& schema,
                                                               const PromptAssemblyContext& c) {
  using R = RejectionReason;
  if (r.token_ids != token_ids_of(s.tokens)) return std::pair{R::module_position_mismatch, "tokens (T) differ"};
  if (r.position_ids != s.positions)
    return std::pair{R::module_position_mismatch, "computed at positions [" + std::to_string(r.position_ids.front()) +
                                                      ", " + std::to_string(r.position_ids.back() + 1) +
                                                      "), declared at [" + std::to_string(s.positions.front()) + ", " +
                                                      std::to_string(s.positions.back() + 1) + ") (Pi)"};
  if (r.schema_id != schema.schema_id || r.schema_generation != schema.generation)
    return std::pair{R::module_position_mismatch, "schema generation " + std::to_string(r.schema_generation) +
                                                      ", now " + std::to_string(schema.generation) + " (S)"};
  if (r.semantic_manifest_digest != c.semantic_digest) return std::pair{R::semantic_mismatch, "cache ABI (A) differs"};
  if (r.layout_manifest_digest != c.layout_digest) return std::pair{R::layout_mismatch, "layout differs"};
  if (r.namespace_id != c.namespace_id) return std::pair{R::isolation_mismatch, "another namespace"};
  if (r.namespace_generation != c.namespace_generation)
    return std::pair{R::stale_candidate_generation,
                     "computed under namespace generation " + std::to_string(r.namespace_generation.value)};
  return std::nullopt;
}

}  // namespace

std::vector<TokenId> AssembledPrompt::tokens() const {
  std::vector<TokenId> out;
  for (const AssembledSegment& s : segments) out.insert(out.end(), s.tokens.begin(), s.tokens.end());
  return out;
}

std::vector<uint32_t> AssembledPrompt::positions() const {
  std::vector<uint32_t> out;
  for (const AssembledSegment& s : segments) out.insert(out.end(), s.positions.begin(), s.positions.end());
  return out;
}

Result<AssembledPrompt> assemble_declared_prompt(const DeclaredPrompt& prompt, const PromptSchema& schema,
                                                 const PromptModuleStore& store, const PromptAssemblyContext& context) {
  if (prompt.schema_id != schema.schema_id || prompt.schema_generation != schema.generation)
    return make_error(ErrorCode::stale_generation,
                      "the prompt names schema \"" + prompt.schema_id + "\" generation " +
                          std::to_string(prompt.schema_generation) + "; registered is \"" + schema.schema_id +
                          "\" generation " + std::to_string(schema.generation),
                      "schema_generation");
  AssembledPrompt out;
  std::set<std::string> used;
  for (size_t i = 0; i < prompt.items.size(); ++i) {
    const PromptItem& item = prompt.items[i];
    if (item.tokens.empty()) return item_error(i, "an item with no tokens");
    AssembledSegment s;
    s.module_id = item.module_id;
    s.tokens = item.tokens;
    uint32_t begin = item.gap_begin;
    if (!item.module_id.empty()) {
      const DeclaredModule* m = schema.find(item.module_id);
      if (m == nullptr) return item_error(i, "module \"" + item.module_id + "\" is not declared by the schema");
      if (!used.insert(item.module_id).second) return item_error(i, "module \"" + item.module_id + "\" is used twice");
      for (const auto& [name, value] : item.parameters)
        if (std::find(m->parameters.begin(), m->parameters.end(), name) == m->parameters.end())
          return item_error(i, "module \"" + item.module_id + "\" declares no parameter \"" + name + "\"");
      if (item.tokens.size() > m->position_end - m->position_begin)
        return item_error(i, "module \"" + item.module_id + "\" renders " + std::to_string(item.tokens.size()) +
                                 " tokens into a range of " + std::to_string(m->position_end - m->position_begin));
      begin = m->position_begin;
    } else {
      // Free text lies in a gap: no declared module range holds any of its positions.
      const uint64_t end = uint64_t{item.gap_begin} + item.tokens.size();
      if (end > UINT32_MAX) return item_error(i, "free text runs past position 2^32");
      for (const DeclaredModule& m : schema.modules)
        if (item.gap_begin < m.position_end && end > m.position_begin)
          return item_error(i, "free text at [" + std::to_string(item.gap_begin) + ", " + std::to_string(end) +
                                   ") lies in module \"" + m.id + "\"'s declared range");
    }
    for (uint32_t k = 0; k < item.tokens.size(); ++k) s.positions.push_back(begin + k);
    if (!item.module_id.empty() && item.use_cache) {
      const PromptModuleReceipt* r = store.lookup(context.namespace_id, schema.schema_id, item.module_id,
                                                  module_parameters_digest(item.parameters));
      if (r == nullptr) {
        s.miss = RejectionReason::no_candidate;
        s.miss_detail = "not computed yet with these parameters";
      } else if (auto miss = miss_of(*r, s, schema, context)) {
        s.miss = miss->first;
        s.miss_detail = std::move(miss->second);
      } else {
        s.reused = *r;
      }
    }
    (s.reused ? out.reused_tokens : out.computed_tokens) += s.tokens.size();
    out.segments.push_back(std::move(s));
  }
  // Concatenated in declared position order; items may not overlap.
  std::sort(out.segments.begin(), out.segments.end(), [](const AssembledSegment& a, const AssembledSegment& b) {
    return a.positions.front() < b.positions.front();
  });
  for (size_t i = 1; i < out.segments.size(); ++i)
    if (out.segments[i].positions.front() <= out.segments[i - 1].positions.back())
      return make_error(ErrorCode::invalid_argument,
                        "items at position " + std::to_string(out.segments[i].positions.front()) + " overlap", "items");
  return out;
}

PromptModuleReceipt module_receipt_for(const AssembledSegment& segment, const PromptItem& item,
                                       const PromptSchema& schema, const PromptAssemblyContext& context) {
  PromptModuleReceipt r;
  r.schema_id = schema.schema_id;
  r.schema_generation = schema.generation;
  r.module_id = item.module_id;
  r.module_parameters_digest = module_parameters_digest(item.parameters);
  r.token_ids = token_ids_of(segment.tokens);
  r.position_ids = segment.positions;
  r.semantic_manifest_digest = context.semantic_digest;
  r.layout_manifest_digest = context.layout_digest;
  r.namespace_id = context.namespace_id;
  r.namespace_generation = context.namespace_generation;
  return r;
}

}  // namespace kvrt
