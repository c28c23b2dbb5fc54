// Invalidation produces a successor namespace generation (spec 0x01A
// "Invalidation Produces A Successor Namespace"): for each of the six causes,
// the old generation is frozen for its live owners, stale lookups and
// publications are rejected, admissions go to the successor, and an
// old-generation manifest never compares compatible with a successor one.
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "tests/support/identity_fixtures.hpp"
#include "services/identity/compatibility_check.hpp"
#include "services/identity/namespace_registry.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

const std::string kName = "prod-eu1/tenant-a";

// A successor that changes exactly the facts `cause` owns; `n` makes repeated
// invalidations distinct.
GenerationFacts successor_for(InvalidationCause cause, GenerationFacts f, uint64_t n = 2) {
  const std::string tag = std::to_string(n);
  switch (cause) {
    case InvalidationCause::weights:  // new weights: new logical ABI and model generation (M5.1)
      f.layout.model_generation += 1;
      f.layout.logical_cache_abi_sha256 = sha256("weights-v" + tag).hex();
      break;
    case InvalidationCause::adapter:
      f.artifact.adapter_identity = "lora:support-bot@" + tag;
      break;
    case InvalidationCause::transform:
      f.artifact.weight_transform_identity = "fused-qkv-v" + tag;
      break;
    case InvalidationCause::positions:
      f.artifact.position_contract_sha256 = contract_digest("rope theta=" + tag + "000000");
      f.layout.position_contract_id = "rope-theta" + tag + "m-v1";
      break;
    case InvalidationCause::representation:
      f.layout.cache_groups[0].k_dtype =
          f.layout.cache_groups[0].k_dtype == ScalarType::fp8_e4m3 ? ScalarType::fp16 : ScalarType::fp8_e4m3;
      f.layout.quantization_schema = "fp8-per-tensor-v" + tag;
      break;
    case InvalidationCause::shard:
      f.layout.tp_rank = 1 - f.layout.tp_rank;
      f.layout.manifest_id = "loop4-two-group-tp" + std::to_string(f.layout.tp_rank) + "of2";
      break;
  }
  return f;
}

struct Expected {
  CompatibilityField field;  // first failing field, old vs successor manifest
  const char* layout_field;  // explain_layout_mismatch's field, when the layout differs
};

Expected expected_for(InvalidationCause cause) {
  using F = CompatibilityField;
  switch (cause) {
    case InvalidationCause::weights:
      return {F::cache_abi_sha256, "logical_cache_abi_sha256"};
    case InvalidationCause::adapter:
      return {F::adapter_identity, nullptr};
    case InvalidationCause::transform:
      return {F::weight_transform_identity, nullptr};
    case InvalidationCause::positions:
      return {F::cache_layout_sha256, "position_contract_id"};
    case InvalidationCause::representation:
      return {F::cache_layout_sha256, "cache_groups[0].k_dtype"};
    case InvalidationCause::shard:
      return {F::cache_layout_sha256, "tp_rank"};
  }
  return {F::cache_abi_sha256, nullptr};
}

CacheNamespaceRegistry registry_with_tenant() {
  CacheNamespaceRegistry reg;
  REQUIRE(reg.create(tenant_namespace(), base_facts()).ok());
  REQUIRE(reg.validate().ok());
  return reg;
}

void require_valid(const CacheNamespaceRegistry& reg) {
  const auto s = reg.validate();
  INFO((s.ok() ? std::string("ok") : s.error().describe()));
  REQUIRE(s.ok());
}

}  // namespace

TEST_CASE("each invalidation cause produces a successor generation", "[identity][invalidation]") {
  for (InvalidationCause cause : kInvalidationCauses) {
    INFO("cause " << to_string(cause));
    auto reg = registry_with_tenant();
    const auto old_ticket = reg.admit(kName).value();
    const auto old_manifest = reg.manifest_for(old_ticket, text_input()).value();
    REQUIRE(reg.authorize_lookup(old_manifest).ok());

    const auto successor = successor_for(cause, base_facts());
    auto receipt = reg.invalidate(kName, cause, successor);
    REQUIRE(receipt.ok());
    require_valid(reg);
    CHECK(receipt->cause == cause);
    CHECK(receipt->old_generation == NamespaceGeneration{1});
    CHECK(receipt->new_generation == NamespaceGeneration{2});
    CHECK(receipt->old_live_admissions == 1);
    CHECK_FALSE(receipt->old_reclaimed);
    CHECK(receipt->new_layout_sha256 == successor.layout.digest());
    CHECK(receipt->changed_facts == changed_facts(base_facts(), successor));
    CHECK(reg.history(kName) == std::vector<InvalidationReceipt>{*receipt});

    // Step 1: the old generation is frozen for its live owner, who can still
    // describe its own blocks.
    CHECK(reg.find(kName, NamespaceGeneration{1})->state == GenerationState::frozen);
    CHECK(reg.manifest_for(old_ticket, text_input()).value() == old_manifest);
    // Step 2: old entries are neither served to lookups nor published.
    const auto stale = reg.authorize_lookup(old_manifest);
    CHECK(stale.error().code == ErrorCode::stale_generation);
    CHECK(stale.error().field == "namespace_generation");
    CHECK(reg.authorize_publication(old_manifest).error().code == ErrorCode::stale_generation);
    // Relabelling the old manifest with the new generation does not help: the
    // facts it was computed under are not the successor's.
    auto relabelled = old_manifest;
    relabelled.namespace_generation = NamespaceGeneration{2};
    const auto relabel = reg.authorize_lookup(relabelled);
    CHECK(relabel.error().code == ErrorCode::incompatible);
    CHECK(relabel.error().field == to_string(expected_for(cause).field));

    // Steps 3-5: admission is against the successor only.
    const auto new_ticket = reg.admit(kName).value();
    CHECK(new_ticket.generation == NamespaceGeneration{2});
    const auto new_manifest = reg.manifest_for(new_ticket, text_input()).value();
    CHECK(reg.authorize_lookup(new_manifest).ok());
    CHECK(reg.authorize_publication(new_manifest).ok());
    CHECK(new_manifest.namespace_generation == NamespaceGeneration{2});
    CHECK(new_manifest.model_generation == successor.layout.model_generation);

    // The old manifest never compares compatible with the successor's.
    const auto v = compatible_explained(old_manifest, new_manifest, base_facts().layout, successor.layout);
    INFO(v.error.describe());
    CHECK(v.failing_field == expected_for(cause).field);
    CHECK(compatible(new_manifest, old_manifest).failing_field == v.failing_field);
    if (const char* lf = expected_for(cause).layout_field) {
      CHECK(explain_layout_mismatch(base_facts().layout, successor.layout).error().field == lf);
    }

    // Step 6: the last owner's release reclaims the old generation.
    CHECK(reg.drain_reclamations().empty());
    REQUIRE(reg.release(old_ticket).ok());
    require_valid(reg);
    CHECK(reg.find(kName, NamespaceGeneration{1})->state == GenerationState::reclaimed);
    CHECK(reg.drain_reclamations() == std::vector<ReclamationRecord>{{kName, NamespaceGeneration{1}}});
    CHECK(reg.authorize_lookup(old_manifest).error().code == ErrorCode::stale_generation);
    REQUIRE(reg.release(new_ticket).ok());
    CHECK(reg.current(kName)->state == GenerationState::current);  // the current one is never reclaimed
    require_valid(reg);
  }
}

TEST_CASE("a generation with no live owner is reclaimed at invalidation", "[identity][invalidation]") {
  auto reg = registry_with_tenant();
  auto receipt =
      reg.invalidate(kName, InvalidationCause::adapter, successor_for(InvalidationCause::adapter, base_facts()));
  REQUIRE(receipt.ok());
  CHECK(receipt->old_reclaimed);
  CHECK(receipt->old_live_admissions == 0);
  CHECK(reg.drain_reclamations() == std::vector<ReclamationRecord>{{kName, NamespaceGeneration{1}}});
  require_valid(reg);
}

TEST_CASE("an invalidation that changes nothing its cause owns is rejected, state unchanged",
          "[identity][invalidation]") {
  auto reg = registry_with_tenant();
  const auto ticket = reg.admit(kName).value();
  const auto before = reg.state_digest();
  const std::map<InvalidationCause, std::string> owned{
      {InvalidationCause::weights, "model_generation"},
      {InvalidationCause::adapter, "adapter_identity"},
      {InvalidationCause::transform, "weight_transform_identity"},
      {InvalidationCause::positions, "position_contract_sha256"},
      {InvalidationCause::representation, "representation"},
      {InvalidationCause::shard, "ownership"},
  };
  for (InvalidationCause cause : kInvalidationCauses) {
    INFO("cause " << to_string(cause));
    // The successor differs, but only in facts another cause owns.
    const auto other = cause == InvalidationCause::adapter ? InvalidationCause::transform : InvalidationCause::adapter;
    const auto r = reg.invalidate(kName, cause, successor_for(other, base_facts()));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
    CHECK(r.error().field == owned.at(cause));
    CHECK(reg.state_digest() == before);
  }
  auto backwards = successor_for(InvalidationCause::adapter, base_facts());
  backwards.layout.model_generation = 0;
  CHECK(reg.invalidate(kName, InvalidationCause::adapter, backwards).error().field == "model_generation");
  auto broken = successor_for(InvalidationCause::shard, base_facts());
  broken.layout.tp_rank = 5;  // outside tp_world_size 2
  CHECK(reg.invalidate(kName, InvalidationCause::shard, broken).error().field == "tp_rank");
  CHECK(reg.invalidate("prod-eu1/nobody", InvalidationCause::adapter,
                       successor_for(InvalidationCause::adapter, base_facts()))
            .error()
            .field == "cache_isolation_namespace");
  CHECK(reg.state_digest() == before);
  CHECK(reg.current(kName)->generation() == NamespaceGeneration{1});
  CHECK(reg.find(kName, NamespaceGeneration{1})->live_admissions.count(ticket.ticket_id) == 1);
  require_valid(reg);
}

TEST_CASE("caller errors against the registry are typed and leave it unchanged", "[identity][invalidation]") {
  auto reg = registry_with_tenant();
  const auto ticket = reg.admit(kName).value();
  const auto manifest = reg.manifest_for(ticket, text_input()).value();
  const auto before = reg.state_digest();

  CHECK(reg.create(tenant_namespace(), base_facts()).error().field == "cache_isolation_namespace");
  CHECK(reg.admit("prod-eu1/nobody").error().code == ErrorCode::invalid_argument);
  auto unknown_gen = manifest;
  unknown_gen.namespace_generation = NamespaceGeneration{7};
  CHECK(reg.authorize_lookup(unknown_gen).error().field == "namespace_generation");
  CHECK(reg.authorize_lookup(unknown_gen).error().code == ErrorCode::invalid_argument);
  auto foreign = manifest;
  foreign.cache_isolation_namespace = "prod-eu1/tenant-b";
  CHECK(reg.authorize_lookup(foreign).error().field == "cache_isolation_namespace");
  auto salted = manifest;
  salted.cache_salt = "guessed";
  CHECK(reg.authorize_lookup(salted).error().field == "cache_salt");
  auto forged = ticket;
  forged.ticket_id += 100;
  CHECK(reg.release(forged).error().field == "ticket");
  CHECK(reg.manifest_for(forged, text_input()).error().field == "ticket");
  CHECK(reg.state_digest() == before);

  REQUIRE(reg.release(ticket).ok());
  CHECK(reg.release(ticket).error().field == "ticket");  // released twice
  require_valid(reg);
}

TEST_CASE("successive invalidations keep generations strictly increasing", "[identity][invalidation]") {
  auto reg = registry_with_tenant();
  auto facts = base_facts();
  std::vector<AdmissionTicket> held;
  uint64_t n = 2;
  for (InvalidationCause cause : kInvalidationCauses) {
    held.push_back(reg.admit(kName).value());
    facts = successor_for(cause, facts, n++);
    REQUIRE(reg.invalidate(kName, cause, facts).ok());
    require_valid(reg);
  }
  CHECK(reg.current(kName)->generation() == NamespaceGeneration{7});
  const auto history = reg.history(kName);
  REQUIRE(history.size() == 6);
  for (size_t i = 0; i < history.size(); ++i) {
    CHECK(history[i].cause == kInvalidationCauses[i]);
    CHECK(history[i].new_generation.value == history[i].old_generation.value + 1);
  }
  for (uint64_t g = 1; g <= 6; ++g) CHECK(reg.find(kName, NamespaceGeneration{g})->state == GenerationState::frozen);
  for (const auto& t : held) REQUIRE(reg.release(t).ok());
  CHECK(reg.drain_reclamations().size() == 6);
  require_valid(reg);
}

TEST_CASE("random admit/release/invalidate sequences match a brute-force model", "[identity][invalidation][property]") {
  const uint64_t seed = Catch::rngSeed() != 0 ? Catch::rngSeed() : 0x1A1Au;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto reg = registry_with_tenant();

  // Model: per generation, the live tickets; the newest generation is current.
  std::map<uint64_t, std::vector<AdmissionTicket>> live{{1, {}}};
  std::map<uint64_t, CacheCompatibilityManifest> manifests;  // one manifest per generation
  std::vector<ReclamationRecord> expected_reclaims;
  auto facts = base_facts();
  uint64_t current = 1, n = 2;

  for (int step = 0; step < 600; ++step) {
    INFO("step " << step);
    const auto op = rng() % 10;
    if (op < 4) {  // admit
      auto t = reg.admit(kName).value();
      REQUIRE(t.generation.value == current);
      if (!manifests.contains(current)) manifests[current] = reg.manifest_for(t, text_input()).value();
      live[current].push_back(t);
    } else if (op < 8) {  // release a random live ticket
      std::vector<uint64_t> gens;
      for (auto& [g, ts] : live)
        if (!ts.empty()) gens.push_back(g);
      if (gens.empty()) continue;
      const uint64_t g = gens[rng() % gens.size()];
      auto& ts = live[g];
      const size_t i = rng() % ts.size();
      REQUIRE(reg.release(ts[i]).ok());
      ts.erase(ts.begin() + static_cast<std::ptrdiff_t>(i));
      if (g != current && ts.empty()) expected_reclaims.push_back({kName, NamespaceGeneration{g}});
    } else {  // invalidate with a random cause
      const auto cause = kInvalidationCauses[rng() % kInvalidationCauses.size()];
      facts = successor_for(cause, facts, n++);
      REQUIRE(reg.invalidate(kName, cause, facts).ok());
      if (live[current].empty()) expected_reclaims.push_back({kName, NamespaceGeneration{current}});
      live[++current] = {};
    }
    require_valid(reg);
    for (const auto& [g, ts] : live) {
      const auto* rec = reg.find(kName, NamespaceGeneration{g});
      REQUIRE(rec != nullptr);
      REQUIRE(rec->live_admissions.size() == ts.size());
      const auto expected_state = g == current ? GenerationState::current
                                  : ts.empty() ? GenerationState::reclaimed
                                               : GenerationState::frozen;
      REQUIRE(rec->state == expected_state);
    }
    for (const auto& [g, m] : manifests) {
      const auto s = reg.authorize_lookup(m);
      REQUIRE(s.ok() == (g == current));
      if (g != current) REQUIRE(s.error().code == ErrorCode::stale_generation);
    }
  }
  CHECK(reg.drain_reclamations() == expected_reclaims);
}
