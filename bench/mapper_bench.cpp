// `kvrt bench mapper`, part 1: what one page-group map + unmap costs on the
// CPU realisation (target: <= 5 us per 64 KiB group). The backing is
// MemfdBacking exactly as the mapper uses it: one sealed memfd pool, map =
// mmap(MAP_FIXED|MAP_SHARED, fd, handle*G), unmap = PROT_NONE MAP_FIXED over
// the page. Each trial maps `groups` reservation pages to handles in a seeded
// permutation (a live pool is scattered, so neighbouring pages never merge
// into one VMA), then unmaps them all; the figure is trial time / groups.
// Pages are not touched (first-touch faults are a kernel's cost, not the
// mapper's); map_touch_unmap_64k shows that cost separately.
#include "bench/mapper_bench.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "services/mapper/memfd_backing.hpp"

namespace kvrt::bench {
namespace {

struct Figure {
  double us_per_group = 0;
  std::string error;  // empty when measured
};

Figure map_unmap(uint64_t g, MemfdPages pages, uint32_t groups, int trials, bool touch) {
  MemfdBacking backing(pages);
  if (Status s = backing.create(groups * g, groups * g, g); !s.ok()) return {0, s.error().describe()};
  std::vector<uint64_t> handle_of(groups);
  std::iota(handle_of.begin(), handle_of.end(), 0);
  std::shuffle(handle_of.begin(), handle_of.end(), std::mt19937_64(20261130));
  const uint64_t os_page = MemfdBacking::os_page_bytes();
  std::string error;
  auto trial = [&]() -> double {
    const uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < groups && error.empty(); ++i) {
      if (Status s = backing.map(i * g, handle_of[i] * g, g); !s.ok()) error = s.error().describe();
      if (touch && error.empty())
        for (uint64_t b = 0; b < g; b += os_page) backing.reservation_base()[i * g + b] = std::byte{1};
    }
    for (uint32_t i = 0; i < groups && error.empty(); ++i)
      if (Status s = backing.unmap(i * g, g); !s.ok()) error = s.error().describe();
    return double(now_ns() - t0) / groups / 1000.0;
  };
  (void)trial();  // warm-up: page tables, and the pool pages a touching run allocates
  const double us = median_of(trials, trial);
  if (!error.empty()) return {0, error};
  return {us, ""};
}

// The floor under map_unmap: the plainest way to create and destroy a shared
// mapping of the same memfd range at all, at an address the kernel picks
// (mmap(NULL, MAP_SHARED) + munmap), with no reservation to split or merge
// and no promise to keep the range. Same pool, same seeded permutation, same
// trial shape as map_unmap.
Figure plain_map_munmap(uint64_t g, uint32_t groups, int trials) {
  MemfdBacking backing(MemfdPages::os_pages);
  if (Status s = backing.create(groups * g, groups * g, g); !s.ok()) return {0, s.error().describe()};
  std::vector<uint64_t> handle_of(groups);
  std::iota(handle_of.begin(), handle_of.end(), 0);
  std::shuffle(handle_of.begin(), handle_of.end(), std::mt19937_64(20261130));
  std::vector<void*> at(groups, MAP_FAILED);
  std::string error;
  auto trial = [&]() -> double {
    const uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < groups && error.empty(); ++i) {
      at[i] =
          mmap(nullptr, g, PROT_READ | PROT_WRITE, MAP_SHARED, backing.pool_fd(), static_cast<off_t>(handle_of[i] * g));
      if (at[i] == MAP_FAILED) error = std::string("mmap(floor): ") + std::strerror(errno);
    }
    for (uint32_t i = 0; i < groups; ++i)
      if (at[i] != MAP_FAILED) {
        munmap(at[i], g);
        at[i] = MAP_FAILED;
      }
    return double(now_ns() - t0) / groups / 1000.0;
  };
  (void)trial();
  const double us = median_of(trials, trial);
  if (!error.empty()) return {0, error};
  return {us, ""};
}

double null_syscall_ns(int trials) {
  return median_of(trials, [] {
    const uint64_t t0 = now_ns();
    for (int i = 0; i < 1000; ++i) do_not_optimize(syscall(SYS_getppid));
    return double(now_ns() - t0) / 1000.0;
  });
}

BenchRow us_row(std::string name, const Figure& f, std::string note) {
  BenchRow row;
  row.name = std::move(name);
  row.value = f.us_per_group;
  row.unit = "us/group";
  row.note = f.error.empty() ? std::move(note) : "NOT MEASURED: " + f.error;
  return row;
}

}  // namespace

BenchReport run_mapper_bench(bool quick) {
  const uint32_t groups = quick ? 64 : 1024;      // page groups per trial (4 KiB, 64 KiB)
  const uint32_t huge_groups = quick ? 16 : 128;  // 2 MiB groups per trial
  const int trials = quick ? 3 : 11;
  BenchReport rep;
  rep.bench = "mapper";
  rep.quick = quick;

  rep.rows.push_back(us_row("map_unmap_4k", map_unmap(4 * 1024, MemfdPages::os_pages, groups, trials, false),
                            "one mmap(MAP_FIXED|MAP_SHARED) + one PROT_NONE mmap per 4 KiB group"));
  BenchRow r64 = us_row("map_unmap_64k", map_unmap(64 * 1024, MemfdPages::os_pages, groups, trials, false),
                        "one mmap(MAP_FIXED|MAP_SHARED) + one PROT_NONE mmap per 64 KiB group");
  r64.target = Target{5.0, Better::lower};
  rep.rows.push_back(r64);
  rep.rows.push_back(us_row("map_unmap_64k_floor", plain_map_munmap(64 * 1024, groups, trials),
                            "mmap(NULL, MAP_SHARED) + munmap of the same 64 KiB memfd ranges: the cheapest "
                            "create/destroy of a shared mapping on this kernel, no reservation kept"));

  // 2 MiB: huge pages when MFD_HUGETLB can back a mapping here, else 512
  // ordinary 4 KiB pages in one mapping, and the row says so.
  const uint64_t two_mib = 2ull << 20;
  Figure huge = map_unmap(two_mib, MemfdPages::huge_2m, huge_groups, trials, false);
  if (huge.error.empty()) {
    rep.rows.push_back(us_row("map_unmap_2m", huge, "MFD_HUGETLB memfd, 2 MiB huge pages"));
  } else {
    rep.rows.push_back(us_row("map_unmap_2m", map_unmap(two_mib, MemfdPages::os_pages, huge_groups, trials, false),
                              "NO huge pages (" + huge.error + "): 2 MiB of ordinary 4 KiB pages in one mapping"));
  }

  rep.rows.push_back(us_row("map_touch_unmap_64k", map_unmap(64 * 1024, MemfdPages::os_pages, groups / 4, trials, true),
                            "as map_unmap_64k (a quarter of the groups) plus a first write to each 4 KiB page "
                            "(minor faults of pool pages already allocated); informational"));

  append_mapper_decode_rows(rep, quick);
  char floor[96];
  std::snprintf(floor, sizeof floor, "null system call (getppid) in this run: %.0f ns", null_syscall_ns(trials));
  rep.notes.push_back(floor);
  rep.notes.push_back("map_unmap rows: medians over " + std::to_string(trials) + " trials of " +
                      std::to_string(groups) + " groups (" + std::to_string(huge_groups) +
                      " for 2 MiB) mapped to a seeded permutation of pool handles, then unmapped");
  return rep;
}

}  // namespace kvrt::bench
