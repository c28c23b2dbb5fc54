#pragma once
// What the two replay targets (targets/replay_prefix.cpp, replay_radix.cpp)
// share: a JSON-lines trace applied under each of the replay's profiles, with
// the replay's validate() after every op, and every line answered by a
// result or an error line. Only the replay type, its profiles and which lines
// a target declines to apply differ.
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz/fuzz_target.hpp"
#include "services/common/result.hpp"
#include "tools/replay/replay_common.hpp"

namespace kvrt::fuzz {

// Applies every line of the trace that `declined(op, line)` does not turn
// away; a declined line is answered with an invalid_value error line, as a
// refused op would be.
template <typename Replay, typename Options, typename Declined>
void fuzz_replay_trace(std::string_view text, std::initializer_list<Options> profiles, Declined declined) {
  for (const Options& options : profiles) {
    Replay replay(options);
    std::istringstream in{std::string(text)};
    std::ostringstream out;
    const replay::ReplaySummary summary =
        replay::run_trace(in, out, [&](const std::string& op, const nlohmann::json& line) {
          if (declined(op, line))
            return replay::OpOutcome(replay::ReplayError{replay::ReplayErrorType::invalid_value, "not fuzzed"});
          replay::OpOutcome outcome = replay.apply(op, line);
          const Status valid = replay.validate();
          KVRT_FUZZ_REQUIRE(valid.ok(), op + ": " + valid.error().describe());
          return outcome;
        });
    KVRT_FUZZ_REQUIRE(summary.errors <= summary.ops && summary.ops <= summary.lines, "");
  }
}

}  // namespace kvrt::fuzz
