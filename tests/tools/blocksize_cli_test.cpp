// `kvrt blocksize` end to end: the built binary (KVRT_BINARY) replays the
// 0x09B fixture by default and prints its worked numbers as JSON, applies a
// weighting only when asked, writes its report directory, runs a `kvrt run`
// workload, and refuses bad input with exit code 2.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/kvrt_cli.hpp"

namespace kvrt::test {
namespace {

nlohmann::json blocksize_json(const std::string& args) {
  const KvrtRun run = run_kvrt("blocksize --json --trials 1 " + args);
  INFO(run.out);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

}  // namespace

TEST_CASE("kvrt blocksize prints the 0x09B staircase and no score without weights", "[blocksize][cli]") {
  const nlohmann::json j = blocksize_json("");
  REQUIRE(j["allocator_block_sizes"].size() == 5);
  const uint64_t hits[] = {36, 32, 16, 0, 0};
  for (size_t i = 0; i < 5; ++i) {
    const nlohmann::json& c = j["allocator_block_sizes"][i];
    CHECK(c["hits"]["hit_tokens"] == hits[i]);
    CHECK_FALSE(c.contains("weighted_score"));
  }
  CHECK(j["allocator_block_sizes"][0]["storage"]["ideal_unique_tail_bytes"] == 192 * 1024);
  CHECK(j["allocator_block_sizes"][3]["storage"]["ideal_unique_tail_bytes"] == 31 * 64 * 1024);
  CHECK(j["allocator_block_sizes"][0]["metadata"]["pool_blocks"] == 32);
  CHECK_FALSE(j.contains("weights"));
}

TEST_CASE("kvrt blocksize scores only with the user's weights and writes its report", "[blocksize][cli]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "kvrt-blocksize-cli").string();
  std::filesystem::remove_all(dir);
  const nlohmann::json j = blocksize_json(
      "--sizes 4,16 --weight recomputed_tokens=1 --weight metadata_bytes=0.5 "
      "--report-dir " +
      dir);
  REQUIRE(j["allocator_block_sizes"].size() == 2);
  // At P_a = 4: 38 recomputed + 0.5 x the metadata bytes, which are the
  // 0x09B record families at the declared sizes: 20 map entries, 32
  // descriptors, 8 hashes, 3 valid-tail records, 32 - 11 free-queue items.
  const nlohmann::json& p4 = j["allocator_block_sizes"][0];
  const nlohmann::json& r = j["record_sizes"];
  const uint64_t metadata = 20 * r["request_map_entry"].get<uint64_t>() + 32 * r["block_descriptor"].get<uint64_t>() +
                            8 * r["cached_hash_entry"].get<uint64_t>() + 3 * r["valid_tail_record"].get<uint64_t>() +
                            21 * r["free_queue_entry"].get<uint64_t>();
  CHECK(p4["metadata"]["total_bytes"] == metadata);
  CHECK(p4["weighted_score"].get<double>() == Approx(38 + 0.5 * static_cast<double>(metadata)));
  for (const char* f : {"blocksize.json", "blocksize.txt", "blocksize-storage.svg", "blocksize-hits.svg",
                        "blocksize-cow.svg", "blocksize-kernel.svg", "blocksize-chunks.svg", "blocksize-mapping.svg"})
    CHECK(std::filesystem::file_size(std::filesystem::path(dir) / f) > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("kvrt blocksize replays a kvrt run workload", "[blocksize][cli]") {
  const nlohmann::json j = blocksize_json("--workload " + std::string(KVRT_SOURCE_DIR) +
                                          "/config/workloads/fork.toml --sizes 8,16 --kernel-sizes 8 --page-groups 32");
  REQUIRE(j["allocator_block_sizes"].size() == 2);
  for (const nlohmann::json& c : j["allocator_block_sizes"]) {
    CHECK(c["hits"]["prompt_tokens"].get<uint64_t>() > 0);
    // Forked branches write into their shared partial block (0x05C).
    CHECK(c["copy_on_write"]["copies"].get<uint64_t>() > 0);
  }
  CHECK(j["page_groups"][0]["map_calls"].get<uint64_t>() == 2 * j["page_groups"][0]["mapped_pages"].get<uint64_t>());
}

TEST_CASE("kvrt blocksize refuses bad input with exit code 2", "[blocksize][cli]") {
  for (const std::string args :
       {"blocksize --sizes 0", "blocksize --chunk-sizes 0", "blocksize --weight nonsense=1", "blocksize --weight tail",
        "blocksize --page-groups 20", "blocksize --workload /nonexistent.toml"}) {
    INFO(args);
    const KvrtRun run = run_kvrt(args);
    CHECK(run.exit_code == 2);
  }
}

}  // namespace kvrt::test
