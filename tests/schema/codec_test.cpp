// Codec between core value types and wire messages (docs/architecture.md,
// wire schema): every type round-trips with every field set; oversized,
// misrouted, misaligned and hand-crafted malformed messages (unknown enums,
// short digests, foreign versions) decode to a typed Error naming the field.
// Random, truncated and bit-flipped input: codec_fuzz_test.cpp.
//
// The crafted messages are built with the generated Cap'n Proto classes, so
// this test (unlike any core) includes schema/*.capnp.h.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "schema/codecs.hpp"
#include "schema/common.capnp.h"
#include "schema/kvrt.capnp.h"
#include "schema/prefix.capnp.h"
#include "schema/reuse.capnp.h"
#include "tests/schema/codec_fixtures.hpp"

using namespace kvrt;
using kvrt::test::check_round_trip;
using kvrt::test::filled;
using kvrt::test::for_each_codec_type;
using kvrt::test::kCodecTypeCount;

namespace {

std::vector<uint8_t> build(capnp::MallocMessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

}  // namespace

TEST_CASE("every codec type round-trips with every field set", "[codec]") {
  int types = 0;
  for_each_codec_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    ++types;
    check_round_trip<T>();
  });
  CHECK(types == kCodecTypeCount);
}

TEST_CASE("every enumerant round-trips with its numeric value", "[codec]") {
  // The filler uses one value per enum; here every value of every enum travels.
  for (uint8_t v = 0; v <= kAllocationOperationMax; ++v) {
    AllocationReceipt r = filled<AllocationReceipt>();
    r.operation = static_cast<AllocationOperation>(v);
    AllocationTxn t = filled<AllocationTxn>();
    t.operation = static_cast<AllocationOperation>(v);
    CHECK(codec::decode<AllocationReceipt>(codec::encode(r))->operation == r.operation);
    CHECK(codec::decode<AllocationTxn>(codec::encode(t))->operation == t.operation);
  }
  for (uint8_t v = 0; v <= kTransactionPhaseMax; ++v) {
    AllocationTxn t = filled<AllocationTxn>();
    t.publication_state = static_cast<TransactionPhase>(v);
    CHECK(codec::decode<AllocationTxn>(codec::encode(t))->publication_state == t.publication_state);
  }
  for (uint8_t v = 0; v <= kAppendPathMax; ++v)
    for (uint8_t o = 0; o <= kAllocationOutcomeMax; ++o) {
      AllocationReceipt r = filled<AllocationReceipt>();
      r.append_path = static_cast<AppendPath>(v);
      r.outcome = static_cast<AllocationOutcome>(o);
      CHECK(*codec::decode<AllocationReceipt>(codec::encode(r)) == r);
    }
  for (uint8_t v = 0; v <= kReleaseReasonMax; ++v) {
    ReleaseResult r = filled<ReleaseResult>();
    r.reason = static_cast<ReleaseReason>(v);
    CHECK(*codec::decode<ReleaseResult>(codec::encode(r)) == r);
  }
  for (uint8_t v = 0; v <= kLogitsPathMax; ++v) {
    PrefixMatchReceipt r = filled<PrefixMatchReceipt>();
    r.logits_path = static_cast<LogitsPath>(v);
    CHECK(*codec::decode<PrefixMatchReceipt>(codec::encode(r)) == r);
  }
  for (uint8_t v = 0; v <= kMappingPathMax; ++v)
    for (uint8_t k = 0; k <= kKvTensorKindMax; ++k) {
      MappedFrontierReceipt r = filled<MappedFrontierReceipt>();
      r.mapping_path = static_cast<MappingPath>(v);
      r.new_mappings[0].tensor = static_cast<KvTensorKind>(k);
      CHECK(*codec::decode<MappedFrontierReceipt>(codec::encode(r)) == r);
    }
  for (uint8_t v = 0; v <= kReuseSourceMax; ++v) {
    ExecutableReuseReceipt r = filled<ExecutableReuseReceipt>();
    r.source = static_cast<ReuseSource>(v);
    CHECK(*codec::decode<ExecutableReuseReceipt>(codec::encode(r)) == r);
  }
  for (uint8_t s = 0; s <= uint8_t(ScalarType::int8); ++s)
    for (uint8_t m = 0; m <= uint8_t(PhysicalMode::virtual_pages); ++m)
      for (uint8_t h = 0; h <= uint8_t(HashFamily::xxh3_bits128); ++h) {
        CacheLayoutManifest l = filled<CacheLayoutManifest>();
        l.cache_groups[0].k_dtype = static_cast<ScalarType>(s);
        l.cache_groups[1].v_dtype = static_cast<ScalarType>(s);
        l.physical_mode = static_cast<PhysicalMode>(m);
        l.hash_family = static_cast<HashFamily>(h);
        CHECK(*codec::decode<CacheLayoutManifest>(codec::encode(l)) == l);
      }
  for (uint8_t p = 0; p <= uint8_t(PublicationPolicy::deployment_shared); ++p) {
    CacheIsolationNamespace n = filled<CacheIsolationNamespace>();
    n.publication_policy = static_cast<PublicationPolicy>(p);
    CHECK(*codec::decode<CacheIsolationNamespace>(codec::encode(n)) == n);
  }
  for (uint8_t k = 0; k <= uint8_t(SideInputKind::prompt_embedding); ++k) {
    CacheCompatibilityManifest c = filled<CacheCompatibilityManifest>();
    c.input_side_data[0].kind = static_cast<SideInputKind>(k);
    CHECK(*codec::decode<CacheCompatibilityManifest>(codec::encode(c)) == c);
  }
  // Every ErrorCode this build names travels as itself.
  for (uint32_t code = 0; code <= 0xffff; ++code) {
    const auto c = static_cast<ErrorCode>(code);
    if (to_string(c) == "unknown_error_code") continue;
    ErrorMessage e{Error{c, "r", "f"}};
    CHECK(*codec::decode<ErrorMessage>(codec::encode(e)) == e);
  }
}

TEST_CASE("a message of one kind is never decoded as another", "[codec]") {
  int pairs = 0;
  for_each_codec_type([&](auto written) {
    using W = typename decltype(written)::type;
    const auto bytes = codec::encode(filled<W>());
    for_each_codec_type([&](auto read) {
      using R = typename decltype(read)::type;
      if constexpr (!std::is_same_v<W, R>) {
        INFO(written.name << " read as " << read.name);
        auto r = codec::decode<R>(bytes);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == ErrorCode::decode_failed);
        CHECK(r.error().field == "Envelope.body");
        CHECK(r.error().reason.find(written.name) != std::string::npos);
        ++pairs;
      }
    });
  });
  CHECK(pairs == kCodecTypeCount * (kCodecTypeCount - 1));
}

TEST_CASE("input at any alignment decodes to the same value", "[codec]") {
  const auto value = filled<AllocationReceipt>();
  const auto bytes = codec::encode(value);
  std::vector<uint8_t> buffer(bytes.size() + 8);
  for (size_t offset = 0; offset < 8; ++offset) {
    INFO("offset " << offset);
    std::memcpy(buffer.data() + offset, bytes.data(), bytes.size());
    auto r = codec::decode<AllocationReceipt>(std::span<const uint8_t>(buffer.data() + offset, bytes.size()));
    REQUIRE(r.ok());
    CHECK(*r == value);
  }
}

TEST_CASE("a message over the default traversal limit is refused before it is copied", "[codec]") {
  const codec::DecodeLimits limits;
  CacheCompatibilityManifest huge = filled<CacheCompatibilityManifest>();
  // Two tokens per word: one more than the limit's worth of words.
  huge.covered_token_ids.assign((limits.traversal_limit_words + 1024) * 2, 7u);
  const auto bytes = codec::encode(huge);
  REQUIRE(bytes.size() > limits.traversal_limit_words * 8);
  auto r = codec::decode<CacheCompatibilityManifest>(bytes);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::message_too_large);
  CHECK(r.error().field == "CacheCompatibilityManifest");
}

TEST_CASE("the largest legitimate message decodes under the default limits", "[codec]") {
  // codec.hpp sizes the limit for a 2^21-token prompt module with one
  // PhysicalRef per 16-token block in 8 cache groups.
  PromptModuleReceipt module = filled<PromptModuleReceipt>();
  const size_t tokens = size_t{1} << 21;
  module.token_ids.resize(tokens);
  module.position_ids.resize(tokens);
  for (size_t i = 0; i < tokens; ++i) {
    module.token_ids[i] = static_cast<uint32_t>(i * 2654435761u);
    module.position_ids[i] = static_cast<uint32_t>(i);
  }
  module.physical_refs.resize(tokens / 16 * 8);
  for (size_t i = 0; i < module.physical_refs.size(); ++i)
    module.physical_refs[i] = PhysicalRef{CacheGroupId{static_cast<uint32_t>(i % 8)}, PoolId{1}, PoolGeneration{2},
                                          PhysicalBlockId{static_cast<uint32_t>(i / 8)}};
  const auto bytes = codec::encode(module);
  CHECK(bytes.size() >= (size_t{1} << 22) * 8);  // 2^22 words, as codec.hpp derives
  auto r = codec::decode<PromptModuleReceipt>(bytes);
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  CHECK(*r == module);
}

TEST_CASE("the reader's traversal limit answers message_too_large naming the field", "[codec]") {
  // A message just over a small limit passes the size pre-check (which allows
  // for a segment table) and is stopped by Cap'n Proto's own traversal count.
  const codec::DecodeLimits small{1024, 16};
  CacheCompatibilityManifest m = filled<CacheCompatibilityManifest>();
  m.covered_token_ids.assign(2 * 1100, 1u);
  const auto bytes = codec::encode(m);
  REQUIRE(bytes.size() <= (small.traversal_limit_words + 257) * 8);
  auto r = codec::decode<CacheCompatibilityManifest>(bytes, small);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().describe());
  CHECK(r.error().code == ErrorCode::message_too_large);
  CHECK(r.error().field == "CacheCompatibilityManifest.covered_token_ids");
  // The same bytes under the default limits decode.
  CHECK(codec::decode<CacheCompatibilityManifest>(bytes).ok());
}

TEST_CASE("the reader's nesting limit answers message_too_large", "[codec]") {
  const codec::DecodeLimits shallow{uint64_t{1} << 23, 2};
  const auto bytes = codec::encode(filled<CacheLayoutManifest>());  // Envelope > body > groups > axes
  auto r = codec::decode<CacheLayoutManifest>(bytes, shallow);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().describe());
  CHECK(r.error().code == ErrorCode::message_too_large);
  CHECK(codec::decode<CacheLayoutManifest>(bytes).ok());
}

TEST_CASE("an unknown enum value is a typed error naming the field", "[codec]") {
  capnp::MallocMessageBuilder message;
  auto envelope = message.initRoot<wire::Envelope>();
  envelope.setSchemaVersion(codec::wire_schema_version());
  envelope.setBodyType(capnp::typeId<wire::PrefixMatchReceipt>());
  auto receipt = envelope.getBody().initAs<wire::PrefixMatchReceipt>();
  receipt.setCompatibilityManifestSha256(
      capnp::Data::Reader(filled<PrefixMatchReceipt>().receipt_sha256.bytes.data(), 32));
  receipt.setReceiptSha256(capnp::Data::Reader(filled<PrefixMatchReceipt>().receipt_sha256.bytes.data(), 32));
  receipt.setLogitsPath(static_cast<wire::LogitsPath>(kLogitsPathMax + 1));
  auto r = codec::decode<PrefixMatchReceipt>(build(message));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::unknown_enum);
  CHECK(r.error().field == "PrefixMatchReceipt.logits_path");

  receipt.setLogitsPath(wire::LogitsPath::NO_LOGITS);
  CHECK(codec::decode<PrefixMatchReceipt>(build(message)).ok());
}

TEST_CASE("a digest of the wrong length is a typed error naming the field", "[codec]") {
  capnp::MallocMessageBuilder message;
  auto envelope = message.initRoot<wire::Envelope>();
  envelope.setSchemaVersion(codec::wire_schema_version());
  envelope.setBodyType(capnp::typeId<wire::PrefixMatchReceipt>());
  auto receipt = envelope.getBody().initAs<wire::PrefixMatchReceipt>();
  const uint8_t bytes[33] = {};
  receipt.setCompatibilityManifestSha256(capnp::Data::Reader(bytes, 32));
  for (size_t len : {size_t{0}, size_t{31}, size_t{33}}) {
    INFO("length " << len);
    receipt.setReceiptSha256(capnp::Data::Reader(bytes, len));
    auto r = codec::decode<PrefixMatchReceipt>(build(message));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::decode_failed);
    CHECK(r.error().field == "PrefixMatchReceipt.receipt_sha256");
  }
}

TEST_CASE("an unknown error code is a typed error, a known one travels", "[codec]") {
  capnp::MallocMessageBuilder message;
  auto envelope = message.initRoot<wire::Envelope>();
  envelope.setSchemaVersion(codec::wire_schema_version());
  envelope.setBodyType(capnp::typeId<wire::ErrorMessage>());
  auto error = envelope.getBody().initAs<wire::ErrorMessage>().initError();
  error.setCode(9999);
  error.setReason("from a newer peer");
  auto r = codec::decode<ErrorMessage>(build(message));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::unknown_enum);
  CHECK(r.error().field == "ErrorMessage.error.code");

  const Error stale =
      make_error(ErrorCode::stale_generation, "namespace generation 3 is not current 4", "namespace_generation");
  CHECK(codec::decode<ErrorMessage>(codec::encode(ErrorMessage{stale}))->error == stale);
}

TEST_CASE("a foreign schema version or an unknown body is rejected", "[codec]") {
  capnp::MallocMessageBuilder message;
  auto envelope = message.initRoot<wire::Envelope>();
  envelope.setSchemaVersion(static_cast<uint16_t>(codec::wire_schema_version() + 1));
  envelope.setBodyType(capnp::typeId<wire::PhysicalRef>());
  envelope.getBody().initAs<wire::PhysicalRef>().setBlock(7);
  auto r = codec::decode<PhysicalRef>(build(message));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::decode_failed);
  CHECK(r.error().field == "Envelope.schema_version");

  // A body type this build does not know (as from a newer peer), and one
  // of another kvrt message: both are refused by name.
  envelope.setSchemaVersion(codec::wire_schema_version());
  envelope.setBodyType(99);
  auto unknown = codec::decode<PhysicalRef>(build(message));
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().field == "Envelope.body");
  CHECK(unknown.error().reason.find("unknown body type 99") != std::string::npos);
  envelope.setBodyType(capnp::typeId<wire::PhysicalBlockHandle>());
  auto other = codec::decode<PhysicalRef>(build(message));
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().field == "Envelope.body");
  CHECK(other.error().reason == "expected a PhysicalRef message, got a PhysicalBlockHandle");
}

TEST_CASE("empty and ragged inputs are typed errors", "[codec]") {
  for_each_codec_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    CHECK(codec::decode<T>({}).error().code == ErrorCode::decode_failed);
    const std::vector<uint8_t> ragged(13, 0);
    CHECK(codec::decode<T>(ragged).error().code == ErrorCode::decode_failed);
    const std::vector<uint8_t> zeros(64, 0);  // a valid table for an empty segment
    CHECK_FALSE(codec::decode<T>(zeros).ok());
  });
}
