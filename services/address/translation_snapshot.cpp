#include "services/address/translation_snapshot.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace kvrt {
namespace {

std::string at(const std::string& list, size_t i) { return list + "[" + std::to_string(i) + "]"; }

// [begin, end) byte range of one tensor, named for overlap messages.
struct TensorRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string name;   // "g1 K"
  std::string field;  // "pools[1].k_base"
};

Status validate_pool(const TranslationSnapshot& s, size_t pi, std::vector<TensorRange>& ranges) {
  const GroupPool& pool = s.pools[pi];
  const std::string where = at("pools", pi);
  const CacheGroupLayout* group = s.layout.group(pool.group);
  if (group == nullptr)
    return make_error(ErrorCode::unknown_group,
                      "pool " + std::to_string(pool.pool_id.value) + " names cache group " +
                          std::to_string(pool.group.value) + ", which the layout does not declare",
                      where + ".group");
  for (size_t j = 0; j < pi; ++j) {
    if (s.pools[j].group == pool.group)
      return make_error(ErrorCode::invalid_argument,
                        "cache group " + std::to_string(pool.group.value) + " has two pools", where + ".group");
    if (s.pools[j].pool_id == pool.pool_id)
      return make_error(ErrorCode::invalid_argument,
                        "pool id " + std::to_string(pool.pool_id.value) + " is used by two cache groups",
                        where + ".pool_id");
  }
  if (pool.slot_count == 0)
    return make_error(ErrorCode::invalid_argument, "a pool needs at least one slot", where + ".slot_count");

  std::set<PhysicalBlockId> ids;
  std::map<PhysicalSlot, PhysicalBlockId> slot_owner;
  for (size_t di = 0; di < pool.descriptors.size(); ++di) {
    const PoolDescriptor& d = pool.descriptors[di];
    const std::string dw = where + "." + at("descriptors", di);
    const std::string id = std::to_string(d.physical_id.value);
    // 0x03A: identities are scoped by generation; a descriptor of another
    // generation would let a stale id name a recycled object.
    if (d.pool_generation != pool.pool_generation)
      return make_error(ErrorCode::stale_physical,
                        "descriptor " + id + " carries pool generation " + std::to_string(d.pool_generation.value) +
                            " but pool " + std::to_string(pool.pool_id.value) + " is at generation " +
                            std::to_string(pool.pool_generation.value),
                        dw + ".pool_generation");
    if (!ids.insert(d.physical_id).second)
      return make_error(ErrorCode::invalid_argument, "physical block " + id + " has two descriptors", dw + ".id");
    if (d.slot.value >= pool.slot_count)
      return make_error(ErrorCode::coordinate_out_of_range,
                        "descriptor " + id + " names slot " + std::to_string(d.slot.value) + " of a " +
                            std::to_string(pool.slot_count) + "-slot pool",
                        dw + ".slot");
    if (auto [it, fresh] = slot_owner.emplace(d.slot, d.physical_id); !fresh)
      return make_error(ErrorCode::slot_reuse,
                        "slot " + std::to_string(d.slot.value) + " is claimed by physical blocks " +
                            std::to_string(it->second.value) + " and " + id,
                        dw + ".slot");
    if (d.valid_rows > s.block_size())
      return make_error(ErrorCode::row_not_valid,
                        "descriptor " + id + " claims " + std::to_string(d.valid_rows) + " valid rows in a " +
                            std::to_string(s.block_size()) + "-row block",
                        dw + ".valid_rows");
  }

  auto geometry = tensor_geometry(*group, s.block_size(), pool.slot_count);
  if (!geometry)
    return make_error(ErrorCode::invalid_argument, "tensor element count overflows 64 bits", where + ".slot_count");
  const std::string gname = "g" + std::to_string(pool.group.value);
  for (TensorKind kind : {TensorKind::K, TensorKind::V}) {
    const unsigned __int128 end =
        static_cast<unsigned __int128>(pool.base(kind)) +
        static_cast<unsigned __int128>(geometry->elements) * tensor_scalar_bytes(*group, kind);
    const std::string field = where + (kind == TensorKind::K ? ".k_base" : ".v_base");
    if (end > UINT64_MAX)
      return make_error(ErrorCode::invalid_argument,
                        gname + " " + std::string(to_string(kind)) + " tensor runs past the 64-bit address space",
                        field);
    ranges.push_back({pool.base(kind), static_cast<uint64_t>(end), gname + " " + std::string(to_string(kind)), field});
  }
  return Status::success();
}

Status validate_tensor_ranges(std::vector<TensorRange> ranges) {
  // Sorted by begin, ranges are disjoint iff each ends at or before the next
  // begins; any overlap shows up between neighbours.
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      return make_error(ErrorCode::overlapping_tensors,
                        ranges[i - 1].name + " [" + std::to_string(ranges[i - 1].begin) + "," +
                            std::to_string(ranges[i - 1].end) + ") overlaps " + ranges[i].name + " [" +
                            std::to_string(ranges[i].begin) + "," + std::to_string(ranges[i].end) + ")",
                        ranges[i].field);
  return Status::success();
}

Status validate_request(const TranslationSnapshot& s, size_t ri) {
  const RequestTables& r = s.requests[ri];
  const std::string where = at("requests", ri);
  if (r.name.empty()) return make_error(ErrorCode::invalid_argument, "request name is empty", where + ".name");
  for (size_t j = 0; j < ri; ++j) {
    const RequestTables& o = s.requests[j];
    if ((o.name == r.name) != (o.request_id == r.request_id))
      return make_error(ErrorCode::invalid_argument,
                        "request names and ids must correspond one to one (\"" + r.name + "\" id " +
                            std::to_string(r.request_id.value) + " vs \"" + o.name + "\" id " +
                            std::to_string(o.request_id.value) + ")",
                        where + ".id");
    // 0x03H: the table version changes atomically with the published mapping,
    // so two snapshots of one request can never share a version.
    if (o.name == r.name && o.table_version == r.table_version)
      return make_error(ErrorCode::stale_table_version,
                        "request " + r.name + " publishes table version " + std::to_string(r.table_version.value) +
                            " twice; a successor must advance the version",
                        where + ".table_version");
  }
  if (r.tables.size() != s.layout.cache_groups.size())
    return make_error(ErrorCode::unknown_group,
                      "request " + r.name + " has " + std::to_string(r.tables.size()) +
                          " group tables; the layout has " + std::to_string(s.layout.cache_groups.size()) +
                          " cache groups",
                      where + ".tables");
  for (size_t ti = 0; ti < r.tables.size(); ++ti) {
    const GroupTable& t = r.tables[ti];
    const std::string tw = where + "." + at("tables", ti);
    if (s.layout.group(t.group) == nullptr)
      return make_error(
          ErrorCode::unknown_group,
          "request " + r.name + " has a table for undeclared cache group " + std::to_string(t.group.value),
          tw + ".group");
    for (size_t tj = 0; tj < ti; ++tj)
      if (r.tables[tj].group == t.group)
        return make_error(ErrorCode::unknown_group,
                          "request " + r.name + " has two tables for cache group " + std::to_string(t.group.value),
                          tw + ".group");
    // All groups share P here, so logical block j covers the same tokens in
    // every group and the tables must have one length (0x03B).
    if (t.blocks.size() != r.tables[0].blocks.size())
      return make_error(ErrorCode::table_length_drift,
                        "request " + r.name + " v" + std::to_string(r.table_version.value) + ": table of group " +
                            std::to_string(t.group.value) + " has " + std::to_string(t.blocks.size()) +
                            " blocks, table of group " + std::to_string(r.tables[0].group.value) + " has " +
                            std::to_string(r.tables[0].blocks.size()),
                        tw + ".blocks");
  }
  // Bundle agreement (0x03B): logical block j of every group refines one Loop
  // 3 bundle. Only resolvable entries that carry a bundle take part.
  const size_t n = r.tables.empty() ? 0 : r.tables[0].blocks.size();
  for (size_t j = 0; j < n; ++j) {
    std::optional<std::pair<uint64_t, CacheGroupId>> first;
    for (size_t ti = 0; ti < r.tables.size(); ++ti) {
      const GroupTable& t = r.tables[ti];
      const GroupPool* pool = s.pool(t.group);
      if (pool == nullptr || pool->pool_id != t.pool_id || pool->pool_generation != t.pool_generation) continue;
      const PoolDescriptor* d = pool->descriptor(t.blocks[j]);
      if (d == nullptr || !d->bundle) continue;
      if (!first) {
        first.emplace(*d->bundle, t.group);
      } else if (first->first != *d->bundle) {
        return make_error(ErrorCode::bundle_mismatch,
                          "request " + r.name + " logical block " + std::to_string(j) + ": group " +
                              std::to_string(first->second.value) + " is in bundle " + std::to_string(first->first) +
                              ", group " + std::to_string(t.group.value) + " block " +
                              std::to_string(t.blocks[j].value) + " is in bundle " + std::to_string(*d->bundle),
                          where + "." + at("tables", ti) + "." + at("blocks", j));
      }
    }
  }
  return Status::success();
}

}  // namespace

const PoolDescriptor* GroupPool::descriptor(PhysicalBlockId id) const {
  for (const auto& d : descriptors)
    if (d.physical_id == id) return &d;
  return nullptr;
}

const GroupTable* RequestTables::table(CacheGroupId group) const {
  for (const auto& t : tables)
    if (t.group == group) return &t;
  return nullptr;
}

const GroupPool* TranslationSnapshot::pool(CacheGroupId group) const {
  for (const auto& p : pools)
    if (p.group == group) return &p;
  return nullptr;
}

const RequestTables* TranslationSnapshot::current(std::string_view name) const {
  const RequestTables* best = nullptr;
  for (const auto& r : requests)
    if (r.name == name && (best == nullptr || r.table_version > best->table_version)) best = &r;
  return best;
}

TensorGeometry TranslationSnapshot::geometry(const CacheGroupLayout& group, const GroupPool& pool) const {
  auto g = tensor_geometry(group, block_size(), pool.slot_count);
  KVRT_ASSERT(g.has_value(), "geometry of a validated snapshot overflowed");
  return *g;
}

uint64_t TranslationSnapshot::tensor_end(const CacheGroupLayout& group, const GroupPool& pool, TensorKind kind) const {
  return pool.base(kind) + geometry(group, pool).elements * tensor_scalar_bytes(group, kind);
}

Status TranslationSnapshot::validate() const {
  KVRT_TRY(layout.validate());
  std::vector<TensorRange> ranges;
  for (size_t pi = 0; pi < pools.size(); ++pi) KVRT_TRY(validate_pool(*this, pi, ranges));
  for (const auto& g : layout.cache_groups)
    if (pool(g.group_id) == nullptr)
      return make_error(ErrorCode::unknown_group, "cache group " + std::to_string(g.group_id.value) + " has no pool",
                        "pools");
  KVRT_TRY(validate_tensor_ranges(std::move(ranges)));
  for (size_t ri = 0; ri < requests.size(); ++ri) KVRT_TRY(validate_request(*this, ri));
  return Status::success();
}

}  // namespace kvrt
