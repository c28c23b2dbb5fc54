#pragma once
// Shared helpers of the [mapper] asynchronous-mapping tests (spec 0x06D:
// mapping one step ahead changes timing only, never a receipt):
// a synchronous and an asynchronous mapper over real memfd pools, driven
// through the same operations, plus OS-level probes of what each address
// really shows.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "services/mapper/memfd_backing.hpp"
#include "services/mapper/prefetching_backing.hpp"
#include "tests/mapper/mapper_fixture.hpp"

namespace kvrt::test {

// L=2 (4 tensors), H_kv=2, d_h=64, b=2: 256 B rows; G = one OS page.
// `bundles` page bundles of 2L handles each.
inline MapperConfig async_config(uint32_t slots, uint32_t pages_per_slot, uint32_t bundles) {
  MapperConfig c;
  c.local_layers = 2;
  c.request_slots = slots;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.element_bytes = 2;
  c.page_group_bytes = MemfdBacking::os_page_bytes();
  c.max_tokens = static_cast<uint32_t>(pages_per_slot * c.page_group_bytes / 256);
  c.handle_count = 2 * c.local_layers * bundles;
  return c;
}

// Fails every second map() called off the thread that built it, i.e. half of
// the background thread's prefetches; the owner's own calls always pass.
class FlakyBackgroundBacking final : public PageBacking {
 public:
  explicit FlakyBackgroundBacking(std::unique_ptr<PageBacking> inner) : inner_(std::move(inner)) {}
  Status create(uint64_t r, uint64_t p, uint64_t g) override { return inner_->create(r, p, g); }
  Status map(uint64_t va, uint64_t pool, uint64_t bytes) override {
    if (std::this_thread::get_id() != owner_ && (background_calls_++ % 2 == 0))
      return make_error(ErrorCode::os_mapping_failed, "injected background failure", "mmap(map)");
    return inner_->map(va, pool, bytes);
  }
  Status unmap(uint64_t va, uint64_t bytes) override { return inner_->unmap(va, bytes); }
  void release() override { inner_->release(); }
  std::byte* reservation_base() const override { return inner_->reservation_base(); }

 private:
  std::unique_ptr<PageBacking> inner_;
  std::thread::id owner_ = std::this_thread::get_id();
  uint64_t background_calls_ = 0;  // touched by the background thread only
};

struct SyncMapper {
  MemfdBacking* pool = nullptr;
  std::unique_ptr<VmmMapper> mapper;
  explicit SyncMapper(const MapperConfig& c) {
    auto backing = std::make_unique<MemfdBacking>();
    pool = backing.get();
    auto m = VmmMapper::init(c, std::move(backing));
    REQUIRE(m.ok());
    mapper = std::move(m).value();
  }
};

struct AsyncMapper {
  MemfdBacking* pool = nullptr;
  PrefetchingBacking* prefetch = nullptr;
  std::unique_ptr<VmmMapper> mapper;
  AsyncMapper(const MapperConfig& c, bool flaky_background, AsyncMappingOptions thread = {}) {
    auto memfd = std::make_unique<MemfdBacking>();
    pool = memfd.get();
    std::unique_ptr<PageBacking> inner = std::move(memfd);
    if (flaky_background) inner = std::make_unique<FlakyBackgroundBacking>(std::move(inner));
    auto backing = std::make_unique<PrefetchingBacking>(std::move(inner), thread);
    prefetch = backing.get();
    auto m = VmmMapper::init(c, std::move(backing));
    REQUIRE(m.ok());
    mapper = std::move(m).value();
  }
};

// The asynchronous path records MappingPath::asynchronous (0x06D); every
// other field must be the synchronous path's.
inline MappedFrontierReceipt as_synchronous(MappedFrontierReceipt r) {
  CHECK(r.mapping_path == MappingPath::asynchronous);
  r.mapping_path = MappingPath::synchronous;
  return r;
}

// Whether the process may read the byte at `p`: write(2) to a pipe reports
// EFAULT for a PROT_NONE page instead of faulting. One pipe for the process,
// drained after each probe (the probes run on the test thread only).
inline bool readable(const std::byte* p) {
  static const auto probe_pipe = [] {
    std::array<int, 2> fds{};
    REQUIRE(pipe2(fds.data(), O_CLOEXEC) == 0);
    return fds;
  }();
  const ssize_t n = write(probe_pipe[1], p, 1);
  if (n == 1) {
    char drained = 0;
    REQUIRE(read(probe_pipe[0], &drained, 1) == 1);
    return true;
  }
  REQUIRE(errno == EFAULT);
  return false;
}

// Writes a fresh marker through the reservation at `va_offset` and reads the
// pool byte at `pool_offset`: equal iff that address shows that pool page.
inline bool shows_pool_page(std::byte* base, int pool_fd, uint64_t va_offset, uint64_t pool_offset, uint8_t marker) {
  std::memcpy(base + va_offset, &marker, 1);
  uint8_t back = 0;
  REQUIRE(pread(pool_fd, &back, 1, static_cast<off_t>(pool_offset)) == 1);
  return back == marker;
}

// OS state == core state, page by page: every page the core maps shows its
// handle; a prefetched page shows its planned handle; every other page of the
// reservation is PROT_NONE. Also checks the prefetch invariant of
// prefetching_backing.hpp (unmapped address, free handle). With
// `published_only` it checks the core's pages only: those are stable while a
// background batch may still be mapping others, so the check runs concurrently.
inline void check_os_view(const VmmMapper& m, MemfdBacking& pool, const PrefetchingBacking* prefetch, uint8_t marker,
                          bool published_only = false) {
  const MapperGeometry& g = m.geometry();
  const uint64_t page_bytes = g.config().page_group_bytes;
  std::byte* base = m.reservation_base();
  for (uint32_t t = 0; t < g.tensor_count(); ++t)
    for (uint32_t s = 0; s < g.config().request_slots; ++s)
      for (uint32_t q = 0; q < g.pages_per_slot(); ++q) {
        const uint64_t va = g.page_offset(t, s, q);
        INFO("tensor " << t << " slot " << s << " page " << q);
        const SlotRecord& slot = m.slot(s);
        if (q < slot.pages.size()) {
          CHECK(shows_pool_page(base, pool.pool_fd(), va, slot.pages[q][t].value * page_bytes, marker));
          continue;
        }
        if (published_only) continue;
        const PlannedMapping* pre = prefetch != nullptr ? prefetch->prefetched().at_va(va) : nullptr;
        if (pre != nullptr) {
          CHECK(m.handle(pre->pool_offset / page_bytes).state == HandleState::created_free);
          CHECK(shows_pool_page(base, pool.pool_fd(), va, pre->pool_offset, marker));
        } else {
          CHECK_FALSE(readable(base + va));
        }
      }
}

// The asynchronous path's step must be the synchronous path's, field by field.
inline void require_same_step(const Result<StepResult>& sync, const Result<StepResult>& async) {
  REQUIRE(sync.ok());
  REQUIRE(async.ok());
  CHECK(sync->feasibility == async->feasibility);
  CHECK(sync->bundles_needed == async->bundles_needed);
  CHECK(sync->bundles_available == async->bundles_available);
  REQUIRE(sync->receipts.size() == async->receipts.size());
  for (size_t i = 0; i < sync->receipts.size(); ++i) CHECK(as_synchronous(async->receipts[i]) == sync->receipts[i]);
}

inline void require_same_state(const VmmMapper& sync, const VmmMapper& async) {
  REQUIRE(sync.validate().ok());
  REQUIRE(async.validate().ok());
  CHECK(sync.state_digest() == async.state_digest());
  CHECK(sync.ledger() == async.ledger());
  CHECK(sync.epoch() == async.epoch());
}

}  // namespace kvrt::test
