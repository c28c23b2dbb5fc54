#pragma once
// PromptModuleReceipt (spec 0x0CB): a declared prompt module whose K/V were
// computed under a schema's position contract. The module is a hit only if
// tokens, positions, schema generation and semantic ABI all match:
//     H_module = [T_p = T_c][Pi_p = Pi_c][S_p = S_c][A_p = A_c]
// and the two sequences have equal length N_module = |token_ids| = |position_ids|.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/physical_block_handle.hpp"

namespace kvrt {

struct PromptModuleReceipt {
  std::string schema_id;           // the prompt schema (PML) that declares the module
  uint64_t schema_generation = 0;  // advanced whenever the schema changes
  std::string module_id;
  Sha256Digest module_parameters_digest;  // parameters the module was rendered with
  std::vector<uint32_t> token_ids;        // exact token ids [token id per position]
  std::vector<uint32_t> position_ids;     // declared positions, may be discontinuous [positions]
  Sha256Digest semantic_manifest_digest;  // CacheCompatibilityManifest the K/V were computed under
  Sha256Digest layout_manifest_digest;    // CacheLayoutManifest of the stored bytes
  std::string namespace_id;               // authorized cache namespace
  NamespaceGeneration namespace_generation;
  std::vector<PhysicalRef> physical_refs;  // blocks holding the module's K/V, every cache group

  friend bool operator==(const PromptModuleReceipt&, const PromptModuleReceipt&) = default;
};

}  // namespace kvrt
