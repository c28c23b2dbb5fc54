// Semantic compatibility of cached K/V (spec 0x01A): the reuse gate, its
// first-failing-field order, the canonical digest, and the four rejection
// traces of "Source-To-Tensor Rejection Trace".
#include <catch2/catch.hpp>

#include "tests/support/identity_fixtures.hpp"
#include "services/identity/compatibility_check.hpp"
#include "services/identity/compatibility_digest.hpp"
#include "services/identity/isolation_namespace.hpp"
#include "services/identity/layout_mismatch.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Checks a rejection: the reported field, symmetry of the verdict, and that
// the digest tells the two manifests apart.
void require_rejected(const CacheCompatibilityManifest& producer, const CacheCompatibilityManifest& consumer,
                      CompatibilityField expected) {
  const auto v = compatible(producer, consumer);
  INFO(v.error.describe());
  REQUIRE_FALSE(v.ok());
  CHECK(v.failing_field == expected);
  CHECK(v.error.code == ErrorCode::incompatible);
  CHECK(v.error.field == to_string(expected));
  CHECK(compatible(consumer, producer).failing_field == expected);
  CHECK(compatibility_digest(producer) != compatibility_digest(consumer));
}

}  // namespace

TEST_CASE("identical manifests are compatible and share a digest", "[identity][compat]") {
  const auto a = base_manifest();
  const auto b = base_manifest();
  const auto v = compatible(a, b);
  CHECK(v.ok());
  CHECK(v.status().ok());
  CHECK(v.error.code == ErrorCode::ok);
  CHECK(compatibility_digest(a) == compatibility_digest(b));
  CHECK(a.cache_layout_sha256 == loop4_layout().digest());
  CHECK(a.cache_isolation_namespace == "prod-eu1/tenant-a");
}

TEST_CASE("rejection trace: an adapter mismatch fails on adapter_identity", "[identity][compat][trace]") {
  const auto producer = base_manifest();
  auto adapter = base_artifact();
  adapter.adapter_identity = "lora:legal-summariser@7";
  const auto consumer = build(loop4_layout(), adapter, tenant_namespace(), text_input("req-2"));
  REQUIRE(producer.covered_token_ids == consumer.covered_token_ids);
  require_rejected(producer, consumer, CompatibilityField::adapter_identity);
  const auto v = compatible(producer, consumer);
  CHECK(contains(v.error.reason, "producer (none)"));
  CHECK(contains(v.error.reason, "lora:legal-summa"));  // long operand shown around the first difference
}

TEST_CASE("rejection trace: a position-contract mismatch fails on position_contract_sha256",
          "[identity][compat][trace]") {
  const auto producer = base_manifest();
  // The contract's RoPE semantics changed under an unchanged layout id: only
  // the content digest catches it.
  auto rope = base_artifact();
  rope.position_contract_sha256 = contract_digest("rope llama3 theta=1000000 positions=absolute causal");
  const auto consumer = build(loop4_layout(), rope, tenant_namespace(), text_input());
  require_rejected(producer, consumer, CompatibilityField::position_contract_sha256);

  // A layout that also renames its contract fails earlier, on the layout digest,
  // and the explanation names the contract id.
  auto relabelled = loop4_layout();
  relabelled.position_contract_id = "rope-llama3-theta1000000-v1";
  const auto consumer2 = build(relabelled, rope, tenant_namespace(), text_input());
  require_rejected(producer, consumer2, CompatibilityField::cache_layout_sha256);
  const auto v = compatible_explained(producer, consumer2, loop4_layout(), relabelled);
  REQUIRE(v.layout_difference.has_value());
  CHECK(v.layout_difference->field == "position_contract_id");
  CHECK(v.layout_difference->aspect == LayoutAspect::position);
}

TEST_CASE("rejection trace: a TP-rank or cache-group mismatch fails on cache_layout_sha256",
          "[identity][compat][trace]") {
  const auto layout = loop4_layout();
  const auto producer = base_manifest();

  SECTION("same byte count, different TP rank") {
    auto rank1 = layout;
    rank1.tp_rank = 1;
    CHECK(rank1.row_bytes() == layout.row_bytes());  // identical shape, other heads
    const auto consumer = build(rank1, base_artifact(), tenant_namespace(), text_input());
    require_rejected(producer, consumer, CompatibilityField::cache_layout_sha256);
    const auto v = compatible_explained(producer, consumer, layout, rank1);
    REQUIRE(v.layout_difference.has_value());
    CHECK(v.layout_difference->field == "tp_rank");
    CHECK(v.layout_difference->aspect == LayoutAspect::ownership);
    CHECK(contains(v.error.reason, "tp_rank: producer 0 vs consumer 1"));
    CHECK(explain_layout_mismatch(layout, rank1).error().field == "tp_rank");
  }
  SECTION("same block shape, different cache group id") {
    auto regrouped = layout;
    regrouped.cache_groups[1].group_id = CacheGroupId{2};
    CHECK(regrouped.row_bytes() == layout.row_bytes());
    const auto consumer = build(regrouped, base_artifact(), tenant_namespace(), text_input());
    require_rejected(producer, consumer, CompatibilityField::cache_layout_sha256);
    const auto v = compatible_explained(producer, consumer, layout, regrouped);
    REQUIRE(v.layout_difference.has_value());
    CHECK(v.layout_difference->field == "cache_groups[1].id");
    CHECK(v.layout_difference->producer == "1");
    CHECK(v.layout_difference->consumer == "2");
  }
  SECTION("same total bytes, layers split differently between the groups") {
    auto resplit = layout;
    resplit.cache_groups[0].layer_end = 16;
    resplit.cache_groups[1].layer_start = 16;
    CHECK(resplit.row_bytes() == layout.row_bytes());
    const auto consumer = build(resplit, base_artifact(), tenant_namespace(), text_input());
    const auto v = compatible_explained(producer, consumer, layout, resplit);
    CHECK(v.failing_field == CompatibilityField::cache_layout_sha256);
    REQUIRE(v.layout_difference.has_value());
    CHECK(v.layout_difference->field == "cache_groups[0].layers");
    CHECK(v.layout_difference->operands == "producer [0,24) vs consumer [0,16)");
  }
}

TEST_CASE("rejection trace: a dtype or quantization mismatch fails on cache_layout_sha256",
          "[identity][compat][trace]") {
  const auto layout = loop4_layout();
  const auto producer = base_manifest();

  SECTION("same scalar bytes, different dtype") {
    auto bf16 = layout;
    bf16.cache_groups[0].k_dtype = ScalarType::bf16;
    CHECK(scalar_bytes(ScalarType::bf16) == scalar_bytes(ScalarType::fp16));
    CHECK(bf16.row_bytes() == layout.row_bytes());  // identical raw bytes, other numbers
    const auto consumer = build(bf16, base_artifact(), tenant_namespace(), text_input());
    require_rejected(producer, consumer, CompatibilityField::cache_layout_sha256);
    const auto v = compatible_explained(producer, consumer, layout, bf16);
    REQUIRE(v.layout_difference.has_value());
    CHECK(v.layout_difference->field == "cache_groups[0].k_dtype");
    CHECK(v.layout_difference->aspect == LayoutAspect::representation);
    CHECK(v.layout_difference->operands == "producer fp16 vs consumer bf16");
  }
  SECTION("same dtype, different quantization schema") {
    auto quant = layout;
    quant.quantization_schema = "int8-per-channel-absmax";
    const auto consumer = build(quant, base_artifact(), tenant_namespace(), text_input());
    require_rejected(producer, consumer, CompatibilityField::cache_layout_sha256);
    const auto v = compatible_explained(producer, consumer, layout, quant);
    REQUIRE(v.layout_difference.has_value());
    CHECK(v.layout_difference->field == "quantization_schema");
    CHECK(contains(v.error.reason, "quantization_schema"));
  }
}

TEST_CASE("multimodal and prompt-embedding side inputs are equality-bearing", "[identity][compat]") {
  auto in = text_input();
  in.side_inputs = {{SideInputKind::multimodal_feature, "mm:sha256:7d1e0c55aa01", 3, 4}};
  const auto producer = base_manifest(in);

  SECTION("different multimodal feature under the same placeholder tokens") {
    auto other = in;
    other.side_inputs[0].identity = "mm:sha256:7d1e0c55aa02";
    const auto consumer = base_manifest(other);
    require_rejected(producer, consumer, CompatibilityField::input_side_data_identity);
    CHECK(contains(compatible(producer, consumer).error.reason, "entry 0 identity"));
  }
  SECTION("same feature at another offset") {
    auto other = in;
    other.side_inputs[0].token_offset = 4;
    require_rejected(producer, base_manifest(other), CompatibilityField::input_side_data_identity);
  }
  SECTION("a prompt embedding instead of nothing") {
    require_rejected(base_manifest(), producer, CompatibilityField::input_side_data_identity);
  }
  SECTION("different prompt embeddings") {
    auto a = text_input();
    auto b = text_input();
    a.side_inputs = {{SideInputKind::prompt_embedding, sha256(std::string("embedding-a")).hex(), 0, 16}};
    b.side_inputs = {{SideInputKind::prompt_embedding, sha256(std::string("embedding-b")).hex(), 0, 16}};
    require_rejected(base_manifest(a), base_manifest(b), CompatibilityField::input_side_data_identity);
  }
  SECTION("the order in which side inputs are supplied does not matter") {
    auto a = text_input();
    a.side_inputs = {{SideInputKind::prompt_embedding, "pe:1", 8, 2},
                     {SideInputKind::multimodal_feature, "mm:1", 0, 4}};
    auto b = a;
    std::swap(b.side_inputs[0], b.side_inputs[1]);
    CHECK(compatible(base_manifest(a), base_manifest(b)).ok());
    CHECK(compatibility_digest(base_manifest(a)) == compatibility_digest(base_manifest(b)));
  }
}

TEST_CASE("tokenizer, chat template, request id and sampling policy are provenance only", "[identity][compat]") {
  const auto producer = base_manifest();
  auto in = text_input("req-77");
  in.provenance.tokenizer_revision = "tok-r2";
  in.provenance.chat_template_revision = "chat-r9";
  in.provenance.sampling_policy = "temperature=0 top_p=1 stop=[]";
  const auto consumer = base_manifest(in);
  CHECK_FALSE(producer == consumer);           // they are recorded ...
  CHECK(compatible(producer, consumer).ok());  // ... but never decide reuse
  CHECK(compatibility_digest(producer) == compatibility_digest(consumer));
}

TEST_CASE("the first failing field in spec order is reported", "[identity][compat]") {
  const auto base = base_manifest();
  auto two = base;
  two.publication_generation += 1;  // spec position 12
  two.adapter_identity = "lora:x";  // spec position 4
  require_rejected(base, two, CompatibilityField::adapter_identity);

  auto three = base;
  three.covered_token_ids[15] ^= 1;             // position 7
  three.cache_layout_sha256.bytes[31] ^= 0x01;  // position 2
  three.cache_salt = "another-salt";            // position 11
  require_rejected(base, three, CompatibilityField::cache_layout_sha256);

  auto gen = base;
  gen.namespace_generation = NamespaceGeneration{2};  // generation, right after the name
  gen.cache_salt = "x";
  require_rejected(base, gen, CompatibilityField::namespace_generation);
}

TEST_CASE("reasons carry both operands but never token values or salts", "[identity][compat]") {
  const auto base = base_manifest();
  auto tokens = base;
  tokens.covered_token_ids[5] = 99999;
  const auto vt = compatible(base, tokens);
  CHECK(vt.error.reason ==
        "covered_token_ids differs: first difference at token index 5 (producer 16 tokens "
        "vs consumer 16 tokens; token values withheld)");
  CHECK_FALSE(contains(vt.error.reason, "35308"));

  auto salt = base;
  salt.cache_salt = "0f0f0f0f0f0f0f0f";
  const auto vs = compatible(base, salt);
  CHECK_FALSE(contains(vs.error.reason, base.cache_salt));
  CHECK_FALSE(contains(vs.error.reason, salt.cache_salt));
  CHECK(contains(vs.error.reason, "sha256:" + sha256(base.cache_salt).hex().substr(0, 8)));

  auto model = base;
  model.model_generation = 9;
  CHECK(compatible(base, model).error.reason == "model_generation differs: producer 1 vs consumer 9");

  // Two 64-hex digests are shown around their first difference, not by a
  // common prefix that would make them look equal.
  auto abi = base;
  abi.cache_abi_sha256[40] = abi.cache_abi_sha256[40] == '0' ? '1' : '0';
  const auto va = compatible(base, abi);
  CHECK(contains(va.error.reason, "(64 vs 64 chars, first difference at char 40)"));
  CHECK(contains(va.error.reason, "\"..." + base.cache_abi_sha256.substr(32, 16) + "...\""));
}

TEST_CASE("compatible_explained refuses to name a field from layouts that are not the manifests'",
          "[identity][compat]") {
  const auto layout = loop4_layout();
  auto rank1 = layout;
  rank1.tp_rank = 1;
  const auto producer = base_manifest();
  const auto consumer = build(rank1, base_artifact(), tenant_namespace(), text_input());
  const auto v = compatible_explained(producer, consumer, layout, layout);
  CHECK(v.failing_field == CompatibilityField::cache_layout_sha256);
  CHECK_FALSE(v.layout_difference.has_value());
  CHECK(contains(v.error.reason, "not the manifests' layouts"));
  // A verdict that is not about the layout is passed through unchanged.
  auto adapter = consumer;
  adapter.cache_layout_sha256 = producer.cache_layout_sha256;
  adapter.adapter_identity = "lora:y";
  CHECK(compatible_explained(producer, adapter, layout, rank1).error == compatible(producer, adapter).error);
}

TEST_CASE("malformed covered inputs are typed errors naming the field", "[identity][compat]") {
  auto outside = text_input();
  outside.side_inputs = {{SideInputKind::multimodal_feature, "mm:1", 12, 5}};  // tokens [12,17) of 16
  auto r = build_compatibility_manifest(loop4_layout(), base_artifact(), tenant_namespace(), outside);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::invalid_manifest);
  CHECK(r.error().field == "input_side_data[0].token_offset");

  auto empty = text_input();
  empty.token_ids.clear();
  CHECK(build_compatibility_manifest(loop4_layout(), base_artifact(), tenant_namespace(), empty).error().field ==
        "covered_token_ids");

  auto bad_digest = base_artifact();
  bad_digest.position_contract_sha256 = "rope";
  CHECK(build_compatibility_manifest(loop4_layout(), bad_digest, tenant_namespace(), text_input()).error().field ==
        "position_contract_sha256");

  auto ns = tenant_namespace();
  ns.model_cache_generation = 2;  // the layout says model generation 1
  CHECK(build_compatibility_manifest(loop4_layout(), base_artifact(), ns, text_input()).error().field ==
        "model_cache_generation");

  auto m = base_manifest();
  m.input_side_data = {{SideInputKind::prompt_embedding, "pe", 4, 1}, {SideInputKind::multimodal_feature, "mm", 0, 1}};
  CHECK(validate_compatibility_manifest(m).error().field == "input_side_data[1]");  // not canonical order
}

TEST_CASE("isolation namespaces: name, validation and digest", "[identity][namespace]") {
  const auto ns = tenant_namespace();
  CHECK(namespace_name(ns) == "prod-eu1/tenant-a");
  CHECK(validate_isolation_namespace(ns).ok());
  auto slash = ns;
  slash.tenant_id = "a/b";  // would make "prod-eu1/a/b" ambiguous
  CHECK(validate_isolation_namespace(slash).error().field == "tenant_id");
  auto empty = ns;
  empty.deployment_namespace.clear();
  CHECK(validate_isolation_namespace(empty).error().field == "deployment_namespace");

  const auto d0 = isolation_namespace_digest(ns);
  CHECK(d0 == isolation_namespace_digest(tenant_namespace()));
  std::vector<CacheIsolationNamespace> variants(6, ns);
  variants[0].deployment_namespace = "prod-eu2";
  variants[1].tenant_id = "tenant-b";
  variants[2].generation = NamespaceGeneration{2};
  variants[3].cache_salt = "other";
  variants[4].model_cache_generation = 2;
  variants[5].publication_policy = PublicationPolicy::private_to_request;
  for (size_t i = 0; i < variants.size(); ++i) {
    INFO("variant " << i);
    CHECK(isolation_namespace_digest(variants[i]) != d0);
  }
}
