// [prompt] PromptModuleService, the node side of Prompt Cache (0x0CB), as a
// seeded state machine against a brute-force model: schema registrations
// (same, newer, older, changed generations), publications (stale schema
// generations, refused leases, replacements), assemblies (each module's
// hit or miss reason decided by the model from what was stored), lease
// refusals at assembly, and purges. After every step validate() holds, the
// store holds what the model holds, and every node lease the service lets
// go is one it was given. Prints the seed on failure.
#include "services/prompt/prompt_module_service.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "tests/reuse/reuse_fixture.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kBlockTokens = 16;
constexpr uint32_t kGroups = 2;
const std::vector<PoolGenerationRef> kPools{{PoolId{1}, PoolGeneration{3}}, {PoolId{2}, PoolGeneration{3}}};

// Generation g declares "system" at [8g + shift, +40) and "doc" (doc_id) at
// [100 + 8g + shift, +40): every generation moves both modules.
std::string schema_toml(uint64_t g, uint32_t shift = 0) {
  const uint32_t s = static_cast<uint32_t>(8 * g) + shift;
  std::string t = "schema_id = \"faq\"\ngeneration = ";
  t += std::to_string(g);
  t += "\n[[module]]\nid = \"system\"\npositions = [";
  t += std::to_string(s) + ", " + std::to_string(s + 40);
  t += "]\n[[module]]\nid = \"doc\"\npositions = [";
  t += std::to_string(100 + s) + ", " + std::to_string(140 + s);
  t += "]\nparameters = [\"doc_id\"]\n";
  return t;
}
uint32_t module_begin(const std::string& module, uint64_t g) {
  return static_cast<uint32_t>(8 * g) + (module == "doc" ? 100 : 0);
}

std::vector<TokenId> module_tokens(uint32_t variant, uint32_t n) {
  std::vector<TokenId> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = static_cast<TokenId>(variant * 1000 + i);
  return t;
}

struct StoredModule {
  std::vector<TokenId> tokens;
  uint64_t schema_generation = 0;
  uint32_t begin = 0;
  std::vector<LeaseId> leases;
};

}  // namespace

TEST_CASE("prompt module service property: registrations, publications, assemblies and purges follow the model",
          "[prompt]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return rng() % n; };

  AuthorityFixture auth = AuthorityFixture::make();
  const AuthorizedLookup grant = auth.grant("worker-a", kTenantA);
  const auto key_for = [&](const std::vector<TokenId>& tokens) {
    std::vector<uint32_t> ids{0};  // a key needs one token; an empty prompt is the assembly's to refuse
    if (!tokens.empty()) ids.assign(tokens.begin(), tokens.end());
    return ReuseKeyAnswer{AuthorizationAnswer(grant), KeyEvidence{request_manifest(auth.authority, grant, ids)}};
  };

  PromptModuleService service(kPools, kBlockTokens, kGroups);
  uint64_t registered = 0;                                            // the current generation; 0: none
  std::map<std::pair<std::string, std::string>, StoredModule> model;  // (module, doc_id) -> what is stored
  std::set<uint64_t> leases_held;
  uint64_t next_lease = 1, next_block = 10;

  uint64_t hits_seen = 0;
  for (int step = 0; step < 400; ++step) {
    const uint64_t op = pick(10);
    INFO("step " << step << " op " << op);
    if (op < 2) {
      // Register: the next generation, the current one again (same or
      // changed), or an older one.
      const uint64_t kind = pick(4);
      const uint64_t g = kind == 0 && registered > 1 ? registered - 1 : (kind == 1 ? registered : registered + 1);
      const uint32_t shift = kind == 2 && registered > 0 ? 4 : 0;
      const uint64_t gen = kind == 2 && registered > 0 ? registered : std::max<uint64_t>(g, 1);
      Result<PromptSchemaReceipt> r =
          service.register_schema(key_for({}), PromptSchemaRequest{{}, kTenantA, schema_toml(gen, shift)});
      const bool expect_ok = registered == 0 || gen > registered || (gen == registered && shift == 0);
      REQUIRE(r.ok() == expect_ok);
      if (!r.ok()) {
        CHECK(r.error().code == ErrorCode::stale_generation);
        continue;
      }
      uint32_t stale = 0;
      for (const auto& [k, m] : model) stale += m.schema_generation < gen ? 1 : 0;
      CHECK(r->stale_modules == stale);
      registered = gen;
    } else if (op < 5 && registered > 0) {
      // Publish a module computed at the current (or a stale) generation.
      const std::string module = pick(2) ? "doc" : "system";
      const std::string doc = module == "doc" ? (pick(2) ? "a" : "b") : "";
      const uint32_t variant = static_cast<uint32_t>(pick(2));
      const uint32_t n = static_cast<uint32_t>(1 + pick(40));
      const uint64_t gen = pick(8) == 0 && registered > 1 ? registered - 1 : registered;
      PromptModulePublishRequest p{{}, kTenantA, "faq", gen, module, {}, module_tokens(variant, n), RequestId{5}};
      if (!doc.empty()) p.parameters.push_back(PromptParameter{"doc_id", doc});
      Result<PromptModuleService::Publication> prepared = service.prepare_publish(key_for(p.tokens), p);
      if (gen != registered) {
        REQUIRE_FALSE(prepared.ok());
        CHECK(prepared.error().code == ErrorCode::stale_generation);
        continue;
      }
      REQUIRE(prepared.ok());
      BlockTableView view;
      view.context_tokens = n;
      view.groups.assign(kGroups, {});
      const uint32_t blocks = (n + kBlockTokens - 1) / kBlockTokens;
      for (uint32_t g = 0; g < kGroups; ++g)
        for (uint32_t j = 0; j < blocks; ++j)
          view.groups[g].push_back(BlockTableEntry{
              {PoolId{g + 1}, CacheGroupId{g}, PhysicalBlockId{uint32_t(next_block++)}, BlockGeneration{1}},
              std::min(kBlockTokens, n - j * kBlockTokens),
              CacheKey{0}});
      Result<std::vector<PhysicalBlockHandle>> handles = service.module_blocks(*prepared, view);
      REQUIRE(handles.ok());
      REQUIRE(handles->size() == blocks * kGroups);
      const bool refuse = pick(6) == 0;
      std::vector<std::optional<LeaseId>> granted;
      for (size_t i = 0; i < handles->size(); ++i)
        granted.push_back(refuse && i + 1 == handles->size() ? std::nullopt : std::optional(LeaseId{next_lease++}));
      PromptModuleService::Published done = service.commit_publish(*prepared, *handles, granted, {});
      std::multiset<uint64_t> expect_released, released;
      for (LeaseId l : done.released) released.insert(l.value);
      const auto key = std::pair{module, doc};
      if (refuse) {
        REQUIRE(done.error.has_value());
        for (const auto& l : granted)
          if (l) expect_released.insert(l->value);
      } else {
        REQUIRE(done.receipt.has_value());
        CHECK(done.receipt->replaced == model.contains(key));
        CHECK(done.receipt->receipt.position_ids.front() == module_begin(module, gen));
        CHECK(done.receipt->receipt.physical_refs.size() == blocks * kGroups);
        if (model.contains(key))
          for (LeaseId l : model[key].leases) expect_released.insert(l.value);
        StoredModule stored{p.tokens, gen, module_begin(module, gen), {}};
        for (const auto& l : granted) stored.leases.push_back(*l);
        model[key] = stored;
      }
      CHECK(released == expect_released);
    } else if (op < 9 && registered > 0) {
      // Assemble: system, free text in the gap before the document, the document.
      const std::string doc = pick(2) ? "a" : "b";
      const uint32_t sys_variant = static_cast<uint32_t>(pick(2)), doc_variant = static_cast<uint32_t>(pick(2));
      const uint32_t sys_n = static_cast<uint32_t>(1 + pick(40)), doc_n = static_cast<uint32_t>(1 + pick(40));
      // Half the time a module's text is what was stored for it (a likely hit).
      const auto text = [&](const std::string& module, const std::string& d, uint32_t variant, uint32_t n) {
        const auto it = model.find({module, d});
        return it != model.end() && pick(2) ? it->second.tokens : module_tokens(variant, n);
      };
      PromptAssembleRequest a{{}, kTenantA, "faq", registered, {}};
      a.items.push_back(PromptItemSpec{"system", {}, text("system", "", sys_variant, sys_n), 0, true});
      a.items.push_back(PromptItemSpec{"", {}, {7, 8, 9}, module_begin("system", registered) + 45, true});
      a.items.push_back(
          PromptItemSpec{"doc", {PromptParameter{"doc_id", doc}}, text("doc", doc, doc_variant, doc_n), 0, true});
      std::vector<TokenId> all;
      for (const PromptItemSpec& i : a.items) all.insert(all.end(), i.tokens.begin(), i.tokens.end());
      Result<PromptModuleService::Assembly> assembly = service.assemble(key_for(all), a);
      REQUIRE(assembly.ok());
      REQUIRE(assembly->receipt.segments.size() == 3);
      // The model's verdict per module: T, then Pi, then S.
      const auto expect = [&](const std::string& module, const std::string& d,
                              const std::vector<TokenId>& tokens) -> std::optional<RejectionReason> {
        const auto it = model.find({module, d});
        if (it == model.end()) return RejectionReason::no_candidate;
        if (it->second.tokens != tokens || it->second.begin != module_begin(module, registered) ||
            it->second.schema_generation != registered)
          return RejectionReason::module_position_mismatch;
        return std::nullopt;
      };
      const std::optional<RejectionReason> want[3] = {expect("system", "", a.items[0].tokens), std::nullopt,
                                                      expect("doc", doc, a.items[2].tokens)};
      size_t hits = 0;
      for (size_t s = 0; s < 3; ++s) {
        const PromptSegment& seg = assembly->receipt.segments[s];
        if (s == 1) {
          CHECK(std::holds_alternative<PromptComputed>(seg.outcome));
          continue;
        }
        if (want[s]) {
          const auto* miss = std::get_if<PromptModuleMiss>(&seg.outcome);
          REQUIRE(miss != nullptr);
          CHECK(miss->reason == *want[s]);
        } else {
          REQUIRE(std::holds_alternative<PromptModuleUse>(seg.outcome));
          ++hits;
          ++hits_seen;
        }
      }
      REQUIRE(assembly->leases.size() == hits);
      // The allocator grants or refuses each hit's leases (all or none).
      std::vector<ReuseLeaseAnswer> answers;
      std::vector<bool> refused;
      for (const ReuseLeaseRequest& l : assembly->leases) {
        ReuseLeaseAnswer answer;
        refused.push_back(pick(5) == 0);
        if (refused.back()) {
          answer.lease = LeaseRefused{"recycled"};
        } else {
          LeaseGrant g;
          for (size_t i = 0; i < l.handles.size(); ++i) g.leases.push_back(LeaseId{next_lease++});
          g.covered_handles = l.handles;
          answer.lease = g;
          answer.valid_frontier_tokens = l.bundles * kBlockTokens;
        }
        answers.push_back(std::move(answer));
      }
      std::vector<LeaseId> unused;
      const PromptAssemblyReceipt receipt = service.leased(std::move(*assembly), answers, unused);
      CHECK(unused.empty());
      uint64_t reused = 0, computed = 0;
      size_t k = 0;
      for (const PromptSegment& seg : receipt.segments) {
        if (const auto* use = std::get_if<PromptModuleUse>(&seg.outcome)) {
          CHECK(use->leases.size() == use->handles.size());
          reused += seg.tokens;
        } else {
          computed += seg.tokens;
        }
        if (std::holds_alternative<PromptModuleUse>(seg.outcome) ||
            (std::holds_alternative<PromptModuleMiss>(seg.outcome) &&
             std::get<PromptModuleMiss>(seg.outcome).reason == RejectionReason::lease_unavailable))
          CHECK(refused.at(k++) == std::holds_alternative<PromptModuleMiss>(seg.outcome));
      }
      CHECK(receipt.reused_tokens == reused);
      CHECK(receipt.computed_tokens == computed);
      CHECK(reused + computed == all.size());
    } else {
      // A purge of the namespace's current generation retires every module.
      std::multiset<uint64_t> expect_released, released;
      for (const auto& [key, m] : model)
        for (LeaseId l : m.leases) expect_released.insert(l.value);
      for (LeaseId l : service.retire(kTenantA, grant.generation())) released.insert(l.value);
      CHECK(released == expect_released);
      model.clear();
    }
    REQUIRE(service.validate().ok());
    OwnerStats stats;
    service.put_stats(stats);
    for (const StatValue& v : stats.values)
      if (v.name == "prompt_modules") CHECK(v.value == static_cast<int64_t>(model.size()));
    std::multiset<uint64_t> held, expect_held;
    for (LeaseId l : service.all_leases()) held.insert(l.value);
    for (const auto& [key, m] : model)
      for (LeaseId l : m.leases) expect_held.insert(l.value);
    CHECK(held == expect_held);
  }
  CHECK(hits_seen > 0);
}

}  // namespace kvrt::test
