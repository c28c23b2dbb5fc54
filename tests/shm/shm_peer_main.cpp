// kvrt_shm_peer: the second process of the shared-memory pool tests
// (tests/shm/shm_pool_test.cpp). It attaches a pool by
// name only, as a worker would, and either reads the selected rows or writes
// seeded bytes into them, then prints the SHA-256 of those bytes on stdout.
//
//   kvrt_shm_peer read  <segment> <pool id> <pool generation> <layout digest hex> <rows>
//   kvrt_shm_peer write <segment> <pool id> <pool generation> <layout digest hex> <rows> <seed>
//
// <rows> is "block:begin-end,..." (tests/shm_peer_protocol.hpp). Exit status:
// 0 done, 2 usage, 3 a typed error (printed on stderr).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/shm/shm_peer_protocol.hpp"

using namespace kvrt;
using namespace kvrt::shm;

namespace {

int fail(const Error& e) {
  std::fprintf(stderr, "kvrt_shm_peer: %s\n", e.describe().c_str());
  return 3;
}

int usage() {
  std::fprintf(stderr,
               "usage: kvrt_shm_peer read|write <segment> <pool id> <pool generation> <layout digest hex> <rows> "
               "[seed]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) return usage();
  const std::string mode = argv[1];
  const bool writing = mode == "write";
  if ((!writing && mode != "read") || (writing && argc != 8) || (!writing && argc != 7)) return usage();
  const std::string name = argv[2];
  const auto pool_id = PoolId{static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10))};
  const auto generation = PoolGeneration{static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10))};
  Sha256Digest layout;
  if (!Sha256Digest::from_hex(argv[5], layout)) return usage();
  auto rows = peer::parse_selection(argv[6]);
  if (!rows) return usage();

  auto pool = BlockPoolSegment::attach(name, generation, layout);
  if (!pool.ok()) return fail(pool.error());
  const peer::PoolName named{pool_id, generation};

  Sha256Digest digest;
  if (writing) {
    auto written = peer::write_seeded(*pool, named, *rows, std::strtoull(argv[7], nullptr, 10));
    if (!written.ok()) return fail(written.error());
    digest = *written;
  } else {
    auto read = peer::read_selected(*pool, named, *rows);
    if (!read.ok()) return fail(read.error());
    digest = sha256(*read);
  }
  std::printf("%s\n", digest.hex().c_str());
  return 0;  // the attacher's destructor unmaps; the segment stays with its owner
}
