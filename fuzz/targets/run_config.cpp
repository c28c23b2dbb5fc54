// The configuration of `kvrt run` (tools/run/run_config.hpp,
// config/run.toml): its [run] and [model] tables. The loader reads a file
// (twice: [run], then [model]), so the text is handed to it as an in-memory
// file. A config that loads has its documented ranges.
#include "tools/run/run_config.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "fuzz/fuzz_target.hpp"

int kvrt_fuzz_run_config(const uint8_t* data, size_t size) {
  const int fd = memfd_create("kvrt-fuzz-run.toml", MFD_CLOEXEC);
  KVRT_FUZZ_REQUIRE(fd >= 0, "memfd_create");
  size_t written = 0;
  while (written < size) {
    const ssize_t w = ::write(fd, data + written, size - written);
    KVRT_FUZZ_REQUIRE(w > 0, "write");
    written += static_cast<size_t>(w);
  }
  kvrt::Result<kvrt::RunConfig> c = kvrt::load_run_config("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  if (!c.ok()) {
    KVRT_FUZZ_TYPED_ERROR(c.error());
    return 0;
  }
  KVRT_FUZZ_REQUIRE(c->workers >= 1 && c->workers <= 64, "");
  KVRT_FUZZ_REQUIRE(c->connection_timeout_ms > c->heartbeat_interval_ms, "");
  KVRT_FUZZ_REQUIRE(c->radix_budget_blocks <= c->blocks_per_group, "");
  KVRT_FUZZ_REQUIRE(!c->workload_path.empty() && !c->layout_path.empty(), "");
  return 0;
}
