// [address][cli] `kvrt address` and `kvrt kernel-blocks`: the worked
// numbers of 0x03F and 0x0A as the CLI prints them, and the exit status of a
// rejected read.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "services/address/kernel_block_split.hpp"
#include "services/address/paged_kernel_geometry.hpp"
#include "services/address/ragged_table_ledger.hpp"
#include "tests/address/address_fixture.hpp"
#include "tests/support/kvrt_cli.hpp"

using namespace kvrt;
using namespace kvrt::test;

TEST_CASE("kvrt address --json prints the 0x03F receipt, a rejected read exits 2", "[address]") {
  auto ok = run_kvrt("address --json");
  REQUIRE(ok.exit_code == 0);
  auto j = nlohmann::json::parse(ok.out);
  // Compared with the library's own receipt for the same read.
  auto r = translator_for(loop4_snapshot()).translate(query("A", 16, 24, TensorKind::K, 1, 5));
  REQUIRE(r.ok());
  CHECK(j.at("slot_id").get<uint64_t>() == r->slot_id);
  CHECK(j.at("element_offset").get<uint64_t>() == r->element_offset);
  CHECK(j.at("byte_offset").get<uint64_t>() == r->byte_offset);
  CHECK(j.at("byte_address").get<uint64_t>() == r->byte_address);
  CHECK(j.at("byte_address").get<uint64_t>() == 4311843082u);
  CHECK(j.at("strides") == nlohmann::json({65536, 8192, 512, 128, 1}));
  CHECK(j.at("coordinate") == nlohmann::json({0, 6, 0, 1, 5}));
  CHECK(j.at("physical_block").get<uint32_t>() == 2001);

  auto text = run_kvrt("address");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("slot_id = 6 * 16 + 0 = 96") != std::string::npos);
  CHECK(text.out.find("byte address   = 4311843082") != std::string::npos);

  auto rejected = run_kvrt("address --request B --token 25 --json");
  CHECK(rejected.exit_code == 2);
  auto e = nlohmann::json::parse(rejected.out);
  CHECK(e.at("error").at("code") == "request_not_visible");
  CHECK(run_kvrt("address --request C --table-version 2").exit_code == 2);
  CHECK(run_kvrt("address --request C --token 16 --layer 24 --json").exit_code == 0);
}

TEST_CASE("kvrt kernel-blocks --json reports the three kernel-side ledgers", "[address]") {
  auto run = kvrt::test::run_kvrt("kernel-blocks --json");
  REQUIRE(run.exit_code == 0);
  auto j = nlohmann::json::parse(run.out);
  const std::vector<uint64_t> ids{3, 7};
  CHECK(j.at("split").at("kernel_ids").get<std::vector<uint64_t>>() == kernel_ids_by_tokens(ids, 32, 16));
  auto ledger = ragged_table_ledger(std::vector<uint64_t>{64, 63, 17, 1}, 16);
  REQUIRE(ledger.ok());
  CHECK(j.at("ragged_table").at("padding_cells").get<uint64_t>() == ledger->padding_cells);
  CHECK(j.at("ragged_table").at("dense_bytes").get<uint64_t>() == ledger->dense_bytes());
  const auto& rows = j.at("geometry").at("rows");
  REQUIRE(rows.size() == 3);
  for (const auto& row : rows) {
    auto g = paged_kernel_geometry({2049, 512, row.at("block_size").get<uint32_t>(), 32, 2});
    REQUIRE(g.ok());
    CHECK(row.at("num_seq_blocks").get<uint64_t>() == g->num_seq_blocks);
    CHECK(row.at("thread_group_size").get<uint32_t>() == g->thread_group_size);
  }
  CHECK(kvrt::test::run_kvrt("kernel-blocks --allocator-block 32 --kernel-block 24").exit_code == 2);
}
