#include "services/mapper/mapper_view.hpp"

#include "services/mapper/page_pool_server.hpp"

namespace kvrt {

Result<MapperPoolView> MapperPoolView::attach(const MapperAttachment& a) {
  MapperConfig c;
  c.local_layers = a.local_layers;
  c.request_slots = a.request_slots;
  c.max_tokens = a.max_tokens;
  c.kv_heads = a.kv_heads;
  c.head_dim = a.head_dim;
  c.element_bytes = a.element_bytes;
  c.page_group_bytes = a.page_group_bytes;
  c.handle_count = a.handle_count;
  Result<MapperGeometry> geometry = MapperGeometry::make(c);
  if (!geometry.ok()) return geometry.error();
  const PagePoolIdentity identity{a.page_group_bytes, a.handle_count, PoolGeneration{a.pool_generation}};
  Result<ReceivedPagePool> pool = fetch_page_pool(a.socket_path, identity);
  if (!pool.ok()) return pool.error();
  const uint64_t view_pages = geometry->virtual_reserved_bytes() / a.page_group_bytes;
  if (pool->offer().view_pages != view_pages)
    return make_error(ErrorCode::incompatible,
                      "the node offers a view of " + std::to_string(pool->offer().view_pages) +
                          " pages; the descriptor's geometry has " + std::to_string(view_pages),
                      "view_pages");
  Result<PoolView> view = PoolView::map(*pool);
  if (!view.ok()) return view.error();
  return MapperPoolView(std::move(*geometry), identity, std::move(*pool), std::move(*view));
}

Status MapperPoolView::bind(const SlotBinding& binding) {
  if (binding.retained_mappings.empty()) return Status::success();
  const uint64_t g = geometry_.config().page_group_bytes;
  std::vector<ViewPage> pages;
  for (const PageMapping& m : binding.retained_mappings) {
    const uint64_t offset =
        geometry_.page_offset(geometry_.tensor_index(m.local_layer, m.tensor), binding.slot.value, m.page_index);
    pages.push_back(ViewPage{static_cast<uint32_t>(offset / g), m.handle.value});
  }
  return view_.map_pages(pool_.fd(), identity_, pages);
}

Status MapperPoolView::apply(const StepResult& step) {
  return view_.map_pages(pool_.fd(), identity_, view_pages_from_receipts(geometry_, step.receipts));
}

}  // namespace kvrt
