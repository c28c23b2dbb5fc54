#pragma once
// PromptModuleService: Prompt Cache (spec 0x0CB) as the node serves it, on
// the reuse owner (the prompt_schema, prompt_assemble and
// prompt_module_publish routes). It keeps, per namespace, the registered
// prompt schemas and the module store, and holds the node's leases on
// every stored module's blocks.
//
// The identity a module is stored and checked under is the node's, never
// the worker's word: the namespace and generation of the session's grant,
// the generation's semantic digest and the layout digest (steps 1-2 of
// 0x0CD, answered by the authorization owner before any lookup, 0x0CE), the
// schema generation registered for the namespace, and the positions that
// schema declares.
//
// Each route is a short sequence of owner calls the reuse actor makes; this
// class decides at each step and holds nothing of a call between steps:
//   register   authorize -> register_schema
//   assemble   authorize -> assemble -> the allocator's session leases on
//              each hit's blocks (all or none per module) -> leased
//   publish    authorize -> prepare_publish -> the allocator's view of the
//              publisher's request -> module_blocks -> node leases -> commit_publish
// Node leases this class lets go (a replaced or retired module, a refused
// publication) are returned for the actor to hand back to the allocator.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/reuse_types.hpp"
#include "schema/session_types.hpp"
#include "services/prompt/declared_prompt.hpp"
#include "services/prompt/prompt_module_store.hpp"
#include "services/prompt/prompt_schema.hpp"
#include "services/reuse/reuse_step_answers.hpp"

namespace kvrt {

// The digest of a schema as registered: id, generation, and every module's
// range and parameter names.
Sha256Digest prompt_schema_digest(const PromptSchema& schema);

class PromptModuleService {
 public:
  // pools: every pool of the node with its generation (a stored module's
  // physical refs name them); block_tokens P_a; cache_groups G.
  PromptModuleService(std::vector<PoolGenerationRef> pools, uint32_t block_tokens, uint32_t cache_groups);

  // What the reuse owner asks the authorization owner first.
  static ReuseKeyRequest key_request(const PromptSchemaRequest& r);
  static ReuseKeyRequest key_request(const PromptAssembleRequest& r);
  static ReuseKeyRequest key_request(const PromptModulePublishRequest& r);

  // Registers a schema for the grant's namespace. A schema id is new, or
  // comes with a higher generation (modules stored under older ones stay
  // until a publication replaces them: an assembly reports each as a miss
  // of S, or of Pi where the module moved), or repeats the registered
  // generation with the same content (nothing changes). Errors: the
  // authorization's; the schema's parse and validate errors;
  // stale_generation ("generation") for an older generation, or the same
  // generation with other content.
  Result<PromptSchemaReceipt> register_schema(const ReuseKeyAnswer& key, const PromptSchemaRequest& r);

  // assemble_declared_prompt over the namespace's registered schema and its
  // stored modules. Each hit still needs the session's leases on its blocks
  // (`leases`, one request per hit, in segment order). Errors: the
  // authorization's; not_found ("schema_id") for a schema the namespace has
  // not registered; assemble_declared_prompt's.
  struct Assembly {
    PromptAssemblyReceipt receipt;          // hits without their leases yet
    std::vector<ReuseLeaseRequest> leases;  // one per hit
    std::vector<size_t> lease_segment;      // the segment each lease request is for
  };
  Result<Assembly> assemble(const ReuseKeyAnswer& key, const PromptAssembleRequest& r);
  // The allocator's answers, in order: a hit whose blocks could not all be
  // leased, or whose blocks no longer hold every module row, becomes a miss
  // (lease_unavailable / frontier_not_valid); `unused` receives leases
  // granted for such a hit, to be handed back. Answers of another count
  // make every hit a miss.
  PromptAssemblyReceipt leased(Assembly assembly, const std::vector<ReuseLeaseAnswer>& answers,
                               std::vector<LeaseId>& unused);

  // A publication's checks before any block is read: the authorization, a
  // registered schema at the request's generation (stale_generation), a
  // declared module and parameters, tokens that fit its range
  // (invalid_argument naming the field).
  struct Publication {
    PromptModuleReceipt receipt;  // no physical refs yet
    RequestId request;
  };
  Result<Publication> prepare_publish(const ReuseKeyAnswer& key, const PromptModulePublishRequest& r);
  // The handles to lease from the publisher's table, bundle-major:
  // ceil(N / P_a) blocks of every group. Errors: not_found ("request") when
  // the session holds no such request (an empty view), row_not_valid
  // ("request") when its table does not hold N committed rows in every group.
  Result<std::vector<PhysicalBlockHandle>> module_blocks(const Publication& p, const BlockTableView& view) const;
  // Stores the module once every handle is leased for the node. A refused
  // lease refuses the publication (lease_unavailable "request"), and every
  // lease granted goes back in `released`, as do the leases of a receipt the
  // new one replaces.
  struct Published {
    std::optional<PromptModulePublishReceipt> receipt;
    std::optional<Error> error;
    std::vector<LeaseId> released;
  };
  Published commit_publish(Publication p, std::vector<PhysicalBlockHandle> handles,
                           const std::vector<std::optional<LeaseId>>& leases, const TraceContext& trace);

  // A purge of (namespace, generation g), or the node's end: the modules of
  // g or older go. Returns their node leases.
  std::vector<LeaseId> retire(const std::string& namespace_id, NamespaceGeneration purged);
  std::vector<LeaseId> all_leases() const;

  // "prompt_*" values of the reuse owner's statistics.
  void put_stats(OwnerStats& out) const;
  // The store's invariants, one holding (handles and leases) per stored
  // receipt with ceil(N / P_a) x G handles, every schema valid.
  Status validate() const;

 private:
  struct Holding {
    std::vector<PhysicalBlockHandle> handles;  // bundle-major
    std::vector<LeaseId> leases;               // the node's, one per handle
  };
  using HoldingKey = std::tuple<std::string, std::string, std::string, std::string>;
  static HoldingKey holding_key(const PromptModuleReceipt& r);
  const PromptSchema* schema_of(const std::string& namespace_id, const std::string& schema_id) const;
  // The authorization's context and the namespace's registered schema
  // `schema_id`, or the authorization's refusal, or invalid_argument
  // ("schema_id") for a schema the namespace has not registered.
  Result<std::pair<PromptAssemblyContext, const PromptSchema*>> registered_schema(const ReuseKeyAnswer& key,
                                                                                  const std::string& schema_id) const;
  std::vector<PhysicalRef> refs_of(const std::vector<PhysicalBlockHandle>& handles) const;
  // Drops stored modules matching `gone`, returning their leases.
  template <class Gone>
  std::vector<LeaseId> drop_if(Gone gone);

  std::vector<PoolGenerationRef> pools_;
  uint32_t block_tokens_ = 0, cache_groups_ = 0;
  std::map<std::string, std::map<std::string, PromptSchema>> schemas_;  // namespace -> schema id -> schema
  PromptModuleStore store_;
  std::map<HoldingKey, Holding> holdings_;
  uint64_t assemblies_ = 0, reused_modules_ = 0, reused_tokens_ = 0, computed_tokens_ = 0, publications_ = 0;
  uint64_t publications_refused_ = 0;
  std::map<RejectionReason, uint64_t> misses_;
};

}  // namespace kvrt
