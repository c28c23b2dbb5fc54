// libkvrt: Prompt Cache (0x0CB) of api/kvrt.h: schemas, assemblies (the
// library keeps each reused module's receipt and leases under a handle),
// module copies into an admitted request, publications.
#include "api/kvrt_c_session.hpp"

using namespace kvrt;

extern "C" {

// ---- Prompt Cache (0x0CB) ------------------------------------------------

namespace {

// The parameters of an item or a publication, or invalid_argument naming `field`.
Result<std::vector<PromptParameter>> prompt_parameters(const kvrt_prompt_parameter* p, size_t n,
                                                       const std::string& field) {
  if (n > 0 && p == nullptr) return make_error(ErrorCode::invalid_argument, "parameters are NULL", field);
  std::vector<PromptParameter> out;
  for (size_t i = 0; i < n; ++i) {
    if (p[i].name == nullptr || p[i].value == nullptr)
      return make_error(ErrorCode::invalid_argument, "a parameter needs a name and a value",
                        field + "[" + std::to_string(i) + "]");
    out.push_back(PromptParameter{p[i].name, p[i].value});
  }
  return out;
}

Result<std::vector<TokenId>> prompt_tokens(const int32_t* tokens, size_t n, const std::string& field) {
  if (n > 0 && tokens == nullptr) return make_error(ErrorCode::invalid_argument, "tokens are NULL", field);
  return std::vector<TokenId>(tokens, tokens + n);
}

bool has_text(const char* s) { return s != nullptr && *s != '\0'; }

using HeldModule = std::map<uint64_t, PromptModuleUse>::iterator;

// The reused module `module` that this session holds, or unknown_lease.
Result<HeldModule> held_module(kvrt_session* s, uint64_t module) {
  const auto it = s->prompt_modules.find(module);
  if (it == s->prompt_modules.end())
    return make_error(ErrorCode::unknown_lease,
                      "module " + std::to_string(module) + " is no reused module this session holds", "module");
  return it;
}

// Forgets a reused module and gives its leases back through the allocator
// (the session's leases; its end would give back what is left).
Status spend_module(kvrt_session* s, HeldModule it) {
  AllocatorBatch batch{next_trace(s), {}};
  for (uint64_t l : it->second.leases) batch.ops.emplace_back(std::in_place_type<ReleaseLeaseOp>, LeaseId{l});
  s->prompt_modules.erase(it);
  if (batch.ops.empty()) return Status::success();
  Result<AllocatorBatchReceipt> answer = s->engine->allocator(batch);
  if (!answer.ok()) return answer.error();
  for (const AllocatorOutcome& o : answer->outcomes)
    if (const auto* e = std::get_if<Error>(&o)) return *e;
  return Status::success();
}

}  // namespace

int32_t kvrt_register_prompt_schema(kvrt_session* s, const char* namespace_name, const char* schema_toml,
                                    uint64_t* generation, kvrt_error* error) try {
  if (s == nullptr || !has_text(namespace_name) || schema_toml == nullptr)
    return bad(error, "session, namespace_name and schema_toml are required", "schema_toml");
  Result<PromptSchemaReceipt> r =
      s->engine->register_prompt_schema(PromptSchemaRequest{next_trace(s), namespace_name, schema_toml});
  if (!r.ok()) return fail(error, r.error());
  if (generation != nullptr) *generation = r->generation;
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "register_prompt_schema", e);
}

int32_t kvrt_assemble_prompt(kvrt_session* s, const char* namespace_name, const char* schema_id,
                             uint64_t schema_generation, const kvrt_prompt_item* items, size_t count,
                             kvrt_prompt_segment* out, kvrt_error* error) try {
  if (s == nullptr || !has_text(namespace_name) || !has_text(schema_id))
    return bad(error, "session, namespace_name and schema_id are required", "schema_id");
  if (count == 0 || items == nullptr || out == nullptr) return bad(error, "items and out are required", "items");
  PromptAssembleRequest ask{next_trace(s), namespace_name, schema_id, schema_generation, {}};
  for (size_t i = 0; i < count; ++i) {
    const kvrt_prompt_item& item = items[i];
    const std::string at = "items[" + std::to_string(i) + "]";
    PromptItemSpec spec;
    spec.module_id = has_text(item.module_id) ? item.module_id : "";
    Result<std::vector<PromptParameter>> params =
        prompt_parameters(item.parameters, item.parameter_count, at + ".parameters");
    if (!params.ok()) return fail(error, params.error());
    spec.parameters = std::move(*params);
    Result<std::vector<TokenId>> tokens = prompt_tokens(item.tokens, item.token_count, at + ".tokens");
    if (!tokens.ok()) return fail(error, tokens.error());
    spec.tokens = std::move(*tokens);
    spec.gap_begin = item.gap_begin;
    spec.use_cache = item.use_cache != 0;
    ask.items.push_back(std::move(spec));
  }
  Result<PromptAssemblyReceipt> r = s->engine->assemble_prompt(ask);
  if (!r.ok()) return fail(error, r.error());
  if (r->segments.size() != count)
    return fail(error, make_error(ErrorCode::invariant_violated, "the node answered another segment count", "out"));
  for (size_t i = 0; i < count; ++i) {
    PromptSegment& seg = r->segments[i];
    kvrt_prompt_segment& o = out[i];
    o = kvrt_prompt_segment{seg.item, seg.position_begin, seg.tokens, KVRT_PROMPT_COMPUTED, -1, 0};
    if (auto* use = std::get_if<PromptModuleUse>(&seg.outcome)) {
      o.outcome = KVRT_PROMPT_REUSED;
      o.module = ++s->next_prompt_module;
      s->prompt_modules[o.module] = std::move(*use);
    } else if (const auto* miss = std::get_if<PromptModuleMiss>(&seg.outcome)) {
      o.outcome = KVRT_PROMPT_MISSED;
      o.miss_reason = static_cast<int32_t>(miss->reason);
    }
  }
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "assemble_prompt", e);
}

int32_t kvrt_copy_prompt_module(kvrt_session* s, uint64_t module, uint64_t request, uint32_t row_begin,
                                kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  Result<HeldModule> held = held_module(s, module);
  if (!held.ok()) return fail(error, held.error());
  Result<kvrt_session::Live*> live = live_request(s, request, "request");
  if (!live.ok()) return fail(error, live.error());
  const PromptModuleUse& use = (*held)->second;
  const uint32_t P = s->pools->block_tokens(), groups = s->pools->group_count();
  const uint64_t n = use.receipt.token_ids.size();
  if (use.handles.size() != (n + P - 1) / P * groups)
    return fail(error, make_error(ErrorCode::invariant_violated, "a module's handles are not its blocks", "module"));
  // Every destination row first: a refused copy writes nothing.
  if (Status held = table_holds_rows(*s, **live, uint64_t{row_begin} + n, "row_begin"); !held.ok())
    return fail(error, held.error());
  const std::vector<std::vector<uint32_t>>& table = (*live)->table;
  std::vector<uint8_t> row;
  for (uint32_t g = 0; g < groups; ++g) {
    row.resize(s->pools->row_bytes(g));
    for (uint64_t t = 0; t < n; ++t) {
      const PhysicalBlockHandle& h = use.handles[(t / P) * groups + g];
      const uint64_t to = row_begin + t;
      s->pools->read_rows(group_index_of(s, h.group), h.block.value, static_cast<uint32_t>(t % P), 1, row);
      s->pools->write_rows(g, table[g][to / P], static_cast<uint32_t>(to % P), 1, row);
    }
  }
  if (Status back = spend_module(s, *held); !back.ok()) return fail(error, back.error());
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "copy_prompt_module", e);
}

int32_t kvrt_release_prompt_module(kvrt_session* s, uint64_t module, kvrt_error* error) try {
  if (s == nullptr) return bad(error, "session is NULL", "session");
  Result<HeldModule> held = held_module(s, module);
  if (!held.ok()) return fail(error, held.error());
  if (Status back = spend_module(s, *held); !back.ok()) return fail(error, back.error());
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "release_prompt_module", e);
}

int32_t kvrt_publish_prompt_module(kvrt_session* s, const char* namespace_name, const char* schema_id,
                                   uint64_t schema_generation, const char* module_id,
                                   const kvrt_prompt_parameter* parameters, size_t parameter_count,
                                   const int32_t* tokens, size_t token_count, uint64_t request, kvrt_error* error) try {
  if (s == nullptr || !has_text(namespace_name) || !has_text(schema_id) || !has_text(module_id))
    return bad(error, "session, namespace_name, schema_id and module_id are required", "module_id");
  PromptModulePublishRequest ask;
  ask.trace = next_trace(s);
  ask.namespace_name = namespace_name;
  ask.schema_id = schema_id;
  ask.schema_generation = schema_generation;
  ask.module_id = module_id;
  Result<std::vector<PromptParameter>> params = prompt_parameters(parameters, parameter_count, "parameters");
  if (!params.ok()) return fail(error, params.error());
  ask.parameters = std::move(*params);
  Result<std::vector<TokenId>> t = prompt_tokens(tokens, token_count, "tokens");
  if (!t.ok()) return fail(error, t.error());
  ask.tokens = std::move(*t);
  ask.request = RequestId{request};
  Result<PromptModulePublishReceipt> r = s->engine->publish_prompt_module(ask);
  if (!r.ok()) return fail(error, r.error());
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "publish_prompt_module", e);
}

}  // extern "C"
