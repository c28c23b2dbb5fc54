// Real mappings at the OS page size (the CPU realisation of 0x06B;
// docs/stack-notes.md, shared memory): rows written through one slot's contiguous virtual view land in
// the sealed memfd pool at the handle's offset, even though the slot's pages
// are backed by non-adjacent handles.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <tuple>
#include <vector>

#include "services/mapper/memfd_backing.hpp"
#include "tests/mapper/mapper_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

uint8_t pattern(uint32_t token, uint64_t byte) { return static_cast<uint8_t>(token * 31 + byte * 7 + 1); }

}  // namespace

TEST_CASE("memfd backing: contiguous slot view reads back through the pool", "[mapper]") {
  auto backing = std::make_unique<MemfdBacking>();
  MemfdBacking* memfd = backing.get();
  auto made = VmmMapper::init(os_page_config(), std::move(backing));
  REQUIRE(made.ok());
  VmmMapper& m = *made.value();
  const MapperGeometry& g = m.geometry();
  REQUIRE(m.reservation_base() != nullptr);
  // The pool is sealed: it can neither grow nor shrink under a mapping.
  CHECK((fcntl(memfd->pool_fd(), F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW));
  CHECK(ftruncate(memfd->pool_fd(), 0) != 0);

  // X's page 1 is mapped after Y's page 0, so X's two pages use handles 0 and 4.
  auto x = m.alloc_reqid(req('X'), gen1(), 16).value();
  auto y = m.alloc_reqid(req('Y'), gen1(), 16).value();
  REQUIRE(m.step({{req('X'), 16}, {req('Y'), 16}}, MappingPath::synchronous).ok());
  REQUIRE(m.step({{req('X'), 32}, {req('Y'), 16}}, MappingPath::synchronous).ok());
  REQUIRE(m.validate().ok());

  const uint32_t tokens = 32;
  const uint64_t row = g.row_bytes();
  std::vector<uint8_t> rows(tokens * row);
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint64_t i = 0; i < row; ++i) rows[t * row + i] = pattern(t, i);
  // One memcpy across the page boundary: plain strides, no block table (0x0BJ).
  std::byte* x_values = m.reservation_base() + g.page_offset(g.tensor_index(0, KvTensorKind::value), x.slot.value, 0);
  std::memcpy(x_values, rows.data(), rows.size());
  REQUIRE(m.append_rows(req('X'), x.generation, tokens).ok());

  for (uint32_t t = 0; t < tokens; ++t) {
    auto loc = m.translate(req('X'), x.generation, 0, KvTensorKind::value, t, 0, 0);
    REQUIRE(loc.ok());
    CHECK(loc->handle.value == (t < 16 ? 1u : 5u));  // V0 of bundles {0,1} and {4,5}
    std::vector<uint8_t> back(row);
    REQUIRE(pread(memfd->pool_fd(), back.data(), row, static_cast<off_t>(loc->pool_offset)) ==
            static_cast<ssize_t>(row));
    CHECK(std::memcmp(back.data(), rows.data() + t * row, row) == 0);
  }

  // Unmap Y now and let X free with retention; a new request on X's slot
  // reuses the mapping as capacity with zero valid rows (0x06E).
  REQUIRE(m.free_reqid(req('Y'), y.generation, ReleaseMode::unmap_now).ok());
  REQUIRE(m.free_reqid(req('X'), x.generation, ReleaseMode::retain).ok());
  auto z = m.alloc_reqid(req('Z'), gen1(), 32).value();
  CHECK(z.slot == x.slot);
  CHECK(z.retained_mapping_reused);
  // The binding lists every retained page of every tensor, so a process that
  // never saw X's steps can map them into its own view: X's V0 pages were
  // handles 1 and 5 (translated above).
  REQUIRE(z.retained_pages == 2);
  REQUIRE(z.retained_mappings.size() == z.retained_pages * g.tensor_count());
  std::set<std::tuple<uint32_t, KvTensorKind, uint32_t>> seen;
  for (const PageMapping& pm : z.retained_mappings) {
    CHECK(seen.emplace(pm.local_layer, pm.tensor, pm.page_index).second);
    CHECK(pm.page_index < z.retained_pages);
    if (pm.local_layer == 0 && pm.tensor == KvTensorKind::value)
      CHECK(pm.handle.value == (pm.page_index == 0 ? 1u : 5u));
  }
  CHECK(code_of(m.check_readable(req('Z'), z.generation, 1)) == ErrorCode::rows_not_valid);
  REQUIRE(m.validate().ok());
  REQUIRE(m.free_reqid(req('Z'), z.generation, ReleaseMode::retain).ok());
  REQUIRE(m.shutdown().ok());
  CHECK(m.validate().ok());
  CHECK(m.reservation_base() == nullptr);
}
