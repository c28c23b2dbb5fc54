// [prompt] Prompt Cache (services/prompt, spec 0x0CB): a schema's declared
// positions, a module reused only when tokens, positions, schema generation
// and cache ABI all match (H_module), a moved module counted as a miss,
// free text in the gaps, discontinuous position ids in declared order, the
// whole-prompt refusals, and a seeded random run against the rule stated
// directly.
#include "services/prompt/declared_prompt.hpp"

#include <catch2/catch.hpp>
#include <random>

namespace kvrt::test {
namespace {

constexpr std::string_view kSchema = R"(
schema_id = "support-bot"
generation = 1
[[module]]
id = "document"
positions = [100, 164]
parameters = ["doc_id"]
[[module]]
id = "system"
positions = [0, 32]
[[module]]
id = "tools"
positions = [32, 96]
)";

PromptAssemblyContext context() {
  return PromptAssemblyContext{"prod/tenant-a", NamespaceGeneration{2}, sha256(std::string_view("model-v1")),
                               sha256(std::string_view("fp16 layout"))};
}

std::vector<TokenId> tokens(TokenId first, uint32_t n) {
  std::vector<TokenId> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = first + static_cast<TokenId>(i);
  return t;
}

// Computes every cached module of `prompt` the way an owner would after a
// miss: its receipt at the declared positions.
void populate(PromptModuleStore& store, const DeclaredPrompt& prompt, const PromptSchema& schema,
              const PromptAssemblyContext& c) {
  const AssembledPrompt a = assemble_declared_prompt(prompt, schema, store, c).value();
  for (const PromptItem& item : prompt.items) {
    if (item.module_id.empty()) continue;
    for (const AssembledSegment& s : a.segments)
      if (s.module_id == item.module_id) REQUIRE(store.store(module_receipt_for(s, item, schema, c)).ok());
  }
}

}  // namespace

TEST_CASE("prompt cache: the schema's declared ranges, sorted and checked", "[prompt]") {
  const PromptSchema s = parse_prompt_schema(kSchema, "test").value();
  REQUIRE(s.modules.size() == 3);
  CHECK(s.modules[0].id == "system");
  CHECK(s.modules[2].id == "document");
  CHECK(s.modules[2].parameters == std::vector<std::string>{"doc_id"});
  auto field_of = [](std::string_view text) {
    Result<PromptSchema> r = parse_prompt_schema(text, "test");
    REQUIRE_FALSE(r.ok());
    return r.error().field;
  };
  CHECK(field_of("schema_id = \"x\"\ngeneration = 1\n[[module]]\nid = \"a\"\npositions = [0, 10]\n[[module]]\n"
                 "id = \"b\"\npositions = [5, 20]\n") == "module[1].positions");
  CHECK(field_of("schema_id = \"x\"\ngeneration = 0\n").find("generation") != std::string::npos);
  CHECK(
      field_of("schema_id = \"x\"\ngeneration = 1\n[[module]]\nid = \"a\"\npositions = [10, 10]\n").find("positions") !=
      std::string::npos);
  CHECK(field_of("schema_id = \"x\"\ngeneration = 1\nextra = 1\n").find("extra") != std::string::npos);
}

TEST_CASE("prompt cache: modules reused at their declared positions, free text in the gaps", "[prompt]") {
  const PromptSchema schema = parse_prompt_schema(kSchema, "test").value();
  PromptModuleStore store;
  // Items in another order than their positions; free text at [96, 100) and after the document.
  const DeclaredPrompt prompt{
      "support-bot",
      1,
      {PromptItem{"document", {{"doc_id", "faq-7"}}, tokens(500, 64), 0, true},
       PromptItem{"system", {}, tokens(10, 20), 0, true}, PromptItem{"", {}, tokens(900, 4), 96, true},
       PromptItem{"tools", {}, tokens(300, 40), 0, true}, PromptItem{"", {}, tokens(950, 7), 164, true}}};
  const AssembledPrompt first = assemble_declared_prompt(prompt, schema, store, context()).value();
  CHECK(first.reused_tokens == 0);
  CHECK(first.computed_tokens == 64 + 20 + 4 + 40 + 7);
  for (const AssembledSegment& s : first.segments)
    if (!s.module_id.empty()) CHECK(s.miss == RejectionReason::no_candidate);
  // Declared order and discontinuous positions: [0,20) [32,72) [96,100) [100,164) [164,171).
  REQUIRE(first.segments.size() == 5);
  CHECK(first.segments[0].module_id == "system");
  CHECK(first.segments[1].module_id == "tools");
  CHECK(first.segments[1].positions.front() == 32);
  CHECK(first.segments[2].positions == std::vector<uint32_t>{96, 97, 98, 99});
  CHECK(first.segments[3].module_id == "document");
  CHECK(first.segments[3].positions.front() == 100);
  CHECK(first.segments[3].positions.back() == 163);
  const std::vector<uint32_t> positions = first.positions();
  CHECK(positions[19] == 19);
  CHECK(positions[20] == 32);  // the system module's unused range is a gap

  populate(store, prompt, schema, context());
  CHECK(store.size() == 3);
  const AssembledPrompt second = assemble_declared_prompt(prompt, schema, store, context()).value();
  CHECK(second.reused_tokens == 64 + 20 + 40);
  CHECK(second.computed_tokens == 4 + 7);
  CHECK(second.tokens() == first.tokens());
  CHECK(second.positions() == first.positions());

  // The same document with another parameter value is another module instance.
  DeclaredPrompt other = prompt;
  other.items[0].parameters["doc_id"] = "faq-8";
  const AssembledPrompt third = assemble_declared_prompt(other, schema, store, context()).value();
  CHECK(third.segments[3].miss == RejectionReason::no_candidate);
  CHECK(third.reused_tokens == 20 + 40);
  CHECK(store.validate().ok());
}

TEST_CASE("prompt cache: each factor of H_module, and the namespace, refuses a cached module", "[prompt]") {
  const PromptSchema schema = parse_prompt_schema(kSchema, "test").value();
  PromptModuleStore store;
  const DeclaredPrompt prompt{"support-bot", 1, {PromptItem{"document", {{"doc_id", "a"}}, tokens(500, 64), 0, true}}};
  populate(store, prompt, schema, context());
  auto miss = [&](const DeclaredPrompt& p, const PromptSchema& s, const PromptAssemblyContext& c) {
    const AssembledPrompt a = assemble_declared_prompt(p, s, store, c).value();
    REQUIRE(a.segments.size() == 1);
    CHECK_FALSE(a.segments[0].reused);
    return a.segments[0].miss.value_or(RejectionReason::execution_failed);
  };
  SECTION("T: the rendered tokens differ") {
    DeclaredPrompt p = prompt;
    p.items[0].tokens[10] += 1;
    CHECK(miss(p, schema, context()) == RejectionReason::module_position_mismatch);
  }
  SECTION("Pi: the module moved (schema generation 2 declares it at [200, 264))") {
    PromptSchema moved = schema;
    moved.generation = 2;
    moved.modules[2].position_begin = 200;
    moved.modules[2].position_end = 264;
    DeclaredPrompt p = prompt;
    p.schema_generation = 2;
    const AssembledPrompt a = assemble_declared_prompt(p, moved, store, context()).value();
    CHECK(a.segments[0].miss == RejectionReason::module_position_mismatch);
    CHECK(a.segments[0].miss_detail.find("positions [100, 164)") != std::string::npos);
    CHECK(a.segments[0].positions.front() == 200);  // computed where it is declared now
  }
  SECTION("S: the same positions under a new schema generation") {
    PromptSchema next = schema;
    next.generation = 2;
    DeclaredPrompt p = prompt;
    p.schema_generation = 2;
    CHECK(miss(p, next, context()) == RejectionReason::module_position_mismatch);
  }
  SECTION("A: another model or adapter") {
    PromptAssemblyContext c = context();
    c.semantic_digest = sha256(std::string_view("model-v2"));
    CHECK(miss(prompt, schema, c) == RejectionReason::semantic_mismatch);
  }
  SECTION("a quantizer change") {
    PromptAssemblyContext c = context();
    c.layout_digest = sha256(std::string_view("fp8 layout"));
    CHECK(miss(prompt, schema, c) == RejectionReason::layout_mismatch);
  }
  SECTION("a namespace rotation, and its retirement") {
    PromptAssemblyContext c = context();
    c.namespace_generation = NamespaceGeneration{3};
    CHECK(miss(prompt, schema, c) == RejectionReason::stale_candidate_generation);
    CHECK(store.retire("prod/tenant-a", NamespaceGeneration{3}) == 1);
    CHECK(miss(prompt, schema, c) == RejectionReason::no_candidate);
  }
  SECTION("another tenant never finds it") {
    PromptAssemblyContext c = context();
    c.namespace_id = "prod/tenant-b";
    CHECK(miss(prompt, schema, c) == RejectionReason::no_candidate);
  }
  SECTION("the application asks for a fresh computation") {
    DeclaredPrompt p = prompt;
    p.items[0].use_cache = false;
    const AssembledPrompt a = assemble_declared_prompt(p, schema, store, context()).value();
    CHECK_FALSE(a.segments[0].reused);
    CHECK_FALSE(a.segments[0].miss);
  }
}

TEST_CASE("prompt cache: whole-prompt refusals name the item", "[prompt]") {
  const PromptSchema schema = parse_prompt_schema(kSchema, "test").value();
  PromptModuleStore store;
  auto error_of = [&](const DeclaredPrompt& p) {
    Result<AssembledPrompt> a = assemble_declared_prompt(p, schema, store, context());
    REQUIRE_FALSE(a.ok());
    return a.error();
  };
  CHECK(error_of(DeclaredPrompt{"support-bot", 2, {}}).code == ErrorCode::stale_generation);
  CHECK(error_of(DeclaredPrompt{"other", 1, {}}).code == ErrorCode::stale_generation);
  CHECK(error_of(DeclaredPrompt{"support-bot", 1, {PromptItem{"nope", {}, tokens(1, 3), 0, true}}}).field ==
        "items[0]");
  CHECK(error_of(DeclaredPrompt{"support-bot", 1, {PromptItem{"system", {{"x", "1"}}, tokens(1, 3), 0, true}}})
            .reason.find("parameter") != std::string::npos);
  CHECK(error_of(DeclaredPrompt{"support-bot", 1, {PromptItem{"system", {}, tokens(1, 33), 0, true}}})
            .reason.find("range of 32") != std::string::npos);
  CHECK(error_of(DeclaredPrompt{"support-bot",
                                1,
                                {PromptItem{"system", {}, tokens(1, 3), 0, true},
                                 PromptItem{"system", {}, tokens(1, 3), 0, true}}})
            .field == "items[1]");
  CHECK(error_of(DeclaredPrompt{"support-bot", 1, {PromptItem{"", {}, tokens(1, 8), 90, true}}}).reason.find("tools") !=
        std::string::npos);
  CHECK(
      error_of(DeclaredPrompt{"support-bot",
                              1,
                              {PromptItem{"", {}, tokens(1, 2), 96, true}, PromptItem{"", {}, tokens(1, 2), 97, true}}})
          .field == "items");
  CHECK(error_of(DeclaredPrompt{"support-bot", 1, {PromptItem{"system", {}, {}, 0, true}}}).field == "items[0]");
  PromptModuleReceipt uneven;
  uneven.token_ids = {1, 2};
  uneven.position_ids = {0};
  CHECK_FALSE(store.store(uneven).ok());
}

TEST_CASE("prompt cache property: a module is reused exactly when H_module holds", "[prompt][property]") {
  const uint64_t seed = GENERATE(range<uint64_t>(1, 21));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  PromptSchema schema = parse_prompt_schema(kSchema, "test").value();
  PromptModuleStore store;
  std::vector<std::string> docs{"a", "b", "c"};
  static uint64_t hits = 0, misses = 0;  // over every seed: both branches are reached
  for (int step = 0; step < 60; ++step) {
    INFO("step " << step);
    // Sometimes a new schema generation that may move the document.
    if (rng() % 10 == 0) {
      ++schema.generation;
      const uint32_t begin = rng() % 2 == 0 ? 100 : 200;
      schema.modules[2].position_begin = begin;
      schema.modules[2].position_end = begin + 64;
    }
    PromptAssemblyContext c = context();
    if (rng() % 8 == 0) c.semantic_digest = sha256(std::string_view("model-v2"));
    DeclaredPrompt p{"support-bot", schema.generation, {}};
    const std::string doc = docs[rng() % docs.size()];
    p.items.push_back(
        PromptItem{"document",
                   {{"doc_id", doc}},
                   tokens(static_cast<TokenId>(500 + 100 * (doc[0] - 'a') + (rng() % 6 == 0 ? 1 : 0)), 40),
                   0,
                   true});
    p.items.push_back(PromptItem{"system", {}, tokens(10, 20), 0, true});
    const AssembledPrompt a = assemble_declared_prompt(p, schema, store, c).value();
    for (const AssembledSegment& s : a.segments) {
      const PromptItem& item = s.module_id == "system" ? p.items[1] : p.items[0];
      const PromptModuleReceipt* r =
          store.lookup(c.namespace_id, schema.schema_id, s.module_id, module_parameters_digest(item.parameters));
      std::vector<uint32_t> declared;
      const DeclaredModule* m = schema.find(s.module_id);
      for (uint32_t k = 0; k < item.tokens.size(); ++k) declared.push_back(m->position_begin + k);
      std::vector<uint32_t> ids;
      for (TokenId t : item.tokens) ids.push_back(static_cast<uint32_t>(t));
      // H_module, stated directly.
      const bool hit = r != nullptr && r->token_ids == ids && r->position_ids == declared &&
                       r->schema_generation == schema.generation && r->semantic_manifest_digest == c.semantic_digest;
      CHECK(s.reused.has_value() == hit);
      ++(hit ? hits : misses);
      CHECK(s.positions == declared);
      if (!hit) {
        REQUIRE(store.store(module_receipt_for(s, item, schema, c)).ok());
      }
    }
    CHECK(a.reused_tokens + a.computed_tokens == 60);
    REQUIRE(store.validate().ok());
  }
  if (seed == 20) {
    CHECK(hits > 100);
    CHECK(misses > 100);
  }
}

}  // namespace kvrt::test
