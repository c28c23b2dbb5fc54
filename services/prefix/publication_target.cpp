#include "services/prefix/publication_target.hpp"

#include <string>

namespace kvrt {

Result<std::vector<PhysicalBlockHandle>> BlockTableSnapshotTarget::table(RequestId request,
                                                                         uint32_t group_index) const {
  if (request != request_)
    return make_error(
        ErrorCode::unknown_request,
        "the snapshot holds request " + std::to_string(request_.value) + ", not " + std::to_string(request.value),
        "request");
  if (group_index >= groups_.size())
    return make_error(ErrorCode::invalid_argument, "no cache group " + std::to_string(group_index), "group");
  std::vector<PhysicalBlockHandle> out;
  out.reserve(groups_[group_index].size());
  for (const SnapshotBlock& b : groups_[group_index]) out.push_back(b.handle);
  return out;
}

const SnapshotBlock* BlockTableSnapshotTarget::find(const PhysicalBlockHandle& h) const {
  for (const auto& group : groups_)
    for (const SnapshotBlock& b : group)
      if (b.handle == h) return &b;
  return nullptr;
}

Result<BlockMeta> BlockTableSnapshotTarget::block(const PhysicalBlockHandle& handle) const {
  const SnapshotBlock* b = find(handle);
  if (b == nullptr)
    return make_error(ErrorCode::unknown_physical,
                      "block " + std::to_string(handle.block.value) + " is not in the request's table snapshot",
                      "handle");
  BlockMeta meta;
  meta.valid_rows = static_cast<uint16_t>(b->valid_rows);
  meta.cache_key = b->cache_key;
  meta.generation = handle.generation.value;
  meta.state = BlockState::live;
  return meta;
}

Status BlockTableSnapshotTarget::publish_cache_key(const PhysicalBlockHandle& handle, CacheKey cache_key) {
  if (find(handle) == nullptr) return make_error(ErrorCode::unknown_physical, "block is not in the snapshot", "handle");
  tags_.push_back(CacheKeyTag{handle, cache_key});
  return Status::success();
}

}  // namespace kvrt
