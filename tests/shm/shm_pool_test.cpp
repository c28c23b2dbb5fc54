// Block pool segments in POSIX shared memory ("Physical pools";
// docs/architecture.md, physical storage; docs/stack-notes.md "Shared memory"): lifecycle, typed attach
// failures, clean failure of an oversized pool, and start-up replacement of a
// segment left behind by a crashed owner. Crashes are real: a forked child
// creates a segment and leaves with _exit, skipping every destructor.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "shm/pool_segment_header.hpp"
#include "tests/support/shm_test_fixture.hpp"

using namespace kvrt;
using namespace kvrt::shm;
using namespace kvrt::shm::test;

namespace {

// A child that creates the pool and "crashes" (no destructor runs). Returns its pid.
pid_t crash_after_creating(const CacheLayoutManifest& layout, const PoolSegmentOptions& options) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto made = BlockPoolSegment::create(layout, options);
    ::_exit(made.ok() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return child;
}

// Overwrites the owner record of a segment, as a pid-reuse scenario needs.
void forge_owner(const std::string& name, ProcessIdentity owner) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  REQUIRE(fd >= 0);
  CHECK(::pwrite(fd, &owner.pid, sizeof owner.pid, offsetof(PoolSegmentHeader, owner_pid)) == sizeof owner.pid);
  CHECK(::pwrite(fd, &owner.start_time_ticks, sizeof owner.start_time_ticks,
                 offsetof(PoolSegmentHeader, owner_start_time)) == sizeof owner.start_time_ticks);
  ::close(fd);
}

// A shared-memory object that is not a published pool: `bytes` at offset 0,
// then zeros up to `size`.
void raw_segment(const std::string& name, const void* bytes, size_t n, off_t size) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  if (n > 0) CHECK(::pwrite(fd, bytes, n, 0) == static_cast<ssize_t>(n));
  CHECK(::ftruncate(fd, size) == 0);
  ::close(fd);
}

}  // namespace

TEST_CASE("a pool segment is created, attached by name and removed by its owner", "[shm]") {
  const auto layout = two_group_layout();
  const auto options = pool_options(/*group=*/0, /*blocks=*/4);
  const std::string name = segment_name(options);
  std::optional<BlockPoolSegment> holder;
  {
    auto owner = BlockPoolSegment::create(layout, options);
    REQUIRE(owner.ok());
    CHECK(owner->is_owner());
    CHECK(owner->name() == name);
    // g0 K tensor: blocks * P * L * H_kv * d_h * b = 4*16*24*4*128*2 = 3 MiB.
    const uint64_t tensor = 4ull * 16 * 24 * 4 * 128 * 2;
    const auto& g = owner->geometry();
    CHECK(g.tensor_offset(TensorKind::K) == kHeaderBytes);
    CHECK(g.tensor_bytes(TensorKind::K) == tensor);
    CHECK(g.tensor_offset(TensorKind::V) == kHeaderBytes + tensor);
    CHECK(g.tensor_bytes(TensorKind::V) == tensor);
    CHECK(g.segment_bytes() == kHeaderBytes + 2 * tensor);
    CHECK(g.block_bytes() == 16 * layout.cache_groups[0].row_bytes());  // P * B_row,0 = 768 KiB

    auto seen = BlockPoolSegment::inspect(name);
    REQUIRE(seen.ok());
    CHECK(seen->owner_recorded);
    CHECK(seen->owner.pid == ::getpid());
    CHECK(seen->owner_state == OwnerState::alive);
    CHECK(seen->published);
    CHECK(seen->pool_generation == PoolGeneration{1});
    CHECK(seen->file_bytes == g.segment_bytes());

    {
      auto attached = BlockPoolSegment::attach(name, PoolGeneration{1}, layout.digest());
      REQUIRE(attached.ok());
      CHECK_FALSE(attached->is_owner());
      CHECK(attached->pool_id() == PoolId{7});
      CHECK(attached->group() == CacheGroupId{0});
      CHECK(attached->capacity_blocks() == 4);
      CHECK(attached->owner() == owner->owner());
      CHECK(attached->geometry().shape() == g.shape());

      const PoolBlockRef ref{PoolId{7}, PoolGeneration{1}, PhysicalSlot{2}};
      const KvCoordinate c{TensorKind::V, /*layer_local=*/5, /*token_offset=*/9, /*kv_head=*/3, /*lane=*/0};
      auto written = owner->lanes(ref, c, 128);
      REQUIRE(written.ok());
      REQUIRE(written->size() == 256);  // 128 fp16 lanes
      auto before = std::as_const(*attached).lanes(ref, c, 128);
      REQUIRE(before.ok());
      CHECK(std::all_of(before->begin(), before->end(), [](uint8_t b) { return b == 0; }));  // fresh pages are zero
      for (size_t i = 0; i < written->size(); ++i) (*written)[i] = static_cast<uint8_t>(i * 7 + 1);
      // Two mappings at two addresses: the offset is what both agree on.
      CHECK(before->data() != written->data());
      CHECK(std::equal(before->begin(), before->end(), written->begin(), written->end()));
    }
    CHECK(segment_exists(name));  // an attacher never removes

    holder.emplace(std::move(owner).value());
  }
  CHECK(segment_exists(name));  // the moved-from owner did not remove it
  holder.reset();
  CHECK_FALSE(segment_exists(name));  // clean shutdown of the owner did
  auto gone = BlockPoolSegment::attach(name, PoolGeneration{1}, layout.digest());
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == ErrorCode::io);
}

TEST_CASE("creating a pool whose name exists is refused", "[shm]") {
  const auto layout = two_group_layout();
  const auto options = pool_options(1, 2);
  auto first = BlockPoolSegment::create(layout, options);
  REQUIRE(first.ok());
  auto second = BlockPoolSegment::create(layout, options);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == ErrorCode::segment_in_use);
  CHECK(segment_exists(first->name()));
}

TEST_CASE("attach rejects stale generations, other layouts, missing and malformed segments", "[shm]") {
  const auto layout = two_group_layout();
  const auto options = pool_options(0, 2, /*generation=*/4);
  auto owner = BlockPoolSegment::create(layout, options);
  REQUIRE(owner.ok());

  auto stale = BlockPoolSegment::attach(owner->name(), PoolGeneration{3}, layout.digest());
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code == ErrorCode::stale_generation);
  CHECK(stale.error().field == "pool_generation");
  CHECK(stale.error().reason.find("holds pool generation 4, expected 3") != std::string::npos);

  const auto other_layout = shipped_layout("single-group-tp2.toml");
  REQUIRE(other_layout.digest() != layout.digest());
  auto mismatch = BlockPoolSegment::attach(owner->name(), PoolGeneration{4}, other_layout.digest());
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().code == ErrorCode::incompatible);
  CHECK(mismatch.error().field == "layout_digest");

  auto missing =
      BlockPoolSegment::attach("/kvrt.shm-test.missing." + make_instance_id(), PoolGeneration{4}, layout.digest());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);

  const auto attach_error = [&](const std::string& name) {
    auto r = BlockPoolSegment::attach(name, PoolGeneration{4}, layout.digest());
    REQUIRE_FALSE(r.ok());
    return r.error();
  };
  const std::string raw = "/kvrt.shm-test.raw." + make_instance_id();
  SECTION("another magic") {
    const char junk[] = "this is not a kvrt pool segment, only some bytes";
    raw_segment(raw, junk, sizeof junk, 8192);
    const Error e = attach_error(raw);
    CHECK(e.code == ErrorCode::decode_failed);
    CHECK(e.field == "magic");
  }
  SECTION("shorter than a header") {
    raw_segment(raw, nullptr, 0, 100);
    const Error e = attach_error(raw);
    CHECK(e.code == ErrorCode::decode_failed);
    CHECK(e.field == "segment_bytes");
  }
  SECTION("owner on record, header never published") {
    PoolSegmentHeader h;
    std::memset(&h, 0, sizeof h);
    h.magic = kPoolSegmentMagic;
    h.format_version = kPoolSegmentFormat;
    raw_segment(raw, &h, sizeof h, 8192);
    const Error e = attach_error(raw);
    CHECK(e.code == ErrorCode::decode_failed);
    CHECK(e.field == "ready");
  }
  SECTION("payload truncated behind a valid header") {
    const int fd = ::shm_open(owner->name().c_str(), O_RDWR, 0);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, kHeaderBytes + 4096) == 0);
    ::close(fd);
    const Error e = attach_error(owner->name());
    CHECK(e.code == ErrorCode::decode_failed);
    CHECK(e.field == "segment_bytes");
    CHECK(e.reason.find("truncated") != std::string::npos);
  }
  (void)BlockPoolSegment::remove(raw);
}

TEST_CASE("an oversized pool fails with a typed error and leaves no segment", "[shm]") {
  const auto layout = two_group_layout();
  // 2^32 - 1 blocks of 768 KiB (g0): about 3.4 PB, far beyond /dev/shm.
  auto huge = pool_options(0, UINT32_MAX);
  auto made = BlockPoolSegment::create(layout, huge);
  REQUIRE_FALSE(made.ok());
  CHECK(made.error().code == ErrorCode::storage_exhausted);
  CHECK(made.error().field == "capacity");
  CHECK_FALSE(segment_exists(segment_name(huge)));

  // A byte budget of 2^64 - 1 buys 2^44 bundles: more than a 32-bit slot index.
  auto budget = pool_options(0, 1);
  budget.capacity = PoolCapacity::bytes(UINT64_MAX);
  auto too_many = BlockPoolSegment::create(layout, budget);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().code == ErrorCode::config_field);
  CHECK_FALSE(segment_exists(segment_name(budget)));
}

TEST_CASE("start-up replaces a segment left by a crashed owner", "[shm]") {
  const auto layout = two_group_layout();
  auto options = pool_options(1, 2, /*generation=*/1);
  const std::string name = segment_name(options);
  const pid_t crashed = crash_after_creating(layout, options);

  auto found = BlockPoolSegment::inspect(name);
  REQUIRE(found.ok());
  CHECK(found->owner_recorded);
  CHECK(found->owner.pid == crashed);
  CHECK(found->owner_state == OwnerState::exited);
  CHECK(found->published);
  CHECK(found->pool_generation == PoolGeneration{1});

  // Reusing the dead pool's generation would let its receipts read the new
  // pool's bytes: refused, and the stale segment is kept.
  auto same_generation = BlockPoolSegment::create_or_replace(layout, options);
  REQUIRE_FALSE(same_generation.ok());
  CHECK(same_generation.error().code == ErrorCode::stale_generation);
  CHECK(BlockPoolSegment::inspect(name)->owner.pid == crashed);

  options.pool_generation = PoolGeneration{2};
  auto replaced = BlockPoolSegment::create_or_replace(layout, options);
  REQUIRE(replaced.ok());
  REQUIRE(replaced->replaced.has_value());
  CHECK(replaced->replaced->owner.pid == crashed);
  CHECK(replaced->replaced->owner_state == OwnerState::exited);
  CHECK(replaced->replaced->pool_generation == PoolGeneration{1});
  CHECK(replaced->segment.owner().pid == ::getpid());

  auto old_view = BlockPoolSegment::attach(name, PoolGeneration{1}, layout.digest());
  REQUIRE_FALSE(old_view.ok());
  CHECK(old_view.error().code == ErrorCode::stale_generation);
  CHECK(BlockPoolSegment::attach(name, PoolGeneration{2}, layout.digest()).ok());

  // With nothing stale at the name, create_or_replace is a plain create.
  auto fresh = BlockPoolSegment::create_or_replace(layout, pool_options(1, 2));
  REQUIRE(fresh.ok());
  CHECK_FALSE(fresh->replaced.has_value());
}

TEST_CASE("start-up keeps a live owner's segment and judges pid reuse by start time", "[shm]") {
  const auto layout = two_group_layout();

  SECTION("owner alive in this process") {
    auto options = pool_options(0, 1);
    auto owner = BlockPoolSegment::create(layout, options);
    REQUIRE(owner.ok());
    options.pool_generation = PoolGeneration{2};
    auto r = BlockPoolSegment::create_or_replace(layout, options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::segment_in_use);
    CHECK(r.error().reason.find(std::to_string(::getpid())) != std::string::npos);
  }

  SECTION("owner alive in another process, which then shuts down cleanly") {
    auto options = pool_options(0, 1);
    const std::string name = segment_name(options);
    int ready[2], go[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(go) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      int code = 1;
      {
        auto made = BlockPoolSegment::create(layout, options);
        if (made.ok()) {
          const char one = 1;
          if (::write(ready[1], &one, 1) == 1) code = 0;
          char x;
          while (::read(go[0], &x, 1) > 0) {
          }
        }
      }  // clean shutdown: the owner's destructor removes the segment
      ::_exit(code);
    }
    ::close(ready[1]);
    ::close(go[0]);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);

    options.pool_generation = PoolGeneration{2};
    auto r = BlockPoolSegment::create_or_replace(layout, options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::segment_in_use);
    CHECK(r.error().reason.find(std::to_string(child)) != std::string::npos);
    CHECK(segment_exists(name));

    ::close(go[1]);  // let the owner shut down
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    ::close(ready[0]);
    CHECK_FALSE(segment_exists(name));
  }

  SECTION("a recorded pid now running a later process counts as gone") {
    auto options = pool_options(1, 1);
    const std::string name = segment_name(options);
    crash_after_creating(layout, options);
    auto self = current_process_identity();
    REQUIRE(self.ok());

    forge_owner(name, *self);  // the pid is ours and so is the start time: alive
    CHECK(BlockPoolSegment::inspect(name)->owner_state == OwnerState::alive);
    options.pool_generation = PoolGeneration{2};
    auto kept = BlockPoolSegment::create_or_replace(layout, options);
    REQUIRE_FALSE(kept.ok());
    CHECK(kept.error().code == ErrorCode::segment_in_use);

    forge_owner(name, ProcessIdentity{self->pid, self->start_time_ticks + 1});  // same pid, earlier process
    CHECK(BlockPoolSegment::inspect(name)->owner_state == OwnerState::pid_reused);
    auto replaced = BlockPoolSegment::create_or_replace(layout, options);
    REQUIRE(replaced.ok());
    REQUIRE(replaced->replaced.has_value());
    CHECK(replaced->replaced->owner_state == OwnerState::pid_reused);
  }
}

TEST_CASE("start-up never removes a segment it cannot judge", "[shm]") {
  const auto layout = two_group_layout();
  const auto options = pool_options(0, 1);
  const std::string name = segment_name(options);

  SECTION("no owner record yet") {
    raw_segment(name, nullptr, 0, 0);
    auto r = BlockPoolSegment::create_or_replace(layout, options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::segment_in_use);
  }
  SECTION("not a kvrt pool") {
    const char junk[64] = "someone else's shared memory";
    raw_segment(name, junk, sizeof junk, 4096);
    auto r = BlockPoolSegment::create_or_replace(layout, options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::decode_failed);
    CHECK(r.error().field == "magic");
  }
  CHECK(segment_exists(name));
  CHECK(BlockPoolSegment::remove(name).ok());
  CHECK_FALSE(segment_exists(name));
}

TEST_CASE("/proc/<pid>/stat parsing finds the start time after any command name", "[shm]") {
  // Field 2 is the executable name in parentheses and may hold spaces and ')'.
  const std::string line =
      "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654321 1000 50 "
      "18446744073709551615\n";
  auto stat = parse_proc_stat(line);
  REQUIRE(stat.ok());
  CHECK(stat->state == 'S');
  CHECK(stat->start_time_ticks == 987654321u);
  CHECK(parse_proc_stat("12 (x) S 1 2").error().code == ErrorCode::decode_failed);
  CHECK(parse_proc_stat("no parenthesis").error().code == ErrorCode::decode_failed);

  auto self = current_process_identity();
  REQUIRE(self.ok());
  CHECK(owner_state(*self) == OwnerState::alive);
  CHECK(owner_state(ProcessIdentity{0, 0}) == OwnerState::exited);
}

TEST_CASE("remove_if_stale unlinks only segments whose owner is gone, exactly the file it judged", "[shm]") {
  const auto layout = two_group_layout();
  SECTION("a crashed owner's segment is removed") {
    const auto options = pool_options(1, 3);
    const std::string name = segment_name(options);
    const pid_t crashed = crash_after_creating(layout, options);
    auto r = BlockPoolSegment::remove_if_stale(name);
    REQUIRE(r.ok());
    CHECK(r->removed);
    CHECK(r->found.owner.pid == crashed);
    CHECK(r->found.owner_state == OwnerState::exited);
    CHECK_FALSE(segment_exists(name));
  }
  SECTION("a pid now held by a later process counts as gone") {
    const auto options = pool_options(1, 4);
    const std::string name = segment_name(options);
    crash_after_creating(layout, options);
    const ProcessIdentity self = current_process_identity().value();
    forge_owner(name, ProcessIdentity{self.pid, self.start_time_ticks + 1});
    auto r = BlockPoolSegment::remove_if_stale(name);
    REQUIRE(r.ok());
    CHECK(r->found.owner_state == OwnerState::pid_reused);
    CHECK(r->removed);
    CHECK_FALSE(segment_exists(name));
  }
  SECTION("a live owner's segment is kept") {
    const auto options = pool_options(1, 5);
    auto live = BlockPoolSegment::create(layout, options);
    REQUIRE(live.ok());
    auto r = BlockPoolSegment::remove_if_stale(live->name());
    REQUIRE(r.ok());
    CHECK_FALSE(r->removed);
    CHECK(r->found.owner_state == OwnerState::alive);
    CHECK(segment_exists(live->name()));
  }
  SECTION("a segment without an owner record, or not a pool, is kept") {
    const auto options = pool_options(1, 6);
    const std::string name = segment_name(options);
    raw_segment(name, nullptr, 0, 0);
    auto unrecorded = BlockPoolSegment::remove_if_stale(name);
    REQUIRE(unrecorded.ok());
    CHECK_FALSE(unrecorded->found.owner_recorded);
    CHECK_FALSE(unrecorded->removed);
    CHECK(segment_exists(name));
    REQUIRE(BlockPoolSegment::remove(name).ok());
    const char junk[64] = "someone else's shared memory";
    raw_segment(name, junk, sizeof junk, 4096);
    auto foreign = BlockPoolSegment::remove_if_stale(name);
    REQUIRE_FALSE(foreign.ok());
    CHECK(foreign.error().code == ErrorCode::decode_failed);
    CHECK(segment_exists(name));
    CHECK(BlockPoolSegment::remove(name).ok());
  }
}

TEST_CASE("an unnamed pool segment has no name, is sealed, and attaches by descriptor only", "[shm][isolation]") {
  const auto layout = two_group_layout();
  const auto options = pool_options(/*group=*/0, /*blocks=*/4);
  const std::string name = segment_name(options);
  auto owner = BlockPoolSegment::create_unnamed(layout, options);
  REQUIRE(owner.ok());
  CHECK(owner->is_owner());
  CHECK(owner->unnamed());
  // Nothing at the name a named segment would have had.
  CHECK_FALSE(BlockPoolSegment::attach(name, PoolGeneration{1}, layout.digest()).ok());
  CHECK_FALSE(BlockPoolSegment::inspect(name).ok());
  // Its size is sealed: no holder of the descriptor can cut it under a mapping.
  CHECK(::ftruncate(owner->descriptor(), 4096) != 0);
  CHECK(::ftruncate(owner->descriptor(), static_cast<off_t>(owner->geometry().segment_bytes() * 2)) != 0);

  const KvCoordinate c{TensorKind::V, 3, 2, 1, 5};
  const PoolBlockRef ref{PoolId{7}, PoolGeneration{1}, PhysicalSlot{2}};
  {
    auto lanes = owner->lanes(ref, c, 4);
    REQUIRE(lanes.ok());
    std::memcpy(lanes->data(), "kvrt", 4);
  }
  // A receiver with a dup of the descriptor sees the owner's bytes.
  auto attached = BlockPoolSegment::attach_descriptor(UniqueFd(::dup(owner->descriptor())), "pool 7", PoolGeneration{1},
                                                      layout.digest());
  REQUIRE(attached.ok());
  CHECK_FALSE(attached->is_owner());
  CHECK(attached->pool_id() == PoolId{7});
  CHECK(attached->geometry().shape() == owner->geometry().shape());
  auto seen = std::as_const(*attached).lanes(ref, c, 4);
  REQUIRE(seen.ok());
  CHECK(std::memcmp(seen->data(), "kvrt", 4) == 0);

  // The same refusals as by name: another generation, another layout.
  auto stale = BlockPoolSegment::attach_descriptor(UniqueFd(::dup(owner->descriptor())), "pool 7", PoolGeneration{2},
                                                   layout.digest());
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code == ErrorCode::stale_generation);
  auto other = BlockPoolSegment::attach_descriptor(UniqueFd(::dup(owner->descriptor())), "pool 7", PoolGeneration{1},
                                                   shipped_layout("single-group-tp2.toml").digest());
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == ErrorCode::incompatible);
}

TEST_CASE("attach_descriptor refuses what is not an owner's sealed segment", "[shm][isolation]") {
  const auto layout = two_group_layout();
  SECTION("no descriptor") {
    auto r = BlockPoolSegment::attach_descriptor(UniqueFd(), "pool 7", PoolGeneration{1}, layout.digest());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
  }
  SECTION("a pipe") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    UniqueFd write_end(fds[1]);
    auto r = BlockPoolSegment::attach_descriptor(UniqueFd(fds[0]), "pool 7", PoolGeneration{1}, layout.digest());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::decode_failed);
  }
  SECTION("an unsealed memfd holding a copy of a real pool") {
    auto owner = BlockPoolSegment::create_unnamed(layout, pool_options(0, 4));
    REQUIRE(owner.ok());
    const int copy = ::memfd_create("not-a-pool", MFD_CLOEXEC);
    REQUIRE(copy >= 0);
    UniqueFd held(copy);
    std::vector<uint8_t> bytes(owner->geometry().segment_bytes());
    REQUIRE(::pread(owner->descriptor(), bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    REQUIRE(::pwrite(copy, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    auto r = BlockPoolSegment::attach_descriptor(UniqueFd(::dup(copy)), "pool 7", PoolGeneration{1}, layout.digest());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::pool_size_mismatch);
  }
}
