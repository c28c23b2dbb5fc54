#include "services/prompt/prompt_module_store.hpp"

namespace kvrt {

Sha256Digest module_parameters_digest(const std::map<std::string, std::string>& parameters) {
  CanonicalWriter w("kvrt.PromptModuleParameters.v1");
  w.begin_list("parameters", parameters.size());
  for (const auto& [name, value] : parameters) w.str("name", name).str("value", value);
  return w.finish();
}

PromptModuleStore::Key PromptModuleStore::key_of(const PromptModuleReceipt& r) {
  return Key{r.namespace_id, r.schema_id, r.module_id, r.module_parameters_digest.hex()};
}

Status PromptModuleStore::store(PromptModuleReceipt r) {
  if (r.token_ids.empty() || r.token_ids.size() != r.position_ids.size())
    return make_error(ErrorCode::invalid_argument,
                      "a module needs as many position ids as token ids (N_module), and at least one", "position_ids");
  for (size_t i = 1; i < r.position_ids.size(); ++i)
    if (r.position_ids[i] <= r.position_ids[i - 1])
      return make_error(ErrorCode::invalid_argument, "a module's position ids must increase", "position_ids");
  Key key = key_of(r);
  receipts_[std::move(key)] = std::move(r);
  return Status::success();
}

const PromptModuleReceipt* PromptModuleStore::lookup(const std::string& namespace_id, const std::string& schema_id,
                                                     const std::string& module_id,
                                                     const Sha256Digest& parameters_digest) const {
  const auto it = receipts_.find(Key{namespace_id, schema_id, module_id, parameters_digest.hex()});
  return it == receipts_.end() ? nullptr : &it->second;
}

uint64_t PromptModuleStore::retire(const std::string& namespace_id, NamespaceGeneration current) {
  return erase_if([&](const PromptModuleReceipt& r) {
           return r.namespace_id == namespace_id && r.namespace_generation.value < current.value;
         })
      .size();
}

Status PromptModuleStore::validate() const {
  for (const auto& [key, r] : receipts_) {
    if (key != key_of(r))
      return make_error(ErrorCode::invariant_violated, "module \"" + r.module_id + "\" is stored under another key",
                        "prompt_module_store");
    if (r.token_ids.size() != r.position_ids.size() || r.token_ids.empty())
      return make_error(ErrorCode::invariant_violated, "module \"" + r.module_id + "\" breaks N_module",
                        "prompt_module_store");
  }
  return Status::success();
}

}  // namespace kvrt
