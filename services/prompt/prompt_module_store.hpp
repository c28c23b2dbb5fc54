#pragma once
// The store of computed prompt modules (spec 0x0CB), kept by an index owner:
// one PromptModuleReceipt per (namespace, schema, module, parameters), the
// K/V of a declared module as computed at its declared positions. A lookup
// only finds the receipt; whether it is a hit is the assembly's question
// (declared_prompt.hpp), because a hit needs the request's own tokens,
// positions, schema and cache ABI.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "schema/reuse_types.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// The digest of a module's parameter values (name -> value), order free.
Sha256Digest module_parameters_digest(const std::map<std::string, std::string>& parameters);

class PromptModuleStore {
 public:
  // Stores (replaces) a receipt. Errors: invalid_argument when its token and
  // position sequences are empty or of different lengths (N_module), or its
  // positions are not increasing.
  Status store(PromptModuleReceipt receipt);
  const PromptModuleReceipt* lookup(const std::string& namespace_id, const std::string& schema_id,
                                    const std::string& module_id, const Sha256Digest& parameters_digest) const;
  // A namespace moved to generation `current`: receipts computed under an
  // older one go (they could never be a hit again). Returns how many.
  uint64_t retire(const std::string& namespace_id, NamespaceGeneration current);
  // Removes every receipt `gone(receipt)` holds for, and returns them.
  template <class Gone>
  std::vector<PromptModuleReceipt> erase_if(Gone gone) {
    std::vector<PromptModuleReceipt> out;
    for (auto it = receipts_.begin(); it != receipts_.end();) {
      if (gone(it->second)) {
        out.push_back(std::move(it->second));
        it = receipts_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  uint64_t size() const { return receipts_.size(); }
  template <class Fn>
  void for_each(Fn fn) const {
    for (const auto& [key, r] : receipts_) fn(r);
  }
  // Every receipt under its own key, with equal-length sequences.
  Status validate() const;

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // namespace, schema, module, params hex
  static Key key_of(const PromptModuleReceipt& r);
  std::map<Key, PromptModuleReceipt> receipts_;
};

}  // namespace kvrt
