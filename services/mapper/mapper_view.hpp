#pragma once
// MapperPoolView: a worker's contiguous view of its node's mapper pool, so
// attention code there indexes K/V with plain strides (0x06B). attach() fetches
// the pool's memfd from the node's socket (page_pool_server.hpp) and reserves
// the whole virtual layout with no page mapped; apply() maps the pages a
// step's MappedFrontierReceipts announce, at the node's offsets (0x06C), so
// byte (tensor, slot, row) of the view is the node's byte. A kernel reads a
// frontier only after its receipt was applied (map before use, 0x06D).
#include <cstddef>

#include "services/mapper/mapper_geometry.hpp"
#include "services/mapper/page_pool_channel.hpp"
#include "services/mapper/vmm_mapper.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt {

class MapperPoolView {
 public:
  // Errors: config_field (a geometry the attachment cannot describe), io
  // (socket), and receive_page_pool's typed refusals (stale generation, size).
  static Result<MapperPoolView> attach(const MapperAttachment& attachment);

  Status apply(const StepResult& step);
  // Maps the pages a slot kept from its previous owner (SlotBinding's
  // retained mappings) before the new owner's first step: they were mapped
  // by a step this process may never have seen (0x06E).
  Status bind(const SlotBinding& binding);
  // Maps the given view pages (a part of a step's receipts). Touches no
  // member state, so one call may run on a background thread while the
  // owner reads and writes other, already mapped pages; calls that map must
  // not overlap each other (the caller awaits one before the next).
  Status map(const std::vector<ViewPage>& pages) { return view_.map_pages(pool_.fd(), identity_, pages); }
  std::byte* base() const { return view_.base(); }
  const MapperGeometry& geometry() const { return geometry_; }

 private:
  MapperPoolView(MapperGeometry geometry, PagePoolIdentity identity, ReceivedPagePool pool, PoolView view)
      : geometry_(std::move(geometry)), identity_(identity), pool_(std::move(pool)), view_(std::move(view)) {}
  MapperGeometry geometry_;
  PagePoolIdentity identity_;
  ReceivedPagePool pool_;
  PoolView view_;
};

}  // namespace kvrt
