// kvrt_shm_store_peer: the second process of the allocator-over-shared-memory
// tests (tests/shm/shm_allocator_two_process_test.cpp).
// Like a worker, it knows the pools only by name: it attaches every cache
// group's segment with the pool generation and layout digest it expects,
// builds a ShmPayloadStore over the attachments, and reads or writes token
// rows in the canonical row order (payload_store.hpp) at the positions an
// allocator receipt named. It prints the SHA-256 of the rows it read or wrote,
// concatenated in span order, on stdout.
//
//   kvrt_shm_store_peer read  <layout digest hex> <spans> <segment> <pool id> <pool generation> [...]
//   kvrt_shm_store_peer write <layout digest hex> <spans> <lineage> <segment> <pool id> <pool generation> [...]
//
// One (segment, pool id, pool generation) triple per group index, in order.
// <spans> is "group:slot:first_row:rows:first_token,..." (shm_store_peer_protocol.hpp);
// write mode fills each row with RowWriter::fill(lineage, token, group)
// (tests/allocator_fixture.hpp). Exit status: 0 done, 2 usage, 3 a typed error
// (printed on stderr).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shm/shm_payload_store.hpp"
#include "tests/shm/shm_store_peer_protocol.hpp"
#include "tests/support/allocator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::shm;

namespace {

int fail(const Error& e) {
  std::fprintf(stderr, "kvrt_shm_store_peer: %s\n", e.describe().c_str());
  return 3;
}

int usage() {
  std::fprintf(stderr,
               "usage: kvrt_shm_store_peer read <layout digest hex> <spans> (<segment> <pool id> <generation>)...\n"
               "       kvrt_shm_store_peer write <layout digest hex> <spans> <lineage> (<segment> <pool id> "
               "<generation>)...\n");
  return 2;
}

bool parse_u32(const char* text, uint32_t& out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v > UINT32_MAX) return false;
  out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  const bool writing = mode == "write";
  if (!writing && mode != "read") return usage();
  const int first_pool_arg = writing ? 5 : 4;
  if (argc < first_pool_arg + 3 || (argc - first_pool_arg) % 3 != 0) return usage();
  Sha256Digest layout;
  if (!Sha256Digest::from_hex(argv[2], layout)) return usage();
  const auto spans = store_peer::parse_spans(argv[3]);
  if (!spans) return usage();
  uint64_t lineage = 0;
  if (writing) {
    char* end = nullptr;
    lineage = std::strtoull(argv[4], &end, 10);
    if (end == argv[4] || *end != '\0') return usage();
  }

  std::vector<BlockPoolSegment> segments;
  for (int a = first_pool_arg; a < argc; a += 3) {
    uint32_t pool_id = 0, generation = 0;
    if (!parse_u32(argv[a + 1], pool_id) || !parse_u32(argv[a + 2], generation)) return usage();
    auto segment = BlockPoolSegment::attach(argv[a], PoolGeneration{generation}, layout);
    if (!segment.ok()) return fail(segment.error());
    // The pool id is part of every block's name: a pool that is not the one
    // the receipt meant is refused, not assumed.
    if (segment->pool_id() != PoolId{pool_id})
      return fail(make_error(ErrorCode::unknown_physical,
                             "segment " + segment->name() + " holds pool " + std::to_string(segment->pool_id().value) +
                                 ", expected " + std::to_string(pool_id),
                             "pool_id"));
    segments.push_back(std::move(segment).value());
  }
  auto store = ShmPayloadStore::create(std::move(segments));
  if (!store.ok()) return fail(store.error());

  std::string touched;  // every row read or written, in span order
  for (const store_peer::RowSpan& s : *spans) {
    // Positions come from outside this process: check them before the store,
    // whose operations assert.
    const Status in_range = store->check_rows(s.group, s.slot, s.first_row, s.rows);
    if (!in_range.ok()) return fail(in_range.error());
    const uint64_t row_bytes = store->row_bytes(s.group);
    std::vector<uint8_t> bytes(s.rows * row_bytes);
    if (writing) {
      for (uint32_t i = 0; i < s.rows; ++i)
        test::RowWriter::fill(std::span<uint8_t>(bytes).subspan(i * row_bytes, row_bytes), lineage, s.first_token + i,
                              s.group);
      store->write_rows(s.group, s.slot, s.first_row, s.rows, bytes);
    } else {
      store->read_rows(s.group, s.slot, s.first_row, s.rows, bytes);
    }
    touched.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::printf("%s\n", sha256(touched).hex().c_str());
  return 0;  // attached segments unmap; the names stay with their owner
}
