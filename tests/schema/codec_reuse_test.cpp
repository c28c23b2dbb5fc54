// The reuse coordinator's messages through the generated codec
// (schema/reuse.capnp): a reuse batch and its receipt round-trip every field
// of every op and outcome, every ReuseStep, RejectionReason and ReuseSource
// travels, neither is decoded as another kind, and a bad enum value or a
// malformed element answers a typed error naming the element and field.
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>

#include "schema/reuse.capnp.h"
#include "tests/schema/codec_edit.hpp"
#include "tests/schema/codec_node_fixtures.hpp"

using namespace kvrt;
using kvrt::test::decode_error;
using kvrt::test::edited;
using kvrt::test::filled;

TEST_CASE("node protocol: a reuse batch round-trips every field of every op and outcome", "[codec][reuse-codec]") {
  const ReuseBatch batch = filled<ReuseBatch>(11);
  auto b = codec::decode<ReuseBatch>(codec::encode(batch));
  REQUIRE(b.ok());
  CHECK(*b == batch);
  REQUIRE(b->ops.size() == 5);
  const auto& acquire = std::get<ReuseAcquireOp>(b->ops[0]);
  CHECK(acquire.require_collision_witness);
  CHECK(acquire.logits_path == LogitsPath::no_logits);
  CHECK(acquire.tokens.back() == std::numeric_limits<TokenId>::min());
  CHECK(std::holds_alternative<ReuseAcquireOp>(b->ops[1]));
  // Each release op keeps its attempt and its execution report.
  const auto& not_run = std::get<ReuseReleaseOp>(b->ops[2]);
  CHECK(not_run.snapshot == ExecutionSnapshotVersion{41});
  CHECK_FALSE(not_run.executed);
  const auto& ran = std::get<ReuseReleaseOp>(b->ops[3]);
  CHECK(ran.snapshot == ExecutionSnapshotVersion{42});
  CHECK(ran.executed);
  CHECK_FALSE(ran.successor.has_value());
  // A named successor keeps its request, tokens (both extremes) and end block.
  const auto& named = std::get<ReuseReleaseOp>(b->ops[4]);
  REQUIRE(named.successor.has_value());
  CHECK(named.successor == std::get<ReuseReleaseOp>(batch.ops[4]).successor);
  CHECK(named.successor->tokens.at(1) == std::numeric_limits<TokenId>::max());
  // Every bit of the snapshot travels.
  const ReuseBatch widest{TraceContext{4, 5, 6},
                          {ReuseReleaseOp{ExecutionSnapshotVersion{std::numeric_limits<uint64_t>::max()}, false}}};
  CHECK(codec::decode<ReuseBatch>(codec::encode(widest)).value() == widest);

  // A default release op (snapshot 0, executed) and an acquire with default
  // fields stay what they are.
  const ReuseBatch bare{TraceContext{4, 5, 6}, {ReuseReleaseOp{}, ReuseAcquireOp{}}};
  auto bare_back = codec::decode<ReuseBatch>(codec::encode(bare));
  REQUIRE(bare_back.ok());
  CHECK(*bare_back == bare);
  CHECK(bare_back->ops[0].index() == 1);
  CHECK(std::get<ReuseReleaseOp>(bare_back->ops[0]).executed);
  CHECK(bare_back->ops[1].index() == 0);
  // A release op with an empty data section reads as the C++ default: the
  // wire default of executed is true as well.
  const auto empty_release = edited(codec::encode(bare), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatch>().getOps()[0])
        .getPointerSection()[0]
        .initAsAnyStruct(0, 0);
  });
  auto empty_back = codec::decode<ReuseBatch>(empty_release);
  REQUIRE(empty_back.ok());
  CHECK(std::get<ReuseReleaseOp>(empty_back->ops[0]) == ReuseReleaseOp{});

  const ReuseBatchReceipt receipt = filled<ReuseBatchReceipt>(11);
  const auto& executable = std::get<ExecutableReuseReceipt>(receipt.outcomes[1]);
  REQUIRE_FALSE(executable.pool_generations.empty());
  REQUIRE_FALSE(executable.physical_handles.empty());
  REQUIRE_FALSE(executable.path_node_ids.empty());
  REQUIRE_FALSE(executable.leases.empty());
  const auto& rejection = std::get<ReuseRejectionReceipt>(receipt.outcomes[2]);
  REQUIRE(rejection.leases_released.size() == 2);
  auto r = codec::decode<ReuseBatchReceipt>(codec::encode(receipt));
  REQUIRE(r.ok());
  CHECK(*r == receipt);
  CHECK(std::get<Error>(r->outcomes[0]) == std::get<Error>(receipt.outcomes[0]));
  CHECK(std::get<ExecutableReuseReceipt>(r->outcomes[1]) == executable);
  CHECK(std::get<ReuseRejectionReceipt>(r->outcomes[2]) == rejection);
  CHECK(bucket_of(std::get<ReuseRejectionReceipt>(r->outcomes[2]).reason) == ReuseBucket::lease);
  const auto& released = std::get<ReuseReleaseReceipt>(receipt.outcomes[3]);
  REQUIRE(released.snapshot.value != 0);
  REQUIRE(released.released.size() == 2);
  REQUIRE(released.refused.size() == 3);
  REQUIRE(released.completed);
  const auto& released_back = std::get<ReuseReleaseReceipt>(r->outcomes[3]);
  CHECK(released_back == released);
  CHECK(released_back.snapshot == released.snapshot);
  CHECK(released_back.completed);
  // Every bit of a lease travels: bit 63 still marks the radix path lease.
  CHECK(released_back.released[0] == LeaseId{(uint64_t{1} << 63) | 5});
  CHECK(lease_owner(released_back.released[0]) == LeaseOwner::radix_index);
  CHECK(lease_owner(released_back.released[1]) == LeaseOwner::allocator);
  CHECK(lease_owner(released_back.refused[0]) == LeaseOwner::radix_index);
  CHECK(released_back.refused[2] == LeaseId{0});

  // A release receipt with only one list filled keeps the lists apart; an
  // incomplete attempt stays incomplete.
  for (const ReuseReleaseReceipt& one_sided :
       {ReuseReleaseReceipt{ExecutionSnapshotVersion{9}, {LeaseId{7}}, {}, true},
        ReuseReleaseReceipt{ExecutionSnapshotVersion{9}, {}, {LeaseId{7}}, false}, ReuseReleaseReceipt{}}) {
    const ReuseBatchReceipt single{TraceContext{1, 2, 3}, {one_sided}};
    CHECK(codec::decode<ReuseBatchReceipt>(codec::encode(single)).value() == single);
  }

  // A default rejection (step authorize, reason no_candidate, nothing released).
  const ReuseBatchReceipt plain{TraceContext{1, 2, 3}, {ReuseRejectionReceipt{}}};
  CHECK(codec::decode<ReuseBatchReceipt>(codec::encode(plain)).value() == plain);
}

TEST_CASE("node protocol: every ReuseStep and RejectionReason travels", "[codec][reuse-codec]") {
  for (uint8_t step = 1; step <= kReuseStepCount; ++step)
    for (uint8_t reason = 0; reason < kRejectionReasonCount; ++reason) {
      INFO("step " << int(step) << ", reason " << int(reason));
      ReuseBatchReceipt r = filled<ReuseBatchReceipt>();
      auto& rejection = std::get<ReuseRejectionReceipt>(r.outcomes[2]);
      rejection.step = static_cast<ReuseStep>(step);
      rejection.reason = static_cast<RejectionReason>(reason);
      auto back = codec::decode<ReuseBatchReceipt>(codec::encode(r));
      REQUIRE(back.ok());
      CHECK(*back == r);
    }
  for (uint8_t v = 0; v <= kLogitsPathMax; ++v) {
    ReuseBatch b = filled<ReuseBatch>();
    std::get<ReuseAcquireOp>(b.ops[0]).logits_path = static_cast<LogitsPath>(v);
    CHECK(*codec::decode<ReuseBatch>(codec::encode(b)) == b);
  }
}

TEST_CASE("node protocol: a reuse batch and its receipt are never decoded as another kind", "[codec][reuse-codec]") {
  auto kind_error = [](auto r, const std::string& written) {
    REQUIRE_FALSE(r.ok());
    INFO(r.error().describe());
    CHECK(r.error().code == ErrorCode::decode_failed);
    CHECK(r.error().field == "Envelope.body");
    CHECK(r.error().reason.ends_with("got a " + written));
  };
  const auto batch = codec::encode(filled<ReuseBatch>());
  const auto receipt = codec::encode(filled<ReuseBatchReceipt>());
  // The nearest neighbours: the prefix batch (same op fields but one), the
  // receipt the reuse receipt carries, and each other.
  kind_error(codec::decode<PrefixBatch>(batch), "ReuseBatch");
  kind_error(codec::decode<ReuseBatchReceipt>(batch), "ReuseBatch");
  kind_error(codec::decode<ExecuteBatch>(batch), "ReuseBatch");
  kind_error(codec::decode<PrefixBatchReceipt>(receipt), "ReuseBatchReceipt");
  kind_error(codec::decode<ExecutableReuseReceipt>(receipt), "ReuseBatchReceipt");
  kind_error(codec::decode<ReuseBatch>(receipt), "ReuseBatchReceipt");
  kind_error(codec::decode<ReuseBatch>(codec::encode(filled<PrefixBatch>())), "PrefixBatch");
  kind_error(codec::decode<ReuseBatchReceipt>(codec::encode(filled<PrefixBatchReceipt>())), "PrefixBatchReceipt");
  kind_error(codec::decode<ReuseBatchReceipt>(codec::encode(filled<ExecutableReuseReceipt>())),
             "ExecutableReuseReceipt");
  kind_error(codec::decode<ReuseBatchReceipt>(codec::encode(filled<AllocatorBatchReceipt>())), "AllocatorBatchReceipt");
  // Even an empty batch keeps its kind.
  kind_error(codec::decode<PrefixBatch>(codec::encode(ReuseBatch{})), "ReuseBatch");
  kind_error(codec::decode<ReuseBatch>(codec::encode(PrefixBatch{})), "PrefixBatch");
}

TEST_CASE("node protocol: a bad reuse step, reason or source is unknown_enum naming the field",
          "[codec][reuse-codec]") {
  // ReuseStep counts from 1: wire value 0 is as unknown as one past finish.
  for (uint16_t step : {uint16_t{0}, uint16_t{kReuseStepCount + 1}, uint16_t{999}}) {
    INFO("step " << step);
    const auto bytes = edited(codec::encode(filled<ReuseBatchReceipt>()), [&](wire::Envelope::Builder e) {
      e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[2].getRejectionReceipt().setStep(
          static_cast<wire::ReuseStep>(step));
    });
    auto s = decode_error<ReuseBatchReceipt>(bytes);
    CHECK(s.code == ErrorCode::unknown_enum);
    CHECK(s.field == "ReuseBatchReceipt.outcomes[2].rejection_receipt.step");
    CHECK(s.reason.find("value " + std::to_string(step)) != std::string::npos);
  }

  const auto reason = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[2].getRejectionReceipt().setReason(
        static_cast<wire::RejectionReason>(kRejectionReasonCount));
  });
  auto r = decode_error<ReuseBatchReceipt>(reason);
  CHECK(r.code == ErrorCode::unknown_enum);
  CHECK(r.field == "ReuseBatchReceipt.outcomes[2].rejection_receipt.reason");

  // The reused ExecutableReuseReceipt codec keeps its own field names below the element.
  const auto source = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[1].getExecutableReuseReceipt().setSource(
        static_cast<wire::ReuseSource>(kReuseSourceMax + 1));
  });
  auto src = decode_error<ReuseBatchReceipt>(source);
  CHECK(src.code == ErrorCode::unknown_enum);
  CHECK(src.field == "ReuseBatchReceipt.outcomes[1].executable_reuse_receipt.source");

  const auto logits = edited(codec::encode(filled<ReuseBatch>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::ReuseBatch>().getOps()[1].getAcquire().setLogitsPath(
        static_cast<wire::LogitsPath>(kLogitsPathMax + 1));
  });
  auto l = decode_error<ReuseBatch>(logits);
  CHECK(l.code == ErrorCode::unknown_enum);
  CHECK(l.field == "ReuseBatch.ops[1].acquire.logits_path");

  const auto code = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[0].getError().setCode(9999);
  });
  auto c = decode_error<ReuseBatchReceipt>(code);
  CHECK(c.code == ErrorCode::unknown_enum);
  CHECK(c.field == "ReuseBatchReceipt.outcomes[0].error.code");
}

TEST_CASE("node protocol: a malformed reuse message is a typed error naming element and field",
          "[codec][reuse-codec]") {
  // ReuseRejectionReceipt's pointer section is {detail, leasesReleased}:
  // leasesReleased becomes a struct pointer.
  const auto leases = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[2].getRejectionReceipt())
        .getPointerSection()[1]
        .initAs<wire::TraceContext>();
  });
  auto l = decode_error<ReuseBatchReceipt>(leases);
  CHECK(l.code == ErrorCode::decode_failed);
  CHECK(l.field == "ReuseBatchReceipt.outcomes[2].rejection_receipt.leases_released");

  // ReuseAcquireOp's pointer section is {namespaceName, tokens}.
  const auto tokens = edited(codec::encode(filled<ReuseBatch>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatch>().getOps()[1].getAcquire())
        .getPointerSection()[1]
        .initAs<wire::TraceContext>();
  });
  CHECK(decode_error<ReuseBatch>(tokens).field == "ReuseBatch.ops[1].acquire.tokens");

  // ReuseReleaseOp has no pointers; ReuseReleaseReceipt's pointer section is
  // {released, refused}.
  // The release op itself a list instead of a struct: the element's member is named.
  const auto release_op = edited(codec::encode(filled<ReuseBatch>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatch>().getOps()[2])
        .getPointerSection()[0]
        .initAsListOfAnyStruct(1, 0, 2);
  });
  CHECK(decode_error<ReuseBatch>(release_op).field == "ReuseBatch.ops[2].release");
  for (unsigned slot : {0u, 1u}) {
    INFO("pointer " << slot);
    const auto lists = edited(codec::encode(filled<ReuseBatchReceipt>()), [&](wire::Envelope::Builder e) {
      capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[3].getReleaseReceipt())
          .getPointerSection()[slot]
          .initAs<wire::TraceContext>();
    });
    auto rr = decode_error<ReuseBatchReceipt>(lists);
    CHECK(rr.code == ErrorCode::decode_failed);
    CHECK(rr.field == std::string("ReuseBatchReceipt.outcomes[3].release_receipt.") + (slot ? "refused" : "released"));
  }

  const uint8_t zeros[33] = {};
  for (size_t len : {size_t{0}, size_t{31}, size_t{33}}) {
    INFO("length " << len);
    const auto digest = edited(codec::encode(filled<ReuseBatchReceipt>()), [&](wire::Envelope::Builder e) {
      e.getBody().getAs<wire::ReuseBatchReceipt>().getOutcomes()[1].getExecutableReuseReceipt().setLayoutDigest(
          capnp::Data::Reader(zeros, len));
    });
    CHECK(decode_error<ReuseBatchReceipt>(digest).field ==
          "ReuseBatchReceipt.outcomes[1].executable_reuse_receipt.layout_digest");
  }

  // Lists of elements smaller than the schema's are refused, ops and outcomes alike.
  const auto ops = edited(codec::encode(filled<ReuseBatch>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatch>())
        .getPointerSection()[1]
        .initAsListOfAnyStruct(0, 0, 100000);
  });
  REQUIRE(ops.size() < 1024);
  auto o = decode_error<ReuseBatch>(ops);
  CHECK(o.code == ErrorCode::decode_failed);
  CHECK(o.field == "ReuseBatch.ops");
  const auto outcomes = edited(codec::encode(filled<ReuseBatchReceipt>()), [](wire::Envelope::Builder e) {
    capnp::AnyStruct::Builder(e.getBody().getAs<wire::ReuseBatchReceipt>())
        .getPointerSection()[1]
        .initAsListOfAnyStruct(0, 0, 100000);
  });
  CHECK(decode_error<ReuseBatchReceipt>(outcomes).field == "ReuseBatchReceipt.outcomes");
}
