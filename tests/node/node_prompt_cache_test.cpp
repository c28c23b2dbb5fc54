// [node][prompt] Prompt Cache (0x0CB) through a live node: a worker
// registers a schema for its namespace and publishes a module it computed
// in a request of its own; another worker's assembly reuses it at its
// declared positions with the session's leases on the module's blocks,
// which outlive the publisher's request (the store holds node leases).
// Every refusal the spec names is typed and changes nothing: other tokens,
// a changed schema generation (the moved module is gone), a namespace
// rotation, a purge, a module moved by a new schema generation, an unregistered schema, uncommitted rows, another
// session's request, an undeclared module, a namespace not granted.
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kBlockTokens = 16;  // P_a of the test node's layout
constexpr uint32_t kGroups = 2;        // its cache groups

std::string schema_toml(uint64_t generation, uint32_t system_begin) {
  return "schema_id = \"support\"\ngeneration = " + std::to_string(generation) +
         "\n[[module]]\nid = \"system\"\npositions = [" + std::to_string(system_begin) + ", " +
         std::to_string(system_begin + 64) +
         "]\n[[module]]\nid = \"document\"\npositions = [100, 164]\nparameters = [\"doc_id\"]\n";
}

PromptSchemaRequest schema_request(uint64_t generation, uint32_t system_begin = 0) {
  return PromptSchemaRequest{{}, "test/shared", schema_toml(generation, system_begin)};
}

// A request of `tokens.size()` committed rows: the module computed alone.
RequestFence computed_module(Client& c, size_t rows, bool commit = true) {
  const AllocationReceipt r = allocation(c, AllocateOp{static_cast<uint32_t>(rows), {}, std::nullopt, "test/shared"});
  RequestFence fence{r.request_id, r.request_generation, r.table_version_after};
  if (commit) fence.table_version = allocation(c, CommitRowsOp{fence, static_cast<uint32_t>(rows)}).table_version_after;
  return fence;
}

PromptModulePublishRequest publish_of(const std::vector<TokenId>& tokens, RequestId request,
                                      const std::string& module = "system", uint64_t generation = 1) {
  PromptModulePublishRequest r;
  r.namespace_name = "test/shared";
  r.schema_id = "support";
  r.schema_generation = generation;
  r.module_id = module;
  r.tokens = tokens;
  r.request = request;
  return r;
}

PromptAssembleRequest assemble_of(const std::vector<TokenId>& system, uint64_t generation = 1) {
  PromptAssembleRequest r;
  r.namespace_name = "test/shared";
  r.schema_id = "support";
  r.schema_generation = generation;
  // Prompt order differs from declared order: the document, the question
  // in the gap [64, 70), the system module.
  r.items.push_back(PromptItemSpec{"document", {{"doc_id", "faq"}}, prompt_of(7, 30), 0, true});
  r.items.push_back(PromptItemSpec{"", {}, prompt_of(8, 6), 64, true});
  r.items.push_back(PromptItemSpec{"system", {}, system, 0, true});
  return r;
}

const PromptModuleMiss& miss_of(const PromptSegment& s) {
  const auto* m = std::get_if<PromptModuleMiss>(&s.outcome);
  INFO("module " << s.module_id);
  REQUIRE(m != nullptr);
  return *m;
}

Error refusal(const auto& result) {
  REQUIRE_FALSE(result.ok());
  return result.error();
}

}  // namespace

TEST_CASE("a published prompt module is reused at its declared positions through the node", "[node][prompt]") {
  ScratchDir dir("node-prompt");
  InProcessNode n(dir);
  auto admin = n.connect("operator");
  auto a = n.connect("worker-0");
  auto b = n.connect("worker-1");
  REQUIRE(a->call(AuthorizeRequest{{}, "test/shared"}).ok());
  REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());

  const Result<PromptSchemaReceipt> registered = a->call(schema_request(1));
  INFO((registered.ok() ? std::string("ok") : registered.error().describe()));
  REQUIRE(registered.ok());
  CHECK(registered->schema_id == "support");
  CHECK(registered->generation == 1);
  CHECK(registered->modules == 2);
  CHECK(registered->namespace_name == "test/shared");
  // The same schema again changes nothing; the same generation with other
  // modules is refused.
  CHECK(a->call(schema_request(1))->schema_digest == registered->schema_digest);
  CHECK(refusal(a->call(schema_request(1, 8))).code == ErrorCode::stale_generation);

  // Worker a computes the system module (40 tokens, 3 blocks per group) and publishes it.
  const std::vector<TokenId> system = prompt_of(5, 40);
  const RequestFence computed = computed_module(*a, system.size());
  const Result<PromptModulePublishReceipt> published = a->call(publish_of(system, computed.request));
  INFO((published.ok() ? std::string("ok") : published.error().describe()));
  REQUIRE(published.ok());
  const PromptModuleReceipt& m = published->receipt;
  CHECK_FALSE(published->replaced);
  CHECK(m.module_id == "system");
  CHECK(m.schema_generation == 1);
  CHECK(m.namespace_id == "test/shared");
  REQUIRE(m.position_ids.size() == 40);
  CHECK(m.position_ids.front() == 0);
  CHECK(m.position_ids.back() == 39);
  CHECK(m.physical_refs.size() == 3 * kGroups);
  CHECK(n.stat("node", "reuse_prompt_modules") == 1);
  CHECK(n.stat("node", "reuse_prompt_module_blocks") == 3 * kGroups);
  // The publisher's request ends; the module's blocks stay, leased by the node.
  REQUIRE(a->call(AllocatorBatch{{}, {ReleaseOp{computed, ReleaseReason::finished}}}).ok());

  // Worker b's prompt: the system module reused, the question computed,
  // the document missed (never computed with these parameters).
  const Result<PromptAssemblyReceipt> assembled = b->call(assemble_of(system));
  INFO((assembled.ok() ? std::string("ok") : assembled.error().describe()));
  REQUIRE(assembled.ok());
  REQUIRE(assembled->segments.size() == 3);
  const PromptSegment& first = assembled->segments[0];
  CHECK(first.module_id == "system");
  CHECK(first.item == 2);
  CHECK(first.position_begin == 0);
  CHECK(first.tokens == 40);
  const auto* use = std::get_if<PromptModuleUse>(&first.outcome);
  REQUIRE(use != nullptr);
  CHECK(use->receipt == m);
  CHECK(use->handles.size() == 3 * kGroups);
  CHECK(use->leases.size() == 3 * kGroups);
  CHECK(assembled->segments[1].position_begin == 64);
  CHECK(std::holds_alternative<PromptComputed>(assembled->segments[1].outcome));
  CHECK(assembled->segments[2].module_id == "document");
  CHECK(assembled->segments[2].position_begin == 100);
  CHECK(miss_of(assembled->segments[2]).reason == RejectionReason::no_candidate);
  CHECK(assembled->reused_tokens == 40);
  CHECK(assembled->computed_tokens == 36);
  // The session's leases go back through the allocator, once each.
  for (uint64_t l : use->leases) {
    Result<AllocatorBatchReceipt> back = b->call(AllocatorBatch{{}, {ReleaseLeaseOp{LeaseId{l}}}});
    REQUIRE(back.ok());
    CHECK(std::holds_alternative<LeaseReleaseReceipt>(back->outcomes.at(0)));
  }

  SECTION("the same text with other tokens is a miss (T)") {
    std::vector<TokenId> other = system;
    other[17] += 1;
    const Result<PromptAssemblyReceipt> r = b->call(assemble_of(other));
    REQUIRE(r.ok());
    CHECK(miss_of(r->segments[0]).reason == RejectionReason::module_position_mismatch);
    CHECK(n.stat("node", "reuse_prompt_missed_module_position_mismatch") == 1);
  }
  SECTION("a new schema generation moves the module: a miss of Pi, then replaced; a stale prompt is refused (S)") {
    const Result<PromptSchemaReceipt> moved = a->call(schema_request(2, 200));
    REQUIRE(moved.ok());
    CHECK(moved->stale_modules == 1);
    CHECK(refusal(b->call(assemble_of(system))).code == ErrorCode::stale_generation);
    CHECK(refusal(a->call(publish_of(system, RequestId{1}))).code == ErrorCode::stale_generation);
    const Result<PromptAssemblyReceipt> r = b->call(assemble_of(system, 2));
    REQUIRE(r.ok());
    REQUIRE(r->segments.size() == 3);
    CHECK(r->segments[2].module_id == "system");  // declared position order
    CHECK(r->segments[2].position_begin == 200);
    CHECK(miss_of(r->segments[2]).reason == RejectionReason::module_position_mismatch);
    CHECK(miss_of(r->segments[2]).detail.find("(Pi)") != std::string::npos);
    CHECK(refusal(a->call(schema_request(1))).code == ErrorCode::stale_generation);
    // Computed again at [200, 240) and published: it replaces the old
    // module, whose node leases go back.
    const RequestFence again = computed_module(*a, system.size());
    const Result<PromptModulePublishReceipt> replaced = a->call(publish_of(system, again.request, "system", 2));
    REQUIRE(replaced.ok());
    CHECK(replaced->replaced);
    CHECK(replaced->receipt.position_ids.front() == 200);
    CHECK(n.stat("node", "reuse_prompt_modules") == 1);
    CHECK(n.stat("node", "reuse_prompt_module_blocks") == 3 * kGroups);
    const Result<PromptAssemblyReceipt> hit = b->call(assemble_of(system, 2));
    REQUIRE(hit.ok());
    CHECK(std::holds_alternative<PromptModuleUse>(hit->segments[2].outcome));
  }
  SECTION("a namespace rotation for new weights: the module was computed with the old ones (A)") {
    REQUIRE(admin->call(NamespaceInvalidateRequest{{}, "test/shared", InvalidationCause::weights, ""}).ok());
    CHECK(refusal(b->call(assemble_of(system))).code == ErrorCode::authorization_stale_generation);
    REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
    const Result<PromptAssemblyReceipt> r = b->call(assemble_of(system));
    REQUIRE(r.ok());
    CHECK(miss_of(r->segments[0]).reason == RejectionReason::semantic_mismatch);
  }
  SECTION("a purge removes the generation's modules and gives their blocks back (0x0CE step 6)") {
    const Result<NamespacePurgeReceipt> purged =
        admin->call(NamespacePurgeRequest{{}, "test/shared", InvalidationCause::weights, "", 0, false});
    INFO((purged.ok() ? std::string("ok") : purged.error().describe()));
    REQUIRE(purged.ok());
    CHECK(purged->external_copies == 3 * kGroups);
    CHECK(n.stat("node", "reuse_prompt_modules") == 0);
    REQUIRE(b->call(AuthorizeRequest{{}, "test/shared"}).ok());
    const Result<PromptAssemblyReceipt> r = b->call(assemble_of(system));
    REQUIRE(r.ok());
    CHECK(miss_of(r->segments[0]).reason == RejectionReason::no_candidate);
  }
  SECTION("publications the node refuses, typed, storing nothing") {
    const RequestFence uncommitted = computed_module(*a, 20, /*commit=*/false);
    PromptModulePublishRequest doc = publish_of(prompt_of(6, 20), uncommitted.request, "document");
    doc.parameters = {PromptParameter{"doc_id", "faq"}};
    const Error e = refusal(a->call(doc));
    CHECK(e.code == ErrorCode::row_not_valid);
    CHECK(e.field == "request");
    // Another session's request is not this session's to publish.
    const RequestFence bs = computed_module(*b, 20);
    doc.request = bs.request;
    CHECK(refusal(a->call(doc)).code == ErrorCode::unknown_request);
    CHECK(refusal(a->call(publish_of(system, computed.request, "footer"))).field == "items[0]");
    CHECK(refusal(a->call(publish_of(prompt_of(5, 65), computed.request))).field == "items[0]");
    PromptModulePublishRequest twice = doc;
    twice.parameters.push_back(PromptParameter{"doc_id", "other"});
    CHECK(refusal(a->call(twice)).field == "parameters");
    CHECK(n.stat("node", "reuse_prompt_modules") == 1);
  }
  SECTION("assemblies the node refuses, typed") {
    PromptAssembleRequest r = assemble_of(system);
    r.schema_id = "unregistered";
    CHECK(refusal(b->call(r)).field == "schema_id");
    r = assemble_of(system);
    r.items[1].gap_begin = 30;  // free text inside the system module's range
    CHECK(refusal(b->call(r)).field == "items[1]");
    r = assemble_of(system);
    r.namespace_name = "test/other";
    CHECK(refusal(b->call(r)).code == ErrorCode::authorization_namespace_denied);
  }
  const Result<NodeStats> stats = read_node_stats(n.descriptor, /*validate=*/true);
  REQUIRE(stats.ok());
  for (const OwnerStats& o : stats->owners) {
    INFO(o.owner << ": " << o.validate_error);
    CHECK(o.validate_ok);
  }
}

}  // namespace kvrt::test
