// `kvrt replay radix` (tools/replay/radix_replay.hpp, docs/replay-format.md):
// a JSON-lines trace applied to the radix tree, under both profiles. Every
// line answers a result or an error line, and after every op the tree's
// laws hold and its lock counts equal the handles held (0x08D).
#include <sstream>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "tools/replay/radix_replay.hpp"

int kvrt_fuzz_replay_radix(const uint8_t* data, size_t size) {
  const std::string text(kvrt::fuzz::as_text(data, size));
  for (const kvrt::RadixReplayOptions options : {kvrt::RadixReplayOptions{kvrt::RadixReplayProfile::kvrt, false},
                                                 kvrt::RadixReplayOptions{kvrt::RadixReplayProfile::sglang, true}}) {
    kvrt::RadixReplay replay(options);
    std::istringstream in(text);
    std::ostringstream out;
    const kvrt::replay::ReplaySummary summary =
        kvrt::replay::run_trace(in, out, [&](const std::string& op, const nlohmann::json& line) {
          kvrt::replay::OpOutcome outcome = replay.apply(op, line);
          const kvrt::Status valid = replay.validate();
          KVRT_FUZZ_REQUIRE(valid.ok(), op + ": " + valid.error().describe());
          return outcome;
        });
    KVRT_FUZZ_REQUIRE(summary.errors <= summary.ops && summary.ops <= summary.lines, "");
  }
  return 0;
}
