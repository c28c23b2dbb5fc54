#pragma once
// assemble_declared_prompt of spec 0x0CB: a prompt written against a schema
// (its modules with their parameters, and free text in the gaps) becomes
// segments at declared positions. Each cached module is reused only if
//     H_module = [T_p = T_c][Pi_p = Pi_c][S_p = S_c][A_p = A_c]
// (tokens, positions, schema and generation, cache ABI), and only in the
// authorized namespace at its current generation; otherwise it is computed
// at its declared positions and the miss is counted with its reason. The
// segments come out in declared position order, whatever the prompt's order.
//
// The caller authorizes the namespace before calling (0x0CE "Authorization
// Before Lookup"): the context is what that authorization granted.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "schema/reuse_types.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/prompt/prompt_module_store.hpp"
#include "services/prompt/prompt_schema.hpp"
#include "services/telemetry/reuse_rejection.hpp"

namespace kvrt {

// One item of a prompt: a declared module rendered with its parameters, or
// free text placed in a gap at `gap_begin`.
struct PromptItem {
  std::string module_id;  // empty: free text
  std::map<std::string, std::string> parameters;
  std::vector<TokenId> tokens;  // as rendered (tokenised) for this prompt
  uint32_t gap_begin = 0;       // free text only: its first position
  bool use_cache = true;        // a module the application wants computed afresh: false
};

struct DeclaredPrompt {
  std::string schema_id;
  uint64_t schema_generation = 0;
  std::vector<PromptItem> items;
};

// What the authorization and the node's cache ABI say now.
struct PromptAssemblyContext {
  std::string namespace_id;
  NamespaceGeneration namespace_generation;
  Sha256Digest semantic_digest;  // A: the model/cache semantic ABI
  Sha256Digest layout_digest;    // how the stored K/V are laid out
};

struct AssembledSegment {
  std::string module_id;  // empty: free text
  std::vector<TokenId> tokens;
  std::vector<uint32_t> positions;            // declared position ids, increasing
  std::optional<PromptModuleReceipt> reused;  // set: a hit, its K/V are the receipt's physical refs
  std::optional<RejectionReason> miss;        // a cached module that could not be used, and why
  std::string miss_detail;
};

struct AssembledPrompt {
  std::vector<AssembledSegment> segments;  // declared position order
  uint64_t reused_tokens = 0, computed_tokens = 0;
  std::vector<TokenId> tokens() const;
  std::vector<uint32_t> positions() const;
};

// Errors, for the prompt as a whole (nothing assembled): stale_generation
// (another schema or schema generation than registered), invalid_argument
// naming the item (an undeclared module or parameter, a module used twice,
// rendered tokens longer than the module's range, free text outside the
// gaps or overlapping another item, an empty item).
Result<AssembledPrompt> assemble_declared_prompt(const DeclaredPrompt& prompt, const PromptSchema& schema,
                                                 const PromptModuleStore& store, const PromptAssemblyContext& context);

// The receipt a computed module's K/V are stored under (the owner adds the
// physical refs once the rows are committed).
PromptModuleReceipt module_receipt_for(const AssembledSegment& segment, const PromptItem& item,
                                       const PromptSchema& schema, const PromptAssemblyContext& context);

}  // namespace kvrt
