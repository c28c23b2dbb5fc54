// The compatibility gate in front of the prefix index (0x01A legal order,
// 0x07F safe order): scopes exist only through it, a consumer outside its
// authorization learns nothing, and an invalidated namespace generation stops
// looking up, publishing and honouring receipts at once. (0x07F's table of
// the three controls was lost; rebuilt from its text: collision resistance is
// the witness of prefix_lab_test.cpp, the salt separates trust groups inside
// one scope, and authorization is this gate, checked before any digest.) Also the two
// allocator queries the index relies on (holds_cache_key, cache_keys_dropped).
#include <catch2/catch.hpp>
#include <type_traits>

#include "services/identity/isolation_namespace.hpp"
#include "tests/prefix/prefix_fixture.hpp"
#include "tests/support/identity_fixtures.hpp"

using namespace kvrt;
using namespace kvrt::test;

TEST_CASE("gate: a scope exists only through the gate", "[prefix][lab]") {
  STATIC_REQUIRE_FALSE(std::is_default_constructible_v<PrefixScope>);
  CacheNamespaceRegistry registry;
  REQUIRE(registry.create(tenant_namespace(), base_facts()).ok());
  PrefixIndexConfig c = PrefixIndexConfig::from_layout(loop4_layout()).value();
  c.registry = &registry;
  const PrefixIndex gated = PrefixIndex::create(c).value();
  CHECK(gated.local_scope().error().field == "registry");
  PrefixRig rig;
  CHECK(rig.index.open_scope(base_manifest()).error().field == "registry");
}

TEST_CASE("gate: the namespace gate (0x01A legal order) in front of the index", "[prefix][lab]") {
  CacheNamespaceRegistry registry;
  const CacheIsolationNamespace ns = tenant_namespace();
  REQUIRE(registry.create(ns, base_facts()).ok());
  const std::string name = namespace_name(ns);
  PrefixIndexConfig c = PrefixIndexConfig::from_layout(loop4_layout()).value();
  c.registry = &registry;
  PrefixIndex index = PrefixIndex::create(c).value();
  PrefixRigOptions shape;
  shape.groups = 2;
  BlockAllocator alloc = BlockAllocator::create(rig_allocator_config(shape)).value();
  AllocatorPublicationTarget target(alloc);

  const std::vector<TokenId> tokens = iota_tokens(48, 1);
  CoveredInput input = text_input();
  input.token_ids.assign(tokens.begin(), tokens.end());
  const AdmissionTicket ticket = registry.admit(name).value();
  const CacheCompatibilityManifest manifest = registry.manifest_for(ticket, input).value();
  const PrefixScope scope = index.open_scope(manifest).value();
  CHECK(scope.gated());
  CHECK(scope.namespace_id() == name);

  // A producer in the namespace: its salt is the namespace's salt.
  RequestExtras wrong_salt;
  wrong_salt.cache_salt = "not-the-namespace-salt";
  CHECK(index.extras_plan(scope, wrong_salt).error().field == "cache_salt");
  const BlockExtrasPlan plan = index.extras_plan(scope, {}).value();
  std::vector<BlockHash> chain;
  index.extend_hashes(scope, tokens, plan, chain);
  Result<AllocationReceipt> r = alloc.allocate(AllocateArgs{48, {}, {}});
  REQUIRE(r.ok());
  const RequestId id = r->request_id;
  r = alloc.commit_rows(CommitRowsArgs{alloc.fence(id).value(), 48});
  REQUIRE(r.ok());
  REQUIRE(index.publish_blocks(scope, target, PrefixPublishArgs{id, tokens, chain, &plan, 0, 3}).ok());
  const auto m = index.lookup(
      scope, PrefixLookupArgs{RequestId{7}, RequestGeneration{1}, tokens, &plan, LogitsPath::logits_required, {}},
      &alloc);
  REQUIRE(m.ok());
  CHECK(m->lengths.runtime == 32);
  CHECK(m->receipt.namespace_id == name);
  CHECK(m->receipt.compatibility_manifest_sha256 == scope.compatibility_manifest_sha256());
  CHECK(index.check_receipt(m->receipt, &alloc).ok());

  // Other tokens than the authorized covered interval.
  const std::vector<TokenId> other = iota_tokens(48, 2);
  CHECK(index
            .lookup(scope,
                    PrefixLookupArgs{RequestId{7}, RequestGeneration{1}, other, &plan, LogitsPath::logits_required, {}},
                    &alloc)
            .error()
            .field == "covered_token_ids");
  // A manifest with another salt is refused before any digest is probed.
  CacheCompatibilityManifest salted = manifest;
  salted.cache_salt = "guessed";
  CHECK(index.open_scope(salted).error().field == "cache_salt");
  // A manifest for another layout passes the registry only if the namespace
  // serves it; an index of another layout refuses it.
  PrefixIndexConfig other_layout = c;
  other_layout.layout_sha256 = sha256("another layout");
  CHECK(PrefixIndex::create(other_layout).value().open_scope(manifest).error().field == "cache_layout_sha256");
  // Several faults at once: a consumer with a guessed salt is refused on
  // the salt, whatever else is wrong, and the refusal carries nothing of
  // the namespace's facts or the index's (no layout or ABI digest, no salt
  // fingerprint), on either index.
  CacheCompatibilityManifest hostile = salted;
  hostile.cache_layout_sha256 = sha256("a layout it guessed");
  hostile.cache_abi_sha256 = std::string(64, 'e');
  hostile.model_generation = manifest.model_generation + 7;
  hostile.adapter_identity = "someone-elses-adapter";
  PrefixIndex other_index = PrefixIndex::create(other_layout).value();
  for (PrefixIndex* ix : {&index, &other_index}) {
    const Error e = ix->open_scope(hostile).error();
    CHECK(e.field == "cache_salt");
    INFO("refusal: " << e.reason);
    for (const std::string& secret : {manifest.cache_layout_sha256.hex(), other_layout.layout_sha256.hex(),
                                      manifest.cache_abi_sha256, manifest.adapter_identity, manifest.cache_salt})
      if (!secret.empty()) CHECK(e.reason.find(secret) == std::string::npos);
    CHECK(e.reason.find("fingerprint") == std::string::npos);
    CHECK(e.reason.find("generation") == std::string::npos);
  }

  // Invalidation: the old scope stops looking up and publishing, its receipt
  // goes stale, and the successor's keys cannot reach old entries.
  GenerationFacts successor = base_facts();
  successor.artifact.adapter_identity = "adapter-v2";
  REQUIRE(registry.invalidate(name, InvalidationCause::adapter, successor).ok());
  const auto stale_lookup = index.lookup(
      scope, PrefixLookupArgs{RequestId{7}, RequestGeneration{1}, tokens, &plan, LogitsPath::logits_required, {}},
      &alloc);
  CHECK(stale_lookup.error().code == ErrorCode::stale_generation);
  CHECK(stale_lookup.error().field == "namespace_generation");
  CHECK(index.publish_blocks(scope, target, PrefixPublishArgs{id, tokens, chain, &plan, 0, 3}).error().code ==
        ErrorCode::stale_generation);
  CHECK(index.check_receipt(m->receipt, &alloc).error().field == "namespace_generation");
  const AdmissionTicket next_ticket = registry.admit(name).value();
  const PrefixScope next = index.open_scope(registry.manifest_for(next_ticket, input).value()).value();
  CHECK_FALSE(next.root() == scope.root());
  const BlockExtrasPlan next_plan = index.extras_plan(next, {}).value();
  const auto fresh = index.lookup(
      next, PrefixLookupArgs{RequestId{8}, RequestGeneration{1}, tokens, &next_plan, LogitsPath::logits_required, {}},
      &alloc);
  REQUIRE(fresh.ok());
  CHECK(fresh->lengths.runtime == 0);
  CHECK(fresh->lengths.semantic == 0);
  REQUIRE(index.validate(&alloc).ok());
}

TEST_CASE("allocator additions for the index: holds_cache_key and cache_keys_dropped", "[prefix][allocator]") {
  PrefixRigOptions o;
  o.blocks = 2;
  BlockAllocator al = BlockAllocator::create(rig_allocator_config(o)).value();
  Result<AllocationReceipt> r = al.allocate(AllocateArgs{16, {}, {}});
  REQUIRE(r.ok());
  const RequestId id = r->request_id;
  r = al.commit_rows(CommitRowsArgs{al.fence(id).value(), 16});
  REQUIRE(r.ok());
  const PhysicalBlockHandle h = al.table(id, 0).value()[0];
  CHECK_FALSE(al.holds_cache_key(h, CacheKey{7}));  // no key yet
  r = al.publish_cache_key(h, CacheKey{7});
  REQUIRE(r.ok());
  CHECK(al.holds_cache_key(h, CacheKey{7}));
  CHECK_FALSE(al.holds_cache_key(h, CacheKey{8}));
  CHECK_FALSE(al.holds_cache_key(h, CacheKey{0}));
  PhysicalBlockHandle other = h;
  other.generation.value += 1;
  CHECK_FALSE(al.holds_cache_key(other, CacheKey{7}));  // another generation of the block
  other = h;
  other.pool = PoolId{99};
  CHECK_FALSE(al.holds_cache_key(other, CacheKey{7}));
  other = h;
  other.block = PhysicalBlockId{h.block.value - 1000};  // below the pool's first id
  CHECK_FALSE(al.holds_cache_key(other, CacheKey{7}));
  other.block = PhysicalBlockId{h.block.value + 2};  // past the pool
  CHECK_FALSE(al.holds_cache_key(other, CacheKey{7}));
  other = h;
  other.group = CacheGroupId{5};
  CHECK_FALSE(al.holds_cache_key(other, CacheKey{7}));

  // Every dropped identity counts, drained or not.
  CHECK(al.cache_keys_dropped() == 0);
  Result<ReleaseResult> rr =
      al.release(ReleaseArgs{al.fence(id).value(), ReleaseReason::finished});  // evictable, key kept
  REQUIRE(rr.ok());
  CHECK(al.cache_keys_dropped() == 0);
  r = al.allocate(AllocateArgs{32, {}, {}});  // takes the free block and recycles the keyed one
  REQUIRE(r.ok());
  REQUIRE(r->evicted_handles.size() == 1);
  CHECK(al.cache_keys_dropped() == 1);
  CHECK_FALSE(al.holds_cache_key(h, CacheKey{7}));
  CHECK(al.drain_events().size() == 1);
  CHECK(al.cache_keys_dropped() == 1);
  const RequestId second = r->request_id;
  r = al.commit_rows(CommitRowsArgs{al.fence(second).value(), 32});
  REQUIRE(r.ok());
  const PhysicalBlockHandle h2 = al.table(second, 0).value()[1];
  r = al.publish_cache_key(h2, CacheKey{9});
  REQUIRE(r.ok());
  r = al.evict(h2);
  REQUIRE(r.ok());
  CHECK(al.cache_keys_dropped() == 2);
  REQUIRE(al.validate().ok());
}
