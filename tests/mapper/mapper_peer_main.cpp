// Worker role of the [mapper] cross-process test: receives the node's page
// pool over the socket on fd 3, rebuilds the node's contiguous view in its own
// address space, checks the node's seeded rows at a view offset, prints their
// SHA-256 and then overwrites them with their complement so the node can see
// the worker's writes through its own view.
// usage: kvrt_mapper_peer G N_handle pool_generation offset bytes seed
// exit: 0 rows match, 1 rows differ, 2 bad usage or a typed error (stderr).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "services/common/digest.hpp"
#include "services/mapper/page_pool_channel.hpp"
#include "tests/mapper/mapper_peer_protocol.hpp"

namespace {

bool parse_u64(const char* text, uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(text, &end, 10);
  return end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t g = 0, handles = 0, generation = 0, offset = 0, bytes = 0, seed = 0;
  if (argc != 7 || !parse_u64(argv[1], g) || !parse_u64(argv[2], handles) || !parse_u64(argv[3], generation) ||
      !parse_u64(argv[4], offset) || !parse_u64(argv[5], bytes) || !parse_u64(argv[6], seed)) {
    std::fprintf(stderr, "usage: kvrt_mapper_peer G N_handle pool_generation offset bytes seed\n");
    return 2;
  }
  const kvrt::PagePoolIdentity expected{g, handles,
                                        kvrt::PoolGeneration{static_cast<kvrt::PoolGeneration::rep_type>(generation)}};
  auto pool = kvrt::receive_page_pool(kvrt::test::kMapperPeerSocketFd, expected);
  if (!pool.ok()) {
    std::fprintf(stderr, "receive: %s\n", pool.error().describe().c_str());
    return 2;
  }
  auto view = kvrt::PoolView::map(pool.value());
  if (!view.ok()) {
    std::fprintf(stderr, "map: %s\n", view.error().describe().c_str());
    return 2;
  }
  if (offset + bytes > view->bytes()) {
    std::fprintf(stderr, "rows [%llu, +%llu) outside the %llu B view\n", static_cast<unsigned long long>(offset),
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(view->bytes()));
    return 2;
  }
  auto* rows = reinterpret_cast<uint8_t*>(view->base() + offset);
  uint64_t mismatches = 0;
  for (uint64_t i = 0; i < bytes; ++i) mismatches += rows[i] != kvrt::test::seeded_row_byte(seed, i);
  std::printf("%s\n", kvrt::sha256(std::span<const uint8_t>(rows, bytes)).hex().c_str());
  for (uint64_t i = 0; i < bytes; ++i) rows[i] = static_cast<uint8_t>(~rows[i]);
  if (mismatches != 0) {
    std::fprintf(stderr, "%llu of %llu bytes differ from seed %llu\n", static_cast<unsigned long long>(mismatches),
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(seed));
    return 1;
  }
  return 0;
}
