// `kvrt segments` (apps/kvrt/cmd_segments.cpp): lists kvrt pool segments with
// their owners. Only the listing runs here: `--remove-stale` acts on the
// whole of /dev/shm, where parallel tests keep crashed owners' segments on
// purpose; BlockPoolSegment::remove_if_stale has its own tests (shm_pool_test).
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/shm_test_fixture.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {

TEST_CASE("kvrt segments lists a crashed owner's segment as exited and keeps it", "[shm][cli]") {
  const auto layout = shm::test::two_group_layout();
  const auto options = shm::test::pool_options(0, 2);
  const std::string name = shm::test::segment_name(options);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(shm::BlockPoolSegment::create(layout, options).ok() ? 0 : 1);  // no destructor runs
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WEXITSTATUS(status) == 0);

  ScratchDir dir("segments-cli");
  KvrtProcess list({"segments", "--json"}, dir.file("out.log"));
  REQUIRE(list.wait() == 0);
  const std::string out = list.output();
  INFO(out);
  const nlohmann::json j = nlohmann::json::parse(out);
  CHECK(j["removed"] == 0);
  bool seen = false;
  for (const auto& s : j["segments"]) {
    if ("/" + s["name"].get<std::string>() != name) continue;
    seen = true;
    CHECK(s["owner_pid"] == std::to_string(child));
    CHECK(s["owner_state"] == "exited");
    CHECK(s["removed"] == false);
  }
  CHECK(seen);
  CHECK(shm::test::segment_exists(name));
  CHECK(shm::BlockPoolSegment::remove(name).ok());
}

}  // namespace kvrt::test
