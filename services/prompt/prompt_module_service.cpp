#include "services/prompt/prompt_module_service.hpp"

#include <algorithm>

#include "services/reuse/reuse_evidence.hpp"

namespace kvrt {

namespace {

std::map<std::string, std::string> parameters_of(const std::vector<PromptParameter>& list) {
  std::map<std::string, std::string> out;
  for (const PromptParameter& p : list) out[p.name] = p.value;
  return out;
}

Error duplicate_parameter(const std::vector<PromptParameter>& list, const std::string& field) {
  std::vector<std::string> names;
  for (const PromptParameter& p : list) names.push_back(p.name);
  std::sort(names.begin(), names.end());
  const auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice == names.end()) return Error{};
  return make_error(ErrorCode::invalid_argument, "parameter \"" + *twice + "\" is given twice", field);
}

// The grant and the generation's key, or the authorization's refusal.
Result<std::pair<const AuthorizedLookup*, const KeyEvidence*>> authorized(const ReuseKeyAnswer& key) {
  if (const auto* denied = std::get_if<AuthorizationDenied>(&key.authorization)) return denied->error;
  if (!key.key)
    return make_error(ErrorCode::invalid_argument, "no compatibility key could be built for these tokens", "tokens");
  return std::pair{&std::get<AuthorizedLookup>(key.authorization), &*key.key};
}

PromptAssemblyContext context_of(const AuthorizedLookup& grant, const KeyEvidence& key) {
  return PromptAssemblyContext{grant.namespace_name(), grant.generation(), reuse_semantic_digest(key.manifest),
                               key.manifest.cache_layout_sha256};
}

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

Sha256Digest prompt_schema_digest(const PromptSchema& schema) {
  CanonicalWriter w("kvrt.PromptSchema.v1");
  w.str("schema_id", schema.schema_id).u64("generation", schema.generation);
  w.begin_list("modules", schema.modules.size());
  for (const DeclaredModule& m : schema.modules) {
    w.str("id", m.id).u32("begin", m.position_begin).u32("end", m.position_end);
    w.begin_list("parameters", m.parameters.size());
    for (const std::string& p : m.parameters) w.str("name", p);
  }
  return w.finish();
}

PromptModuleService::PromptModuleService(std::vector<PoolGenerationRef> pools, uint32_t block_tokens,
                                         uint32_t cache_groups)
    : pools_(std::move(pools)), block_tokens_(block_tokens), cache_groups_(cache_groups) {}

// The schema route names no tokens: one token builds the key, whose
// manifest only the grant's generation matters for here.
ReuseKeyRequest PromptModuleService::key_request(const PromptSchemaRequest& r) {
  return ReuseKeyRequest{r.namespace_name, {0}};
}

ReuseKeyRequest PromptModuleService::key_request(const PromptAssembleRequest& r) {
  ReuseKeyRequest out{r.namespace_name, {}};
  for (const PromptItemSpec& item : r.items)
    out.tokens.insert(out.tokens.end(), item.tokens.begin(), item.tokens.end());
  if (out.tokens.empty()) out.tokens.push_back(0);  // an empty prompt is refused by the assembly, not the key
  return out;
}

ReuseKeyRequest PromptModuleService::key_request(const PromptModulePublishRequest& r) {
  ReuseKeyRequest out{r.namespace_name, r.tokens};
  if (out.tokens.empty()) out.tokens.push_back(0);
  return out;
}

PromptModuleService::HoldingKey PromptModuleService::holding_key(const PromptModuleReceipt& r) {
  return HoldingKey{r.namespace_id, r.schema_id, r.module_id, r.module_parameters_digest.hex()};
}

const PromptSchema* PromptModuleService::schema_of(const std::string& namespace_id,
                                                   const std::string& schema_id) const {
  const auto ns = schemas_.find(namespace_id);
  if (ns == schemas_.end()) return nullptr;
  const auto s = ns->second.find(schema_id);
  return s == ns->second.end() ? nullptr : &s->second;
}

template <class Gone>
std::vector<LeaseId> PromptModuleService::drop_if(Gone gone) {
  std::vector<LeaseId> released;
  for (const PromptModuleReceipt& r : store_.erase_if(gone)) {
    const auto h = holdings_.find(holding_key(r));
    if (h == holdings_.end()) continue;
    released.insert(released.end(), h->second.leases.begin(), h->second.leases.end());
    holdings_.erase(h);
  }
  return released;
}

Result<PromptSchemaReceipt> PromptModuleService::register_schema(const ReuseKeyAnswer& key,
                                                                 const PromptSchemaRequest& r) {
  if (const auto* denied = std::get_if<AuthorizationDenied>(&key.authorization)) return denied->error;
  const AuthorizedLookup& grant = std::get<AuthorizedLookup>(key.authorization);
  PromptSchema schema;
  KVRT_TRY_ASSIGN(schema, parse_prompt_schema(r.schema_toml, "schema_toml"));
  PromptSchemaReceipt out;
  const std::string& ns = grant.namespace_name();
  if (const PromptSchema* current = schema_of(ns, schema.schema_id)) {
    if (schema.generation < current->generation || (schema.generation == current->generation && !(schema == *current)))
      return make_error(
          ErrorCode::stale_generation,
          "schema \"" + schema.schema_id + "\" is registered at generation " + std::to_string(current->generation) +
              (schema.generation == current->generation ? " with other modules: a changed schema needs a new generation"
                                                        : "; this one is older"),
          "generation");
  }
  // Modules computed under an older generation stay: an assembly judges
  // them (a moved module is a miss of Pi, an unchanged one of S), and the
  // module computed under this generation replaces each (same key).
  store_.for_each([&](const PromptModuleReceipt& m) {
    if (m.namespace_id == ns && m.schema_id == schema.schema_id && m.schema_generation < schema.generation)
      ++out.stale_modules;
  });
  out.trace = r.trace;
  out.namespace_name = ns;
  out.schema_id = schema.schema_id;
  out.generation = schema.generation;
  out.schema_digest = prompt_schema_digest(schema);
  out.modules = static_cast<uint32_t>(schema.modules.size());
  schemas_[ns][schema.schema_id] = std::move(schema);
  return out;
}

Result<std::pair<PromptAssemblyContext, const PromptSchema*>> PromptModuleService::registered_schema(
    const ReuseKeyAnswer& key, const std::string& schema_id) const {
  std::pair<const AuthorizedLookup*, const KeyEvidence*> auth;
  KVRT_TRY_ASSIGN(auth, authorized(key));
  PromptAssemblyContext context = context_of(*auth.first, *auth.second);
  const PromptSchema* schema = schema_of(context.namespace_id, schema_id);
  if (schema == nullptr)
    return make_error(ErrorCode::invalid_argument,
                      "namespace \"" + context.namespace_id + "\" has no schema \"" + schema_id + "\" registered",
                      "schema_id");
  return std::pair{std::move(context), schema};
}

Result<PromptModuleService::Assembly> PromptModuleService::assemble(const ReuseKeyAnswer& key,
                                                                    const PromptAssembleRequest& r) {
  std::pair<PromptAssemblyContext, const PromptSchema*> found;
  KVRT_TRY_ASSIGN(found, registered_schema(key, r.schema_id));
  const auto& [context, schema] = found;
  DeclaredPrompt prompt{r.schema_id, r.schema_generation, {}};
  for (size_t i = 0; i < r.items.size(); ++i) {
    const PromptItemSpec& spec = r.items[i];
    if (Error e = duplicate_parameter(spec.parameters, "items[" + std::to_string(i) + "].parameters");
        e.code != ErrorCode::ok)
      return e;
    prompt.items.push_back(
        PromptItem{spec.module_id, parameters_of(spec.parameters), spec.tokens, spec.gap_begin, spec.use_cache});
  }
  AssembledPrompt assembled;
  KVRT_TRY_ASSIGN(assembled, assemble_declared_prompt(prompt, *schema, store_, context));
  if (assembled.segments.empty()) return make_error(ErrorCode::invalid_argument, "a prompt with no items", "items");

  Assembly out;
  out.receipt.trace = r.trace;
  out.receipt.schema_id = schema->schema_id;
  out.receipt.schema_generation = schema->generation;
  out.receipt.namespace_generation = context.namespace_generation;
  for (AssembledSegment& s : assembled.segments) {
    PromptSegment seg;
    // The item a segment came from: the one at its first position.
    for (size_t i = 0; i < prompt.items.size(); ++i) {
      const PromptItem& item = prompt.items[i];
      const bool same = item.module_id.empty() ? s.module_id.empty() && item.gap_begin == s.positions.front()
                                               : item.module_id == s.module_id;
      if (same) seg.item = static_cast<uint32_t>(i);
    }
    seg.module_id = s.module_id;
    seg.position_begin = s.positions.front();
    seg.tokens = static_cast<uint32_t>(s.tokens.size());
    if (s.reused) {
      const Holding& h = holdings_.at(holding_key(*s.reused));
      out.leases.push_back(ReuseLeaseRequest{h.handles, ceil_div(s.tokens.size(), block_tokens_)});
      out.lease_segment.push_back(out.receipt.segments.size());
      seg.outcome = PromptModuleUse{std::move(*s.reused), h.handles, {}};
    } else if (s.miss) {
      seg.outcome = PromptModuleMiss{*s.miss, s.miss_detail};
    } else {
      seg.outcome = PromptComputed{};
    }
    out.receipt.segments.push_back(std::move(seg));
  }
  ++assemblies_;
  return out;
}

PromptAssemblyReceipt PromptModuleService::leased(Assembly a, const std::vector<ReuseLeaseAnswer>& answers,
                                                  std::vector<LeaseId>& unused) {
  PromptAssemblyReceipt out = std::move(a.receipt);
  for (size_t k = 0; k < a.lease_segment.size(); ++k) {
    PromptSegment& seg = out.segments[a.lease_segment[k]];
    PromptModuleUse& use = std::get<PromptModuleUse>(seg.outcome);
    std::optional<PromptModuleMiss> miss;
    if (answers.size() != a.lease_segment.size()) {
      miss = PromptModuleMiss{RejectionReason::lease_unavailable, "the allocator did not answer"};
    } else if (const auto* refused = std::get_if<LeaseRefused>(&answers[k].lease)) {
      miss = PromptModuleMiss{RejectionReason::lease_unavailable, refused->reason};
    } else {
      const LeaseGrant& grant = std::get<LeaseGrant>(answers[k].lease);
      // Every module row must still be there (its blocks were never
      // truncated: they are node-leased, but checked, not assumed).
      if (answers[k].valid_frontier_tokens < seg.tokens) {
        unused.insert(unused.end(), grant.leases.begin(), grant.leases.end());
        miss = PromptModuleMiss{RejectionReason::frontier_not_valid, std::to_string(answers[k].valid_frontier_tokens) +
                                                                         " of " + std::to_string(seg.tokens) +
                                                                         " module rows are valid"};
      } else {
        for (LeaseId l : grant.leases) use.leases.push_back(l.value);
      }
    }
    if (miss) seg.outcome = std::move(*miss);
  }
  for (const PromptSegment& seg : out.segments) {
    if (std::holds_alternative<PromptModuleUse>(seg.outcome)) {
      out.reused_tokens += seg.tokens;
      ++reused_modules_;
    } else {
      out.computed_tokens += seg.tokens;
      if (const auto* m = std::get_if<PromptModuleMiss>(&seg.outcome)) ++misses_[m->reason];
    }
  }
  reused_tokens_ += out.reused_tokens;
  computed_tokens_ += out.computed_tokens;
  return out;
}

Result<PromptModuleService::Publication> PromptModuleService::prepare_publish(const ReuseKeyAnswer& key,
                                                                              const PromptModulePublishRequest& r) {
  std::pair<PromptAssemblyContext, const PromptSchema*> found;
  KVRT_TRY_ASSIGN(found, registered_schema(key, r.schema_id));
  const auto& [context, schema] = found;
  if (r.schema_generation != schema->generation)
    return make_error(ErrorCode::stale_generation,
                      "schema \"" + r.schema_id + "\" is registered at generation " +
                          std::to_string(schema->generation) + ", not " + std::to_string(r.schema_generation),
                      "schema_generation");
  if (Error e = duplicate_parameter(r.parameters, "parameters"); e.code != ErrorCode::ok) return e;
  // The module's item through the assembly's own checks (declared module,
  // declared parameters, tokens that fit its range), against an empty store.
  const PromptItem item{r.module_id, parameters_of(r.parameters), r.tokens, 0, false};
  if (r.module_id.empty()) return make_error(ErrorCode::invalid_argument, "a module id is required", "module_id");
  const DeclaredPrompt prompt{schema->schema_id, schema->generation, {item}};
  AssembledPrompt assembled;
  KVRT_TRY_ASSIGN(assembled, assemble_declared_prompt(prompt, *schema, PromptModuleStore{}, context));
  Publication out;
  out.receipt = module_receipt_for(assembled.segments.front(), item, *schema, context);
  out.request = r.request;
  return out;
}

Result<std::vector<PhysicalBlockHandle>> PromptModuleService::module_blocks(const Publication& p,
                                                                            const BlockTableView& view) const {
  if (view.groups.empty())
    return make_error(ErrorCode::unknown_request, "this session holds no request " + std::to_string(p.request.value),
                      "request");
  const uint32_t n = static_cast<uint32_t>(p.receipt.token_ids.size());
  const uint32_t blocks = ceil_div(n, block_tokens_);
  if (view.groups.size() != cache_groups_ || view.context_tokens < n)
    return make_error(ErrorCode::row_not_valid,
                      "request " + std::to_string(p.request.value) + " holds " + std::to_string(view.context_tokens) +
                          " rows; the module has " + std::to_string(n),
                      "request");
  std::vector<PhysicalBlockHandle> handles;
  for (uint32_t j = 0; j < blocks; ++j)
    for (uint32_t g = 0; g < cache_groups_; ++g) {
      if (view.groups[g].size() <= j)
        return make_error(ErrorCode::row_not_valid, "the request's table is shorter than the module", "request");
      const BlockTableEntry& e = view.groups[g][j];
      const uint32_t needed = std::min(block_tokens_, n - j * block_tokens_);
      if (e.valid_rows < needed)
        return make_error(ErrorCode::row_not_valid,
                          "block " + std::to_string(j) + " of group " + std::to_string(g) + " has " +
                              std::to_string(e.valid_rows) + " committed rows of the module's " +
                              std::to_string(needed) + ": commit the rows first",
                          "request");
      handles.push_back(e.handle);
    }
  return handles;
}

std::vector<PhysicalRef> PromptModuleService::refs_of(const std::vector<PhysicalBlockHandle>& handles) const {
  std::vector<PhysicalRef> out;
  for (const PhysicalBlockHandle& h : handles) {
    PoolGeneration generation{0};
    for (const PoolGenerationRef& p : pools_)
      if (p.pool == h.pool) generation = p.generation;
    out.push_back(PhysicalRef{h.group, h.pool, generation, h.block});
  }
  return out;
}

PromptModuleService::Published PromptModuleService::commit_publish(Publication p,
                                                                   std::vector<PhysicalBlockHandle> handles,
                                                                   const std::vector<std::optional<LeaseId>>& leases,
                                                                   const TraceContext& trace) {
  Published out;
  Holding holding{std::move(handles), {}};
  bool all = leases.size() == holding.handles.size();
  for (const std::optional<LeaseId>& l : leases) {
    if (l)
      holding.leases.push_back(*l);
    else
      all = false;
  }
  if (!all) {
    ++publications_refused_;
    out.released = std::move(holding.leases);
    out.error =
        make_error(ErrorCode::invalid_argument,
                   "the allocator refused a lease on the module's blocks (released or recycled meanwhile)", "request");
    return out;
  }
  p.receipt.physical_refs = refs_of(holding.handles);
  const HoldingKey key = holding_key(p.receipt);
  const bool replaced = holdings_.contains(key);
  if (replaced) {
    out.released = std::move(holdings_[key].leases);
    holdings_.erase(key);
  }
  if (Status stored = store_.store(p.receipt); !stored.ok()) {
    out.released.insert(out.released.end(), holding.leases.begin(), holding.leases.end());
    out.error = stored.error();
    return out;
  }
  holdings_[key] = std::move(holding);
  ++publications_;
  out.receipt = PromptModulePublishReceipt{trace, std::move(p.receipt), replaced};
  return out;
}

std::vector<LeaseId> PromptModuleService::retire(const std::string& namespace_id, NamespaceGeneration purged) {
  return drop_if([&](const PromptModuleReceipt& r) {
    return r.namespace_id == namespace_id && r.namespace_generation.value <= purged.value;
  });
}

std::vector<LeaseId> PromptModuleService::all_leases() const {
  std::vector<LeaseId> out;
  for (const auto& [key, h] : holdings_) out.insert(out.end(), h.leases.begin(), h.leases.end());
  return out;
}

void PromptModuleService::put_stats(OwnerStats& out) const {
  auto put = [&](std::string name, uint64_t value) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(value)});
  };
  uint64_t schemas = 0, blocks = 0;
  for (const auto& [ns, by_id] : schemas_) schemas += by_id.size();
  for (const auto& [key, h] : holdings_) blocks += h.handles.size();
  put("prompt_schemas", schemas);
  put("prompt_modules", store_.size());
  put("prompt_module_blocks", blocks);
  put("prompt_publications", publications_);
  put("prompt_publications_refused", publications_refused_);
  put("prompt_assemblies", assemblies_);
  put("prompt_reused_modules", reused_modules_);
  put("prompt_reused_tokens", reused_tokens_);
  put("prompt_computed_tokens", computed_tokens_);
  for (const auto& [reason, n] : misses_) put("prompt_missed_" + std::string(to_string(reason)), n);
}

Status PromptModuleService::validate() const {
  KVRT_TRY(store_.validate());
  for (const auto& [ns, by_id] : schemas_)
    for (const auto& [id, schema] : by_id) {
      KVRT_TRY(schema.validate());
      if (id != schema.schema_id)
        return make_error(ErrorCode::invariant_violated, "schema \"" + schema.schema_id + "\" is registered as \"" + id,
                          "prompt_schemas");
    }
  if (holdings_.size() != store_.size())
    return make_error(
        ErrorCode::invariant_violated,
        std::to_string(holdings_.size()) + " module holdings for " + std::to_string(store_.size()) + " stored modules",
        "prompt_module_store");
  Status held = Status::success();
  store_.for_each([&](const PromptModuleReceipt& r) {
    if (!held.ok()) return;
    const auto h = holdings_.find(holding_key(r));
    const size_t blocks = ceil_div(r.token_ids.size(), block_tokens_) * size_t{cache_groups_};
    if (h == holdings_.end() || h->second.handles.size() != blocks || h->second.leases.size() != blocks ||
        r.physical_refs.size() != blocks)
      held = make_error(ErrorCode::invariant_violated,
                        "module \"" + r.module_id + "\" is not held by one node lease per block of every group",
                        "prompt_module_store");
  });
  return held;
}

}  // namespace kvrt
