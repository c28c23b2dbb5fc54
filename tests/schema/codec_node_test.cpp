// The generated codec of the owners' batches (schema/<owner>.capnp):
// every message round-trips with every field and every union alternative
// set; an optional epoch keeps "absent" apart from "epoch 0"; messages of one
// kind never decode as another (old kinds included); hand-made bad unions,
// enums, pointers and digests answer a typed Error naming the element and
// field ("AllocatorBatch.ops[3].append.rows"); truncated, bit-flipped,
// overwritten and random bytes decode safely; a 256-append batch encodes and
// decodes well inside the actor RPC's budget.
#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <thread>
#include <typeindex>

#include "schema/allocator.capnp.h"
#include "schema/authorization.capnp.h"
#include "schema/kvrt.capnp.h"
#include "schema/prefix.capnp.h"
#include "schema/reuse.capnp.h"
#include "schema/session.capnp.h"
#include "services/session/routes.hpp"
#include "tests/schema/codec_edit.hpp"
#include "tests/schema/codec_node_fixtures.hpp"

using namespace kvrt;
using kvrt::test::check_every_bit_flip;
using kvrt::test::check_random_overwrites;
using kvrt::test::check_round_trip;
using kvrt::test::decode_error;
using kvrt::test::decode_is_safe;
using kvrt::test::edited;
using kvrt::test::filled;
using kvrt::test::for_each_codec_type;
using kvrt::test::for_each_node_type;
using kvrt::test::kCodecTypeCount;
using kvrt::test::kNodeTypeCount;

namespace {

// Every union of the owners' batches keeps its tag in bits [0, 16) of its
// struct's data section (`capnp compile -ocapnp schema/allocator.capnp`); this checks that the
// tag there is the one the builder set, then overwrites it.
template <class StructBuilder>
void overwrite_union_tag(StructBuilder b, uint16_t expected, uint16_t tag) {
  auto data = capnp::AnyStruct::Builder(kj::mv(b)).getDataSection();
  REQUIRE(data.size() >= 2);
  uint16_t now = 0;
  std::memcpy(&now, data.begin(), 2);  // little-endian, as the wire
  REQUIRE(now == expected);
  std::memcpy(data.begin(), &tag, 2);
}

template <class Variant>
std::set<size_t> alternatives(const std::vector<Variant>& items) {
  std::set<size_t> seen;
  for (const auto& v : items) seen.insert(v.index());
  return seen;
}

}  // namespace

TEST_CASE("node protocol: every message round-trips with every field set", "[codec]") {
  int types = 0;
  for_each_node_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    ++types;
    check_round_trip<T>();
  });
  CHECK(types == kNodeTypeCount);
}

TEST_CASE("node protocol: every route's request and receipt has a round-trip fixture", "[codec]") {
  std::set<std::type_index> fixtures;
  for_each_node_type([&](auto named) { fixtures.insert(typeid(typename decltype(named)::type)); });
  for_each_route([&]<class R>() {
    INFO("route " << R::name);
    CHECK(fixtures.count(typeid(typename R::Request)) == 1);
    CHECK(fixtures.count(typeid(typename R::Receipt)) == 1);
  });
}

TEST_CASE("node protocol: every op and outcome alternative travels on its own", "[codec]") {
  // The fixtures hold every alternative of every union ...
  CHECK(alternatives(filled<AllocatorBatch>().ops).size() == std::variant_size_v<AllocatorOp>);
  CHECK(alternatives(filled<AllocatorBatchReceipt>().outcomes).size() == std::variant_size_v<AllocatorOutcome>);
  CHECK(alternatives(filled<PrefixBatch>().ops).size() == std::variant_size_v<PrefixOp>);
  CHECK(alternatives(filled<PrefixBatchReceipt>().outcomes).size() == std::variant_size_v<PrefixOutcome>);
  CHECK(alternatives(filled<MapperBatch>().ops).size() == std::variant_size_v<MapperOp>);
  CHECK(alternatives(filled<MapperBatchReceipt>().outcomes).size() == std::variant_size_v<MapperOutcome>);
  CHECK(alternatives(filled<ReuseBatch>().ops).size() == std::variant_size_v<ReuseOp>);
  CHECK(alternatives(filled<ReuseBatchReceipt>().outcomes).size() == std::variant_size_v<ReuseOutcome>);
  {
    // A resume's two outcomes, each through the codec.
    for (const SessionResumeReceipt& r : {filled<SessionResumeReceipt>(), kvrt::test::session_resume_refused(3)}) {
      Result<SessionResumeReceipt> back = codec::decode<SessionResumeReceipt>(codec::encode(r));
      REQUIRE(back.ok());
      CHECK(*back == r);
    }
  }
  // ... and each one, alone in a batch, comes back as the same alternative.
  auto each_alone = [](auto batch, auto items) {
    const auto all = batch.*items;
    for (const auto& item : all) {
      INFO("alternative " << item.index());
      batch.*items = {item};
      auto r = codec::decode<decltype(batch)>(codec::encode(batch));
      REQUIRE(r.ok());
      CHECK(*r == batch);
      CHECK(((*r).*items)[0].index() == item.index());
    }
  };
  each_alone(filled<AllocatorBatch>(5), &AllocatorBatch::ops);
  each_alone(filled<AllocatorBatchReceipt>(5), &AllocatorBatchReceipt::outcomes);
  each_alone(filled<PrefixBatch>(5), &PrefixBatch::ops);
  each_alone(filled<PrefixBatchReceipt>(5), &PrefixBatchReceipt::outcomes);
  each_alone(filled<MapperBatch>(5), &MapperBatch::ops);
  each_alone(filled<MapperBatchReceipt>(5), &MapperBatchReceipt::outcomes);
  each_alone(filled<ReuseBatch>(5), &ReuseBatch::ops);
  each_alone(filled<ReuseBatchReceipt>(5), &ReuseBatchReceipt::outcomes);
}

TEST_CASE("node protocol: an absent epoch, epoch 0 and epoch 7 are three messages", "[codec]") {
  const std::optional<Epoch> epochs[] = {std::nullopt, Epoch{0}, Epoch{7}};
  std::vector<std::vector<uint8_t>> allocate_bytes, append_bytes;
  for (const auto& epoch : epochs) {
    INFO("epoch " << (epoch ? std::to_string(epoch->value) : "absent"));
    const AllocateOp allocate{16, {}, epoch};
    const AppendOp append{RequestFence{RequestId{1}, RequestGeneration{2}, TableVersion{3}}, {}, epoch};
    const AllocatorBatch batch{{}, {allocate, append}};
    auto r = codec::decode<AllocatorBatch>(codec::encode(batch));
    REQUIRE(r.ok());
    CHECK(std::get<AllocateOp>(r->ops[0]).expected_epoch == epoch);
    CHECK(std::get<AppendOp>(r->ops[1]).expected_epoch == epoch);
    allocate_bytes.push_back(codec::encode(AllocatorBatch{{}, {allocate}}));
    append_bytes.push_back(codec::encode(AllocatorBatch{{}, {append}}));
  }
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = i + 1; j < 3; ++j) {
      INFO("epochs " << i << " and " << j);
      CHECK_FALSE(allocate_bytes[i] == allocate_bytes[j]);
      CHECK_FALSE(append_bytes[i] == append_bytes[j]);
    }
}

TEST_CASE("node protocol: every ReleaseReason and LogitsPath travels", "[codec]") {
  for (uint8_t v = 0; v <= kReleaseReasonMax; ++v) {
    AllocatorBatch b = filled<AllocatorBatch>();
    const RequestFence fence{RequestId{9}, RequestGeneration{1}, TableVersion{4}};
    b.ops = {ReleaseOp{fence, static_cast<ReleaseReason>(v)}};
    CHECK(*codec::decode<AllocatorBatch>(codec::encode(b)) == b);
  }
  for (uint8_t v = 0; v <= kLogitsPathMax; ++v) {
    PrefixBatch b = filled<PrefixBatch>();
    std::get<PrefixMatchOp>(b.ops[0]).logits_path = static_cast<LogitsPath>(v);
    CHECK(*codec::decode<PrefixBatch>(codec::encode(b)) == b);
  }
}

TEST_CASE("node protocol: a message of one kind is never decoded as another", "[codec]") {
  int pairs = 0;
  auto refuse = [&](const char* written, const std::vector<uint8_t>& bytes, auto read) {
    using R = typename decltype(read)::type;
    INFO(written << " read as " << read.name);
    auto r = codec::decode<R>(bytes);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::decode_failed);
    CHECK(r.error().field == "Envelope.body");
    CHECK(r.error().reason.find(written) != std::string::npos);
    ++pairs;
  };
  for_each_node_type([&](auto written) {
    using W = typename decltype(written)::type;
    const auto bytes = codec::encode(filled<W>());
    for_each_node_type([&](auto read) {
      if constexpr (!std::is_same_v<W, typename decltype(read)::type>) refuse(written.name, bytes, read);
    });
    for_each_codec_type([&](auto read) { refuse(written.name, bytes, read); });
  });
  for_each_codec_type([&](auto written) {
    const auto bytes = codec::encode(filled<typename decltype(written)::type>());
    for_each_node_type([&](auto read) { refuse(written.name, bytes, read); });
  });
  CHECK(pairs == kNodeTypeCount * (kNodeTypeCount - 1) + 2 * kNodeTypeCount * kCodecTypeCount);
}

TEST_CASE("node protocol: an unknown op or outcome kind is unknown_enum naming the element", "[codec]") {
  const auto batch = edited(codec::encode(filled<AllocatorBatch>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::AllocatorBatch>().getOps()[3], wire::AllocatorOp::COMMIT_ROWS, 99);
  });
  auto op = decode_error<AllocatorBatch>(batch);
  CHECK(op.code == ErrorCode::unknown_enum);
  CHECK(op.field == "AllocatorBatch.ops[3]");
  CHECK(op.reason.find("99") != std::string::npos);

  const auto receipt = edited(codec::encode(filled<AllocatorBatchReceipt>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::AllocatorBatchReceipt>().getOutcomes()[5],
                        wire::AllocatorOutcome::BLOCK_TABLE_VIEW, 6);
  });
  CHECK(decode_error<AllocatorBatchReceipt>(receipt).field == "AllocatorBatchReceipt.outcomes[5]");

  const auto prefix = edited(codec::encode(filled<PrefixBatch>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::PrefixBatch>().getOps()[1], wire::PrefixOp::PUBLISH, 5);
  });
  CHECK(decode_error<PrefixBatch>(prefix).field == "PrefixBatch.ops[1]");

  const auto prefix_receipt = edited(codec::encode(filled<PrefixBatchReceipt>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::PrefixBatchReceipt>().getOutcomes()[0], wire::PrefixOutcome::ERROR, 5);
  });
  CHECK(decode_error<PrefixBatchReceipt>(prefix_receipt).field == "PrefixBatchReceipt.outcomes[0]");

  const auto reuse_receipt = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[2],
                        wire::ReuseOutcome::REJECTION_RECEIPT, 4);
  });
  auto reuse = decode_error<ReuseBatchReceipt>(reuse_receipt);
  CHECK(reuse.code == ErrorCode::unknown_enum);
  CHECK(reuse.field == "ReuseBatchReceipt.outcomes[2]");
  CHECK(reuse.reason.find("unknown ReuseOutcome kind 4") != std::string::npos);

  const auto reuse_release = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[3],
                        wire::ReuseOutcome::RELEASE_RECEIPT, 999);
  });
  auto release_outcome = decode_error<ReuseBatchReceipt>(reuse_release);
  CHECK(release_outcome.code == ErrorCode::unknown_enum);
  CHECK(release_outcome.field == "ReuseBatchReceipt.outcomes[3]");
  CHECK(release_outcome.reason.find("unknown ReuseOutcome kind 999") != std::string::npos);

  const auto reuse_batch = edited(codec::encode(filled<ReuseBatch>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::ReuseBatch>().getOps()[2], wire::ReuseOp::RELEASE, 2);
  });
  auto reuse_op = decode_error<ReuseBatch>(reuse_batch);
  CHECK(reuse_op.code == ErrorCode::unknown_enum);
  CHECK(reuse_op.field == "ReuseBatch.ops[2]");
  CHECK(reuse_op.reason.find("unknown ReuseOp kind 2") != std::string::npos);

  // The optional epoch's {none, epoch} tag.
  const auto epoch = edited(codec::encode(filled<AllocatorBatch>()), [](wire::Envelope::Builder e) {
    overwrite_union_tag(e.getBody().getAs<wire::AllocatorBatch>().getOps()[1].getAppend(),
                        wire::AppendOp::ExpectedEpoch::EPOCH, 2);
  });
  auto bad_epoch = decode_error<AllocatorBatch>(epoch);
  CHECK(bad_epoch.code == ErrorCode::unknown_enum);
  CHECK(bad_epoch.field == "AllocatorBatch.ops[1].append.expected_epoch");
}

TEST_CASE("node protocol: an unknown enum value is unknown_enum naming element and field", "[codec]") {
  const auto release = edited(codec::encode(filled<AllocatorBatch>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::AllocatorBatch>().getOps()[6].getRelease().setReason(
        static_cast<wire::ReleaseReason>(kReleaseReasonMax + 1));
  });
  auto r = decode_error<AllocatorBatch>(release);
  CHECK(r.code == ErrorCode::unknown_enum);
  CHECK(r.field == "AllocatorBatch.ops[6].release.reason");

  const auto logits = edited(codec::encode(filled<PrefixBatch>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::PrefixBatch>().getOps()[0].getMatch().setLogitsPath(
        static_cast<wire::LogitsPath>(kLogitsPathMax + 1));
  });
  auto l = decode_error<PrefixBatch>(logits);
  CHECK(l.code == ErrorCode::unknown_enum);
  CHECK(l.field == "PrefixBatch.ops[0].match.logits_path");

  // A nested receipt keeps its own field names below the element.
  const auto nested = edited(codec::encode(filled<AllocatorBatchReceipt>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::AllocatorBatchReceipt>().getOutcomes()[1].getAllocationReceipt().setOutcome(
        static_cast<wire::AllocationOutcome>(kAllocationOutcomeMax + 1));
  });
  CHECK(decode_error<AllocatorBatchReceipt>(nested).field ==
        "AllocatorBatchReceipt.outcomes[1].allocation_receipt.outcome");

  const auto code = edited(codec::encode(filled<PrefixBatchReceipt>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::PrefixBatchReceipt>().getOutcomes()[0].getError().setCode(9999);
  });
  auto c = decode_error<PrefixBatchReceipt>(code);
  CHECK(c.code == ErrorCode::unknown_enum);
  CHECK(c.field == "PrefixBatchReceipt.outcomes[0].error.code");
}

TEST_CASE("node protocol: a malformed pointer is a typed error naming element and field", "[codec]") {
  // AppendOp's pointer section is {fence, rows}: rows becomes a struct pointer,
  // which Cap'n Proto refuses to read as List(Data).
  const auto rows = edited(codec::encode(filled<AllocatorBatch>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::AllocatorBatch>().getOps()[1].getAppend())
        .getPointerSection()[1]
        .initAs<wire::TraceContext>();
  });
  auto r = decode_error<AllocatorBatch>(rows);
  CHECK(r.code == ErrorCode::decode_failed);
  CHECK(r.field == "AllocatorBatch.ops[1].append.rows");

  // The op's own pointer: AllocatorOp.append becomes a list pointer.
  const auto op = edited(codec::encode(filled<AllocatorBatch>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::AllocatorBatch>().getOps()[2])
        .getPointerSection()[0]
        .initAs<capnp::Text>(5);
  });
  CHECK(decode_error<AllocatorBatch>(op).field == "AllocatorBatch.ops[2].append");

  // Inside a reused receipt codec: PrefixMatchReceipt's matched_group_handles
  // (ptr[3] after the manifest digest, namespace and policy; `capnp compile
  // -ocapnp schema/reuse.capnp`) becomes a struct pointer. (A byte list would
  // not do: Cap'n Proto reads a list of primitives as a list of structs.)
  const auto matched = edited(codec::encode(filled<PrefixBatchReceipt>()), [](wire::Envelope::Builder e) {
    auto receipt = e.getBody().getAs<wire::PrefixBatchReceipt>().getOutcomes()[1].getMatchReceipt();
    capnp::AnyStruct::Builder(kj::mv(receipt)).getPointerSection()[3].initAs<wire::TraceContext>();
  });
  CHECK(decode_error<PrefixBatchReceipt>(matched).field ==
        "PrefixBatchReceipt.outcomes[1].match_receipt.matched_group_handles");
}

TEST_CASE("node protocol: a digest of the wrong length is a typed error naming the field", "[codec]") {
  const uint8_t zeros[33] = {};
  for (size_t len : {size_t{0}, size_t{31}, size_t{33}}) {
    INFO("length " << len);
    const auto session = edited(codec::encode(filled<SessionReceipt>()), [&](wire::Envelope::Builder e) {
      e.getBody().getAs<wire::SessionReceipt>().setLayoutSha256(capnp::Data::Reader(zeros, len));
    });
    CHECK(decode_error<SessionReceipt>(session).field == "SessionReceipt.layout_sha256");
    const auto grant = edited(codec::encode(filled<NamespaceGrantReceipt>()), [&](wire::Envelope::Builder e) {
      e.getBody().getAs<wire::NamespaceGrantReceipt>().setGrantSha256(capnp::Data::Reader(zeros, len));
    });
    CHECK(decode_error<NamespaceGrantReceipt>(grant).field == "NamespaceGrantReceipt.grant_sha256");
    const auto match = edited(codec::encode(filled<PrefixBatchReceipt>()), [&](wire::Envelope::Builder e) {
      e.getBody().getAs<wire::PrefixBatchReceipt>().getOutcomes()[1].getMatchReceipt().setReceiptSha256(
          capnp::Data::Reader(zeros, len));
    });
    CHECK(decode_error<PrefixBatchReceipt>(match).field ==
          "PrefixBatchReceipt.outcomes[1].match_receipt.receipt_sha256");
  }
}

TEST_CASE("node protocol: a batch list of elements smaller than the schema's is refused", "[codec]") {
  // A list of zero-sized structs costs one traversal word per element: a
  // message of a few words could otherwise claim a million ops.
  auto with_ops = [](auto init) {
    return edited(codec::encode(filled<AllocatorBatch>()), [&](wire::Envelope::Builder e) {
      init(
          capnp::AnyStruct::Builder(e.getBody().getAs<wire::AllocatorBatch>()).getPointerSection()[1]);  // ptr[1] = ops
    });
  };
  const auto empty_structs = with_ops([](capnp::AnyPointer::Builder ops) { ops.initAsListOfAnyStruct(0, 0, 1000000); });
  REQUIRE(empty_structs.size() < 1024);
  auto r = decode_error<AllocatorBatch>(empty_structs);
  CHECK(r.code == ErrorCode::decode_failed);
  CHECK(r.field == "AllocatorBatch.ops");
  const auto bytes = with_ops([](capnp::AnyPointer::Builder ops) { ops.initAs<capnp::List<uint8_t>>(4096); });
  CHECK(decode_error<AllocatorBatch>(bytes).field == "AllocatorBatch.ops");
  // Larger elements (a newer peer's op with more fields) are read as usual.
  const auto larger = with_ops([](capnp::AnyPointer::Builder ops) { ops.initAsListOfAnyStruct(2, 2, 3); });
  auto ok = codec::decode<AllocatorBatch>(larger);
  REQUIRE(ok.ok());
  CHECK(ok->ops.size() == 3);

  const auto outcomes = edited(codec::encode(filled<PrefixBatchReceipt>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::PrefixBatchReceipt>())
        .getPointerSection()[1]
        .initAsListOfAnyStruct(0, 0, 100000);
  });
  CHECK(decode_error<PrefixBatchReceipt>(outcomes).field == "PrefixBatchReceipt.outcomes");
}

TEST_CASE("node protocol: the deepest messages need 9 and 10 nesting levels, inside the default limit", "[codec]") {
  // codec.hpp's DecodeLimits derivation: Envelope, body, outcomes, its
  // elements, the view, groups, one group, its entries, entry.handle.
  const AllocatorBatchReceipt view_only{{}, {filled<AllocatorBatchReceipt>().outcomes[5]}};
  for (const auto& receipt : {filled<AllocatorBatchReceipt>(), view_only}) {
    const auto bytes = codec::encode(receipt);
    CHECK(codec::decode<AllocatorBatchReceipt>(bytes, codec::DecodeLimits{uint64_t{1} << 23, 9}).ok());
    auto r = codec::decode<AllocatorBatchReceipt>(bytes, codec::DecodeLimits{uint64_t{1} << 23, 8});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::message_too_large);
    CHECK(r.error().field == "AllocatorBatchReceipt.outcomes[" + std::to_string(receipt.outcomes.size() - 1) +
                                 "].block_table_view.groups[0][0].handle");
  }
  // A handoff's match receipt is one level deeper than a match receipt alone.
  const auto prefix = codec::encode(filled<PrefixBatchReceipt>());
  CHECK(codec::decode<PrefixBatchReceipt>(prefix, codec::DecodeLimits{uint64_t{1} << 23, 10}).ok());
  auto deep = codec::decode<PrefixBatchReceipt>(prefix, codec::DecodeLimits{uint64_t{1} << 23, 9});
  REQUIRE_FALSE(deep.ok());
  CHECK(deep.error().field == "PrefixBatchReceipt.outcomes[3].handoff_receipt.match.matched_group_handles[0].handles");
  const PrefixBatchReceipt match_only{{}, {filled<PrefixBatchReceipt>().outcomes[1]}};
  const auto shallow = codec::encode(match_only);
  CHECK(codec::decode<PrefixBatchReceipt>(shallow, codec::DecodeLimits{uint64_t{1} << 23, 9}).ok());
  CHECK_FALSE(codec::decode<PrefixBatchReceipt>(shallow, codec::DecodeLimits{uint64_t{1} << 23, 8}).ok());
  CHECK(codec::DecodeLimits{}.nesting_limit >= 10);
}

TEST_CASE("node protocol: an encoding does not depend on what its thread encoded before", "[codec]") {
  // encode() reuses a per-thread first segment; a message encoded after a
  // large one must be byte-identical to one encoded on a fresh thread.
  const auto small = filled<PrefixBatch>(3);
  std::vector<uint8_t> fresh;
  std::thread([&] { fresh = codec::encode(small); }).join();
  AllocatorBatch large = filled<AllocatorBatch>(4);
  std::get<AppendOp>(large.ops[1]).rows.assign(2, std::vector<uint8_t>(300000, 0xa5));  // 600 KB: grows the segment
  CHECK(codec::decode<AllocatorBatch>(codec::encode(large)).value() == large);
  CHECK(codec::encode(small) == fresh);
  CHECK(codec::encode(PrefixBatch{}) == codec::encode(PrefixBatch{}));
  CHECK(codec::decode<AllocatorBatch>(codec::encode(large)).value() == large);
  CHECK(codec::encode(small) == fresh);
}

TEST_CASE("node protocol: every strict prefix and every bit flip decodes safely", "[codec]") {
  for_each_node_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    const auto bytes = codec::encode(filled<T>());
    for (size_t len = 0; len < bytes.size(); ++len) {
      INFO("prefix length " << len << " of " << bytes.size());
      auto r = codec::decode<T>(std::span(bytes.data(), len));
      REQUIRE_FALSE(r.ok());  // the segment table declares the full length
      CHECK(r.error().code == ErrorCode::decode_failed);
      CHECK_FALSE(r.error().field.empty());
    }
    check_every_bit_flip<T>(bytes);
  });
}

TEST_CASE("node protocol: random and randomly overwritten bytes decode safely", "[codec]") {
  const uint64_t seed = 0x6e6f6465;  // "node"
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    INFO("string " << i);
    std::vector<uint8_t> bytes(rng() % 600);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for_each_node_type([&](auto named) {
      INFO(named.name);
      decode_is_safe<typename decltype(named)::type>(bytes);
    });
  }
  for_each_node_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    check_random_overwrites<T>(rng, 1500);
  });
}

namespace {

// One scheduler iteration of 256 decoding requests on the shared-memory path:
// each append carries its fence and expected epoch, no row bytes (the worker
// writes rows into the pool itself, allocator_ops.hpp).
AllocatorBatch append_batch(size_t appends, size_t row_bytes_per_group) {
  AllocatorBatch batch;
  batch.trace = TraceContext{0x1234, 0x55, 0x54};
  batch.ops.reserve(appends);
  for (size_t i = 0; i < appends; ++i) {
    AppendOp op{RequestFence{RequestId{1000 + i}, RequestGeneration{1}, TableVersion{40 + i}}, {}, Epoch{43}};
    if (row_bytes_per_group) op.rows.assign(2, std::vector<uint8_t>(row_bytes_per_group, static_cast<uint8_t>(i)));
    batch.ops.push_back(std::move(op));
  }
  return batch;
}

// Medians over `trials` [microseconds] of one encode, one decode, and one
// encode followed by one decode, each timed on its own.
struct CodecTimes {
  double encode_us, decode_us, round_trip_us;
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

CodecTimes median_times(const AllocatorBatch& batch, int trials) {
  using clock = std::chrono::steady_clock;
  auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  std::vector<double> encode, decode, round_trip;
  for (int t = 0; t < trials; ++t) {
    const auto t0 = clock::now();
    const auto bytes = codec::encode(batch);
    const auto t1 = clock::now();
    auto decoded = codec::decode<AllocatorBatch>(bytes);
    const auto t2 = clock::now();
    REQUIRE(decoded.ok());
    REQUIRE(decoded->ops.size() == batch.ops.size());
    encode.push_back(us(t0, t1));
    decode.push_back(us(t1, t2));
    round_trip.push_back(us(t0, t2));
  }
  return CodecTimes{median(encode), median(decode), median(round_trip)};
}

}  // namespace

TEST_CASE("node protocol: a 256-append batch encodes and decodes well inside 100 us", "[codec]") {
  const AllocatorBatch batch = append_batch(256, 0);
  REQUIRE(*codec::decode<AllocatorBatch>(codec::encode(batch)) == batch);
  const double us = median_times(batch, 301).round_trip_us;
  INFO("256 appends: median encode+decode " << us << " us, " << codec::encode(batch).size() << " bytes");
#ifdef NDEBUG
  // The actor RPC's budget is 100 us for the whole batch. The median
  // here is about a third of it on the 2-vCPU development machine under load
  // (`kvrt_tests "[codec-bench]"` prints the split); the check keeps the full
  // budget as its bound so that a busy machine does not make it flaky, while
  // a regression of 3x fails it. Debug builds only check the round trip.
  CHECK(us < 100.0);
#else
  SUCCEED();
#endif
}

TEST_CASE("node protocol: batch codec timings", "[.][codec-bench]") {
  for (size_t row_bytes : {size_t{0}, size_t{64}, size_t{1024}}) {
    const AllocatorBatch batch = append_batch(256, row_bytes);
    const CodecTimes t = median_times(batch, row_bytes > 64 ? 201 : 5001);
    WARN("256 appends, 2 rows x " << row_bytes << " B: " << codec::encode(batch).size() << " bytes; median encode "
                                  << t.encode_us << " us, decode " << t.decode_us << " us, encode+decode "
                                  << t.round_trip_us << " us");
  }
}
