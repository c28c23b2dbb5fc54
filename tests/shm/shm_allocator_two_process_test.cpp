// Two processes share the allocator's pools (one allocates
// and writes rows through the pool, the other attaches by name and reads
// exactly those bytes; and the reverse). This process owns the segments and
// the BlockAllocator. The peer, kvrt_shm_store_peer, is a separate executable
// started with posix_spawn: it knows every group's segment name, pool id, pool
// generation and the layout digest from its command line, and the (group,
// slot, rows) positions that this process took from the allocator's receipts,
// never from its own state. It answers with a SHA-256 on a pipe.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/shm/shm_allocator_fixture.hpp"
#include "tests/shm/shm_store_peer_protocol.hpp"
#include "tests/support/peer_process.hpp"

extern char** environ;

using namespace kvrt;
using namespace kvrt::shm;
using namespace kvrt::shm::test;

namespace {

constexpr uint32_t kP = 16;  // P_a of two-group-tp2 [tokens / block]

using kvrt::test::PeerResult;

PeerResult run_peer(const std::vector<std::string>& args) {
  return kvrt::test::run_peer_program(KVRT_SHM_STORE_PEER, args);
}

// The peer's command line: mode, layout digest, spans, [lineage], then one
// (segment, pool id, pool generation) triple per group index.
std::vector<std::string> peer_args(const char* mode, const SharedBlockPools& pools,
                                   const std::vector<store_peer::RowSpan>& spans, PoolGeneration generation,
                                   std::optional<uint64_t> lineage = std::nullopt) {
  const ShmPayloadStore& store = pools.store();
  std::vector<std::string> args{mode, store.segment(0).layout_digest().hex(), store_peer::format_spans(spans)};
  if (lineage) args.push_back(std::to_string(*lineage));
  for (uint32_t g = 0; g < store.group_count(); ++g) {
    args.push_back(store.segment(g).name());
    args.push_back(std::to_string(store.segment(g).pool_id().value));
    args.push_back(std::to_string(generation.value));
  }
  return args;
}

// A request's block tables as its receipts published them: [group][logical
// block] -> the latest TableEntryUpdate (handle and valid rows), the view a
// worker keeps without asking the allocator.
class ReceiptTables {
 public:
  explicit ReceiptTables(const BlockAllocatorConfig& config) : config_(config) {}
  void apply(const AllocationReceipt& r) {
    REQUIRE(r.outcome == AllocationOutcome::committed);
    auto& tables = by_request_[r.request_id.value];
    tables.resize(config_.groups.size());
    for (const TableEntryUpdate& e : r.published_entries) {
      auto& table = tables[group_index(e.handle)];
      if (table.size() <= e.logical_block) table.resize(e.logical_block + 1);
      table[e.logical_block] = e;
    }
  }
  const std::vector<TableEntryUpdate>& table(RequestId request, uint32_t g) {
    return by_request_.at(request.value).at(g);
  }
  uint32_t group_index(const PhysicalBlockHandle& h) const {
    for (uint32_t g = 0; g < config_.groups.size(); ++g)
      if (config_.groups[g].group == h.group) return g;
    FAIL("handle of no configured group");
    return 0;
  }

 private:
  const BlockAllocatorConfig& config_;
  std::map<uint64_t, std::vector<std::vector<TableEntryUpdate>>> by_request_;
};

// Rows [0, tokens) of a request at the positions its receipts name: one span
// per (group, logical block), with the slot that pools.locate() gives for the
// receipt's handle. The receipt tables must equal the allocator's own.
std::vector<store_peer::RowSpan> spans_of(ReceiptTables& receipts, const SharedBlockPools& pools, RequestId request,
                                          uint32_t tokens) {
  std::vector<store_peer::RowSpan> spans;
  for (uint32_t g = 0; g < pools.store().group_count(); ++g) {
    const auto& table = receipts.table(request, g);
    const auto current = pools.allocator().table(request, g).value();
    REQUIRE(table.size() == current.size());
    for (uint32_t j = 0; j < table.size(); ++j) {
      CHECK(table[j].handle == current[j]);
      auto located = pools.locate(table[j].handle);
      REQUIRE(located.ok());
      REQUIRE(located->group_index == g);
      spans.push_back(store_peer::RowSpan{g, located->ref.block.value, 0, std::min(kP, tokens - j * kP), j * kP});
    }
  }
  return spans;
}

// The canonical rows a span list should hold, concatenated in span order.
std::string expected_rows(const std::vector<store_peer::RowSpan>& spans, const std::vector<uint64_t>& row_bytes,
                          const std::function<uint64_t(uint32_t token)>& lineage) {
  std::string out;
  for (const auto& s : spans)
    for (uint32_t i = 0; i < s.rows; ++i) {
      const auto row = seeded_row(row_bytes[s.group], lineage(s.first_token + i), s.first_token + i, s.group);
      out.append(reinterpret_cast<const char*>(row.data()), row.size());
    }
  return out;
}

}  // namespace

TEST_CASE("a peer process reads, by pool name, exactly the rows the allocator wrote", "[shm][allocator]") {
  const auto layout = two_group_layout();
  const auto B = layout_row_bytes(layout);
  auto pools = SharedBlockPools::create(layout, shared_options(/*blocks=*/6, /*pool_generation=*/3));
  REQUIRE(pools.ok());
  BlockAllocator& al = pools->allocator();
  ReceiptTables receipts(pools->config());
  kvrt::test::RowWriter rows(B);

  // A: 20 prompt rows written at the allocate receipt's slots and committed,
  // tokens 20..36 appended with rows (t = 32 opens a new bundle); D forks and
  // appends token 37 of its own (copy-on-write of 5 rows).
  Result<AllocationReceipt> r = al.allocate(AllocateArgs{20, {}, {}});
  REQUIRE(r.ok());
  receipts.apply(*r);
  for (const TableEntryUpdate& e : r->published_entries) {
    const auto where = pools->locate(e.handle).value();
    for (uint32_t i = 0; i < std::min(kP, 20 - e.logical_block * kP); ++i)
      pools->store().write_rows(where.group_index, where.ref.block.value, i, 1,
                                seeded_row(B[where.group_index], 1, e.logical_block * kP + i, where.group_index));
  }
  RequestFence a = al.fence(r->request_id).value();
  r = al.commit_rows(CommitRowsArgs{a, 20});
  REQUIRE(r.ok());
  receipts.apply(*r);
  for (uint32_t token = 20; token < 37; ++token) {
    a = al.fence(a.request).value();
    r = al.append(AppendArgs{a, rows.rows_for(1, token), {}});
    REQUIRE(r.ok());
    receipts.apply(*r);
  }
  r = al.fork(ForkArgs{al.fence(a.request).value()});
  REQUIRE(r.ok());
  receipts.apply(*r);
  const RequestId d = r->request_id;
  r = al.append(AppendArgs{al.fence(d).value(), rows.rows_for(2, 37), {}});
  REQUIRE(r.ok());
  REQUIRE(r->append_path == AppendPath::copy_on_write);
  receipts.apply(*r);
  REQUIRE(al.validate().ok());

  auto spans = spans_of(receipts, *pools, a.request, 37);
  const auto d_spans = spans_of(receipts, *pools, d, 38);
  spans.insert(spans.end(), d_spans.begin(), d_spans.end());
  // D's token 37 is lineage 2; every other row is A's (lineage 1).
  const std::vector<store_peer::RowSpan> a_spans(spans.begin(), spans.begin() + (spans.size() - d_spans.size()));
  const std::string want_a = expected_rows(a_spans, B, [](uint32_t) -> uint64_t { return 1; });
  const std::string want_d = expected_rows(d_spans, B, [](uint32_t t) -> uint64_t { return t == 37 ? 2 : 1; });

  const PeerResult read = run_peer(peer_args("read", *pools, spans, PoolGeneration{3}));
  INFO(read.errors);
  REQUIRE(read.exit_code == 0);
  CHECK(read.output == sha256(want_a + want_d).hex());

  // A peer holding an old pool generation, or another layout, is refused.
  const PeerResult stale = run_peer(peer_args("read", *pools, spans, PoolGeneration{2}));
  CHECK(stale.exit_code == 3);
  CHECK(stale.output.empty());
  CHECK(stale.errors.find("stale_generation") != std::string::npos);
  auto other_layout = peer_args("read", *pools, spans, PoolGeneration{3});
  other_layout[1] = sha256(std::string_view("another layout")).hex();
  const PeerResult incompatible = run_peer(other_layout);
  CHECK(incompatible.exit_code == 3);
  CHECK(incompatible.errors.find("incompatible") != std::string::npos);
  // A position outside the pool is a typed error in the peer, not a crash.
  const PeerResult outside = run_peer(peer_args("read", *pools, {{0, 6, 0, 1, 0}}, PoolGeneration{3}));
  CHECK(outside.exit_code == 3);
  CHECK(outside.errors.find("coordinate_out_of_range") != std::string::npos);
}

TEST_CASE("the allocator commits rows a peer process wrote at receipt positions", "[shm][allocator]") {
  const auto layout = two_group_layout();
  const auto B = layout_row_bytes(layout);
  auto pools = SharedBlockPools::create(layout, shared_options(/*blocks=*/4, /*pool_generation=*/2));
  REQUIRE(pools.ok());
  BlockAllocator& al = pools->allocator();
  ReceiptTables receipts(pools->config());

  // B: 30 prompt rows and tokens 30..35 appended without bytes: the receipts
  // name the slots, nothing is valid yet (t = 32 opens a new bundle).
  Result<AllocationReceipt> r = al.allocate(AllocateArgs{30, {}, {}});
  REQUIRE(r.ok());
  receipts.apply(*r);
  RequestFence b = al.fence(r->request_id).value();
  for (uint32_t token = 30; token < 36; ++token) {
    r = al.append(AppendArgs{b, {}, {}});
    REQUIRE(r.ok());
    receipts.apply(*r);
    b = al.fence(b.request).value();
  }
  const auto spans = spans_of(receipts, *pools, b.request, 36);
  REQUIRE(spans.size() == 6);  // 3 logical blocks x 2 groups
  for (const auto& s : spans)
    CHECK(al.block(receipts.table(b.request, s.group)[s.first_token / kP].handle).value().valid_rows == 0);

  const uint64_t lineage = 7;
  const PeerResult wrote = run_peer(peer_args("write", *pools, spans, PoolGeneration{2}, lineage));
  INFO(wrote.errors);
  REQUIRE(wrote.exit_code == 0);

  // Publish what the peer wrote, then read it through the allocator's store.
  r = al.commit_rows(CommitRowsArgs{b, 36});
  REQUIRE(r.ok());
  REQUIRE(r->outcome == AllocationOutcome::committed);
  receipts.apply(*r);
  REQUIRE(al.validate().ok());
  const std::string want = expected_rows(spans, B, [&](uint32_t) { return lineage; });
  CHECK(wrote.output == sha256(want).hex());
  std::string got;
  for (const auto& s : spans) {
    CHECK(receipts.table(b.request, s.group)[s.first_token / kP].valid_rows == s.rows);
    std::vector<uint8_t> bytes(s.rows * B[s.group]);
    pools->store().read_rows(s.group, s.slot, s.first_row, s.rows, bytes);
    got.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  const bool same = got == want;
  CHECK(same);
}
