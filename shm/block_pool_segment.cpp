#include "shm/block_pool_segment.hpp"

#include <atomic>
#include <cstring>
#include <utility>

#include "shm/pool_segment_header.hpp"
#include "shm/segment_file.hpp"

namespace kvrt::shm {
namespace {

// Everything creation derives before it touches the operating system.
struct Plan {
  std::string name;
  PoolSegmentInfo info;
};

Result<Plan> plan_pool(const CacheLayoutManifest& manifest, const PoolSegmentOptions& options) {
  Plan plan;
  KVRT_TRY_ASSIGN(plan.name, pool_segment_name(options.name));
  const CacheGroupId group = options.name.group;
  uint32_t blocks = 0;
  KVRT_TRY_ASSIGN(blocks, capacity_in_blocks(manifest, options.capacity));
  PoolShape shape;
  KVRT_TRY_ASSIGN(shape, pool_shape(manifest, group, blocks));
  PoolGeometry geometry;
  KVRT_TRY_ASSIGN(geometry, PoolGeometry::plan(shape));
  ProcessIdentity self;
  KVRT_TRY_ASSIGN(self, current_process_identity());
  plan.info = PoolSegmentInfo{options.pool_id, options.pool_generation, group, manifest.digest(), self, geometry};
  return plan;
}

std::span<const uint8_t> header_bytes(const PoolSegmentHeader& h, uint64_t from, uint64_t to) {
  return {reinterpret_cast<const uint8_t*>(&h) + from, static_cast<size_t>(to - from)};
}

// The ready flag inside a mapping. std::atomic_ref<uint32_t> is lock-free and
// therefore address-free, so it synchronises across processes.
std::atomic_ref<uint32_t> ready_flag(std::span<uint8_t> mapping) {
  static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
  return std::atomic_ref<uint32_t>(reinterpret_cast<PoolSegmentHeader*>(mapping.data())->ready);
}

// What inspect() sees, plus which file it saw, so that start-up unlinks
// exactly that file and not one a racing creator has just put at the name.
struct Examined {
  SegmentInspection inspection;
  FileIdentity file;
};

Result<Examined> examine(std::string_view name) {
  auto opened = SegmentFile::open(name, /*writable=*/false);
  if (!opened.ok()) return opened.error();
  SegmentFile& file = *opened;
  Examined out;
  out.inspection.name = std::string(name);
  KVRT_TRY_ASSIGN(out.inspection.file_bytes, file.size());
  KVRT_TRY_ASSIGN(out.file, file.identity());
  // pread, not mmap: reading a file shorter than the header through a mapping
  // would raise SIGBUS.
  PoolSegmentHeader h;
  std::memset(&h, 0, sizeof h);
  uint64_t got = 0;
  KVRT_TRY_ASSIGN(got, file.read_at(0, {reinterpret_cast<uint8_t*>(&h), sizeof h}));
  if (got < kOwnerPrefixBytes) return out;  // created, owner not yet on record
  if (h.magic != kPoolSegmentMagic)
    return make_error(ErrorCode::decode_failed, "segment " + out.inspection.name + " is not a kvrt pool segment",
                      "magic");
  out.inspection.owner_recorded = true;
  out.inspection.owner = ProcessIdentity{h.owner_pid, h.owner_start_time};
  out.inspection.owner_state = owner_state(out.inspection.owner);
  out.inspection.published = h.ready == 1;
  // The generation sits outside the format-stable prefix: read it only from
  // a complete header of this format.
  if (out.inspection.published && got == sizeof h && h.format_version == kPoolSegmentFormat)
    out.inspection.pool_generation = PoolGeneration{h.pool_generation};
  return out;
}

// Unlinks exactly the file `examined` looked at: a racing creator may have
// replaced it at the name since. Errors: segment_in_use (it changed), io.
Status unlink_examined(const Examined& examined) {
  const std::string& name = examined.inspection.name;
  {
    auto current = SegmentFile::open(name, /*writable=*/false);
    if (!current.ok()) return current.error();
    FileIdentity now;
    KVRT_TRY_ASSIGN(now, current->identity());
    if (!(now == examined.file))
      return make_error(ErrorCode::segment_in_use, "segment " + name + " changed while it was inspected", "segment");
  }
  return SegmentFile::unlink(name);
}

}  // namespace

namespace detail {
struct SegmentMapping {
  SegmentFile file;
  std::span<uint8_t> bytes;  // the whole segment in this process's address space
  PoolSegmentInfo info;
  bool owner = false;

  // Clean shutdown of the owner removes the name, unless the name has since
  // been given to another file (then that file is not ours to remove).
  ~SegmentMapping() {
    if (owner && file.name_refers_here()) (void)SegmentFile::unlink(file.name());
  }
};
}  // namespace detail

namespace {

using detail::SegmentMapping;

// Creates, sizes, maps and publishes a segment; on failure the half-made
// segment is removed again (the mapping's destructor), so a failed create
// leaves no name behind. An unnamed segment is labelled with the name it
// would have had (without the slash), and sealed at its size once published.
Result<std::unique_ptr<SegmentMapping>> create_at(const Plan& plan, bool unnamed = false) {
  auto created =
      unnamed ? SegmentFile::create_unnamed(std::string_view(plan.name).substr(1)) : SegmentFile::create(plan.name);
  if (!created.ok()) return created.error();
  auto m =
      std::unique_ptr<SegmentMapping>(new SegmentMapping{std::move(created).value(), {}, plan.info, /*owner=*/true});

  const PoolSegmentHeader header = make_header(plan.info);
  // 1. Owner on record first, via pwrite: no page is touched through a
  //    mapping before the size is guaranteed, and a crash from now on leaves
  //    a segment start-up can judge.
  KVRT_TRY(m->file.write_at(0, header_bytes(header, 0, kOwnerPrefixBytes)));
  // 2. Size and allocate every page (clean storage_exhausted, never SIGBUS).
  KVRT_TRY(m->file.reserve(plan.info.geometry.segment_bytes()));
  // 3. Map, fill the body, publish with release, then freeze the header page.
  KVRT_TRY_ASSIGN(m->bytes, m->file.map(/*writable=*/true));
  std::memcpy(m->bytes.data() + kOwnerPrefixBytes, reinterpret_cast<const uint8_t*>(&header) + kOwnerPrefixBytes,
              sizeof header - kOwnerPrefixBytes);
  ready_flag(m->bytes).store(1, std::memory_order_release);
  KVRT_TRY(m->file.protect_prefix(kHeaderBytes));
  if (unnamed) KVRT_TRY(m->file.seal_size());
  return m;
}

// Maps an existing segment read-write and checks its header against what
// the attacher expects.
Result<std::unique_ptr<SegmentMapping>> attach_file(SegmentFile file, PoolGeneration expected_generation,
                                                    const Sha256Digest& expected_layout_digest) {
  auto m = std::unique_ptr<SegmentMapping>(new SegmentMapping{std::move(file), {}, {}, /*owner=*/false});
  uint64_t file_bytes = 0;
  KVRT_TRY_ASSIGN(file_bytes, m->file.size());
  if (file_bytes < sizeof(PoolSegmentHeader))
    return make_error(ErrorCode::decode_failed,
                      "segment " + m->file.name() + " is " + std::to_string(file_bytes) +
                          " bytes, shorter than its header (truncated)",
                      "segment_bytes");
  KVRT_TRY_ASSIGN(m->bytes, m->file.map(/*writable=*/true));
  // Acquire pairs with the owner's release store: a 1 here means every other
  // header byte copied below is the owner's final value.
  const uint32_t ready = ready_flag(m->bytes).load(std::memory_order_acquire);
  PoolSegmentHeader copy;
  std::memcpy(&copy, m->bytes.data(), sizeof copy);
  copy.ready = ready;
  KVRT_TRY_ASSIGN(m->info, decode_header(copy, file_bytes));
  if (m->info.pool_generation != expected_generation)
    return make_error(ErrorCode::stale_generation,
                      "segment " + m->file.name() + " holds pool generation " +
                          std::to_string(m->info.pool_generation.value) + ", expected " +
                          std::to_string(expected_generation.value),
                      "pool_generation");
  if (m->info.layout_digest != expected_layout_digest)
    return make_error(ErrorCode::incompatible,
                      "segment " + m->file.name() + " was laid out by manifest " + m->info.layout_digest.hex() +
                          ", expected " + expected_layout_digest.hex(),
                      "layout_digest");
  KVRT_TRY(m->file.protect_prefix(kHeaderBytes));
  return m;
}

}  // namespace

BlockPoolSegment::BlockPoolSegment(std::unique_ptr<SegmentMapping> mapping) : m_(std::move(mapping)) {}
BlockPoolSegment::BlockPoolSegment(BlockPoolSegment&&) noexcept = default;
BlockPoolSegment& BlockPoolSegment::operator=(BlockPoolSegment&&) noexcept = default;
BlockPoolSegment::~BlockPoolSegment() = default;

detail::SegmentMapping& BlockPoolSegment::live() const {
  KVRT_ASSERT(m_ != nullptr, "use of a moved-from BlockPoolSegment");
  return *m_;
}

Result<BlockPoolSegment> BlockPoolSegment::create(const CacheLayoutManifest& manifest,
                                                  const PoolSegmentOptions& options) {
  Plan plan;
  KVRT_TRY_ASSIGN(plan, plan_pool(manifest, options));
  auto made = create_at(plan);
  if (!made.ok()) return made.error();
  return BlockPoolSegment(std::move(made).value());
}

Result<CreatedSegment> BlockPoolSegment::create_or_replace(const CacheLayoutManifest& manifest,
                                                           const PoolSegmentOptions& options) {
  Plan plan;
  KVRT_TRY_ASSIGN(plan, plan_pool(manifest, options));
  auto first = create_at(plan);
  if (first.ok()) return CreatedSegment{BlockPoolSegment(std::move(first).value()), std::nullopt};
  if (first.error().code != ErrorCode::segment_in_use) return first.error();

  auto examined = examine(plan.name);
  if (!examined.ok()) {
    // Removed between our create and our look (its owner shut down): try once more.
    if (examined.error().code != ErrorCode::io) return examined.error();
    auto again = create_at(plan);
    if (!again.ok()) return again.error();
    return CreatedSegment{BlockPoolSegment(std::move(again).value()), std::nullopt};
  }
  const SegmentInspection& found = examined->inspection;
  if (!found.owner_recorded)
    return make_error(ErrorCode::segment_in_use,
                      "segment " + plan.name +
                          " has no owner record: a creator is starting, or died within microseconds of creating "
                          "it; remove it by hand if no kvrt process is starting",
                      "segment");
  if (found.owner_state == OwnerState::alive)
    return make_error(ErrorCode::segment_in_use,
                      "segment " + plan.name + " belongs to live process " + std::to_string(found.owner.pid) +
                          " (start time " + std::to_string(found.owner.start_time_ticks) + ")",
                      "segment");
  if (found.pool_generation && found.pool_generation->value >= plan.info.pool_generation.value)
    return make_error(ErrorCode::stale_generation,
                      "replacing segment " + plan.name + " of pool generation " +
                          std::to_string(found.pool_generation->value) + " needs a newer generation than " +
                          std::to_string(plan.info.pool_generation.value),
                      "pool_generation");

  KVRT_TRY(unlink_examined(*examined));
  auto made = create_at(plan);
  if (!made.ok()) return made.error();
  return CreatedSegment{BlockPoolSegment(std::move(made).value()), found};
}

Result<BlockPoolSegment> BlockPoolSegment::attach(std::string_view name, PoolGeneration expected_generation,
                                                  const Sha256Digest& expected_layout_digest) {
  auto opened = SegmentFile::open(name, /*writable=*/true);
  if (!opened.ok()) return opened.error();
  auto m = attach_file(std::move(opened).value(), expected_generation, expected_layout_digest);
  if (!m.ok()) return m.error();
  return BlockPoolSegment(std::move(m).value());
}

Result<BlockPoolSegment> BlockPoolSegment::create_unnamed(const CacheLayoutManifest& manifest,
                                                          const PoolSegmentOptions& options) {
  Plan plan;
  KVRT_TRY_ASSIGN(plan, plan_pool(manifest, options));
  auto made = create_at(plan, /*unnamed=*/true);
  if (!made.ok()) return made.error();
  return BlockPoolSegment(std::move(made).value());
}

Result<BlockPoolSegment> BlockPoolSegment::attach_descriptor(UniqueFd descriptor, std::string_view label,
                                                             PoolGeneration expected_generation,
                                                             const Sha256Digest& expected_layout_digest) {
  auto adopted = SegmentFile::adopt(std::move(descriptor), label);
  if (!adopted.ok()) return adopted.error();
  // An owner seals every unnamed segment before it hands it out: one that
  // could still shrink is not the node's, and mapping it would risk SIGBUS.
  if (!adopted->size_sealed())
    return make_error(ErrorCode::pool_size_mismatch,
                      "the descriptor of segment " + std::string(label) + " is not sealed against shrink and grow",
                      "seals");
  auto m = attach_file(std::move(adopted).value(), expected_generation, expected_layout_digest);
  if (!m.ok()) return m.error();
  return BlockPoolSegment(std::move(m).value());
}

Result<SegmentInspection> BlockPoolSegment::inspect(std::string_view name) {
  auto examined = examine(name);
  if (!examined.ok()) return examined.error();
  return examined->inspection;
}

Status BlockPoolSegment::remove(std::string_view name) { return SegmentFile::unlink(name); }

Result<BlockPoolSegment::StaleRemoval> BlockPoolSegment::remove_if_stale(std::string_view name) {
  auto examined = examine(name);
  if (!examined.ok()) return examined.error();
  StaleRemoval out{examined->inspection, false};
  const bool stale = out.found.owner_recorded && out.found.owner_state != OwnerState::alive;
  if (!stale) return out;
  KVRT_TRY(unlink_examined(*examined));
  out.removed = true;
  return out;
}

const std::string& BlockPoolSegment::name() const { return live().file.name(); }
bool BlockPoolSegment::is_owner() const { return live().owner; }
bool BlockPoolSegment::unnamed() const { return live().file.unnamed(); }
int BlockPoolSegment::descriptor() const { return live().file.descriptor(); }
PoolId BlockPoolSegment::pool_id() const { return live().info.pool_id; }
PoolGeneration BlockPoolSegment::pool_generation() const { return live().info.pool_generation; }
CacheGroupId BlockPoolSegment::group() const { return live().info.group; }
const Sha256Digest& BlockPoolSegment::layout_digest() const { return live().info.layout_digest; }
ProcessIdentity BlockPoolSegment::owner() const { return live().info.owner; }
const PoolGeometry& BlockPoolSegment::geometry() const { return live().info.geometry; }

Status BlockPoolSegment::check_ref(const PoolBlockRef& ref) const {
  if (ref.pool != live().info.pool_id)
    return make_error(ErrorCode::unknown_physical,
                      "block names pool " + std::to_string(ref.pool.value) + ", segment " + name() + " holds pool " +
                          std::to_string(live().info.pool_id.value),
                      "pool_id");
  if (ref.generation != live().info.pool_generation)
    return make_error(ErrorCode::stale_generation,
                      "block names pool generation " + std::to_string(ref.generation.value) + ", the pool is at " +
                          std::to_string(live().info.pool_generation.value),
                      "pool_generation");
  return Status::success();
}

Result<uint64_t> BlockPoolSegment::byte_offset(const PoolBlockRef& ref, const KvCoordinate& c) const {
  KVRT_TRY(check_ref(ref));
  return geometry().byte_offset(ref.block, c);
}

Result<std::span<const uint8_t>> BlockPoolSegment::lanes(const PoolBlockRef& ref, const KvCoordinate& c,
                                                         uint32_t lane_count) const {
  KVRT_TRY(check_ref(ref));
  ByteRun run;
  KVRT_TRY_ASSIGN(run, geometry().lane_run(ref.block, c, lane_count));
  return bytes(run);
}

Result<std::span<uint8_t>> BlockPoolSegment::lanes(const PoolBlockRef& ref, const KvCoordinate& c,
                                                   uint32_t lane_count) {
  std::span<const uint8_t> view;
  KVRT_TRY_ASSIGN(view, std::as_const(*this).lanes(ref, c, lane_count));
  return writable(view);
}

Result<RowRuns> BlockPoolSegment::row_runs(const PoolBlockRef& ref, TensorKind kind, uint32_t token_begin,
                                           uint32_t token_end) const {
  KVRT_TRY(check_ref(ref));
  return geometry().row_runs(ref.block, kind, token_begin, token_end);
}

Result<std::span<const uint8_t>> BlockPoolSegment::bytes(const ByteRun& run) const {
  const PoolGeometry& g = geometry();
  for (TensorKind kind : {TensorKind::K, TensorKind::V}) {
    const uint64_t begin = g.tensor_offset(kind), end = begin + g.tensor_bytes(kind);
    if (run.offset >= begin && run.offset <= end && run.bytes <= end - run.offset)
      return std::span<const uint8_t>(
          live().bytes.subspan(static_cast<size_t>(run.offset), static_cast<size_t>(run.bytes)));
  }
  return make_error(ErrorCode::address_out_of_tensor,
                    "bytes [" + std::to_string(run.offset) + ", +" + std::to_string(run.bytes) +
                        ") are not inside the K or V tensor of " + name(),
                    "offset");
}

Result<std::span<uint8_t>> BlockPoolSegment::bytes(const ByteRun& run) {
  std::span<const uint8_t> view;
  KVRT_TRY_ASSIGN(view, std::as_const(*this).bytes(run));
  return writable(view);
}

std::span<uint8_t> BlockPoolSegment::writable(std::span<const uint8_t> view) {
  // The mapping is read-write; constness lives in the handle, not the pages.
  return {const_cast<uint8_t*>(view.data()), view.size()};
}

}  // namespace kvrt::shm
