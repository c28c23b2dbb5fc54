// `kvrt segments` (apps/kvrt/cmd_segments.cpp): lists kvrt pool segments with
// their owners. Only the listing runs here: `--remove-stale` acts on the
// whole of /dev/shm, where parallel tests keep crashed owners' segments on
// purpose; BlockPoolSegment::remove_if_stale has its own tests (shm_pool_test).
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/node/node_fixture.hpp"
#include "tests/support/shm_test_fixture.hpp"

namespace kvrt::test {

TEST_CASE("kvrt segments lists a crashed owner's segment as exited and keeps it", "[shm][cli]") {
  const auto layout = shm::test::two_group_layout();
  const auto options = shm::test::pool_options(0, 2);
  const std::string name = shm::test::segment_name(options);
  ScratchDir dir("segments-cli");
  // A node that another test starts meanwhile sweeps every dead owner's
  // segment, this one included (node_predecessor): then the crashed owner is
  // made again and listed again. The listing itself never removes anything.
  bool listed = false;
  for (int attempt = 0; attempt < 5 && !listed; ++attempt) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(shm::BlockPoolSegment::create(layout, options).ok() ? 0 : 1);  // no destructor runs
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WEXITSTATUS(status) == 0);

    KvrtProcess list({"segments", "--json"}, dir.file("out-" + std::to_string(attempt) + ".log"));
    REQUIRE(list.wait() == 0);
    const std::string out = list.output();
    INFO(out);
    const nlohmann::json j = nlohmann::json::parse(out);
    CHECK(j["removed"] == 0);
    for (const auto& s : j["segments"]) {
      if ("/" + s["name"].get<std::string>() != name) continue;
      listed = true;
      CHECK(s["owner_pid"] == std::to_string(child));
      CHECK(s["owner_state"] == "exited");
      CHECK(s["removed"] == false);
    }
    if (listed) CHECK(shm::test::segment_exists(name));
  }
  CHECK(listed);
  if (shm::test::segment_exists(name)) CHECK(shm::BlockPoolSegment::remove(name).ok());
}

}  // namespace kvrt::test
