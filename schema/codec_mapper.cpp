// Codec for the mapper's MappedFrontierReceipt (spec 0x06A-0x06F).
#include "schema/codec_parts.hpp"
#include "schema/codec_support.hpp"
#include "schema/field_count.hpp"
#include "schema/mapper.capnp.h"

namespace kvrt::codec {
namespace {

using detail::read_enum;
using detail::ReadContext;

// Wire enum ordinals must equal the C++ values (both travel as numbers).
static_assert(uint16_t(wire::KvTensorKind::KEY) == uint8_t(KvTensorKind::key));
static_assert(uint16_t(wire::KvTensorKind::VALUE) == uint8_t(KvTensorKind::value));
static_assert(kKvTensorKindMax == uint8_t(KvTensorKind::value));
static_assert(uint16_t(wire::MappingPath::SYNCHRONOUS) == uint8_t(MappingPath::synchronous));
static_assert(uint16_t(wire::MappingPath::ASYNCHRONOUS) == uint8_t(MappingPath::asynchronous));
static_assert(kMappingPathMax == uint8_t(MappingPath::asynchronous));

// A field added to a core type must be added to the schema and to both
// directions below; these counts make the build say so.
static_assert(detail::field_count<PageMapping>() == 5, "update mapper.capnp PageMapping and this codec");
static_assert(detail::field_count<ReclaimedPageBundle>() == 4, "update mapper.capnp ReclaimedPageBundle");
static_assert(detail::field_count<MappingLedger>() == 7, "update mapper.capnp MappingLedger and this codec");
static_assert(detail::field_count<MappedFrontierReceipt>() == 18, "update mapper.capnp MappedFrontierReceipt");

}  // namespace

// MappedFrontierReceipt is also an outcome of the node protocol's
// MapperBatchReceipt (codec_parts.hpp).
namespace detail {

void write(wire::MappedFrontierReceipt::Builder b, const MappedFrontierReceipt& v) {
  b.setRequestId(v.request_id.value);
  b.setRequestGeneration(v.request_generation.value);
  b.setRequestSlot(v.request_slot.value);
  b.setSlotGeneration(v.slot_generation.value);
  b.setMapperEpoch(v.mapper_epoch.value);
  b.setLocalLayers(v.local_layers);
  b.setPageGroupBytes(v.page_group_bytes);
  b.setTokensPerPage(v.tokens_per_page);
  b.setTargetTokens(v.target_tokens);
  b.setMappedPages(v.mapped_pages);
  b.setValidTokens(v.valid_tokens);
  b.setRetainedMappingReused(v.retained_mapping_reused);
  b.setOldKvSemanticallyValid(v.old_kv_semantically_valid);
  auto maps = b.initNewMappings(detail::list_size(v.new_mappings.size()));
  for (unsigned i = 0; i < maps.size(); ++i) {
    const auto& m = v.new_mappings[i];
    maps[i].setLocalLayer(m.local_layer);
    maps[i].setTensor(static_cast<wire::KvTensorKind>(m.tensor));
    maps[i].setPageIndex(m.page_index);
    maps[i].setHandle(m.handle.value);
    maps[i].setHandleGeneration(m.handle_generation.value);
  }
  auto reclaimed = b.initReclaimedBundles(detail::list_size(v.reclaimed_bundles.size()));
  for (unsigned i = 0; i < reclaimed.size(); ++i) {
    const auto& rb = v.reclaimed_bundles[i];
    reclaimed[i].setFromSlot(rb.from_slot.value);
    reclaimed[i].setFromSlotGeneration(rb.from_slot_generation.value);
    reclaimed[i].setFromPageIndex(rb.from_page_index);
    reclaimed[i].setToPageIndex(rb.to_page_index);
  }
  b.setMappingPath(static_cast<wire::MappingPath>(v.mapping_path));
  b.setReadyBeforeUse(v.ready_before_use);
  auto l = b.initLedger();
  l.setVirtualReservedBytes(v.ledger.virtual_reserved_bytes);
  l.setPhysicalPoolBytes(v.ledger.physical_pool_bytes);
  l.setMappedBytes(v.ledger.mapped_bytes);
  l.setActiveValidBytes(v.ledger.active_valid_bytes);
  l.setActiveSlackBytes(v.ledger.active_slack_bytes);
  l.setInactiveRetainedBytes(v.ledger.inactive_retained_bytes);
  l.setFreeHandleBytes(v.ledger.free_handle_bytes);
}

Status read(ReadContext& ctx, wire::MappedFrontierReceipt::Reader r, MappedFrontierReceipt& out) {
  out.request_id = RequestId{r.getRequestId()};
  out.request_generation = RequestGeneration{r.getRequestGeneration()};
  out.request_slot = RequestSlot{r.getRequestSlot()};
  out.slot_generation = SlotGeneration{r.getSlotGeneration()};
  out.mapper_epoch = Epoch{r.getMapperEpoch()};
  out.local_layers = r.getLocalLayers();
  out.page_group_bytes = r.getPageGroupBytes();
  out.tokens_per_page = r.getTokensPerPage();
  out.target_tokens = r.getTargetTokens();
  out.mapped_pages = r.getMappedPages();
  out.valid_tokens = r.getValidTokens();
  out.retained_mapping_reused = r.getRetainedMappingReused();
  out.old_kv_semantically_valid = r.getOldKvSemanticallyValid();
  ctx.at("new_mappings");
  auto maps = r.getNewMappings();
  out.new_mappings.resize(maps.size());
  for (unsigned i = 0; i < maps.size(); ++i) {
    auto& m = out.new_mappings[i];
    m.local_layer = maps[i].getLocalLayer();
    KVRT_TRY(read_enum(ctx, "new_mappings.tensor", maps[i].getTensor(), kKvTensorKindMax, m.tensor));
    m.page_index = maps[i].getPageIndex();
    m.handle = PageHandleId{maps[i].getHandle()};
    m.handle_generation = BlockGeneration{maps[i].getHandleGeneration()};
  }
  ctx.at("reclaimed_bundles");
  auto reclaimed = r.getReclaimedBundles();
  out.reclaimed_bundles.reserve(reclaimed.size());
  for (auto rb : reclaimed)
    out.reclaimed_bundles.push_back(ReclaimedPageBundle{RequestSlot{rb.getFromSlot()},
                                                        SlotGeneration{rb.getFromSlotGeneration()},
                                                        rb.getFromPageIndex(), rb.getToPageIndex()});
  KVRT_TRY(read_enum(ctx, "mapping_path", r.getMappingPath(), kMappingPathMax, out.mapping_path));
  out.ready_before_use = r.getReadyBeforeUse();
  ctx.at("ledger");
  auto l = r.getLedger();
  out.ledger = MappingLedger{l.getVirtualReservedBytes(), l.getPhysicalPoolBytes(), l.getMappedBytes(),
                             l.getActiveValidBytes(),     l.getActiveSlackBytes(),  l.getInactiveRetainedBytes(),
                             l.getFreeHandleBytes()};
  return Status::success();
}

}  // namespace detail

std::vector<uint8_t> encode(const MappedFrontierReceipt& value) {
  return detail::encode_envelope(
      [&](wire::Envelope::Builder e) { detail::write(e.initMappedFrontierReceipt(), value); });
}

template <>
Result<MappedFrontierReceipt> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<MappedFrontierReceipt>(
      bytes, limits, wire::Envelope::MAPPED_FRONTIER_RECEIPT, "MappedFrontierReceipt",
      [](ReadContext& ctx, wire::Envelope::Reader e, MappedFrontierReceipt& out) {
        return detail::read(ctx, e.getMappedFrontierReceipt(), out);
      });
}

}  // namespace kvrt::codec
