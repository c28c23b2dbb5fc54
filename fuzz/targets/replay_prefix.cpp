// `kvrt replay prefix` (tools/replay/prefix_replay.hpp, docs/replay-format.md):
// a JSON-lines trace applied to the hash-chain index and its allocator,
// under both profiles. Every line answers a result or an error line, and
// after every op the replay's state still validates: the allocator's and
// the index's laws and the replay's own ledger.
//
// A config op for a pool above kMaxFuzzedBlocks is answered with an error
// line instead of applied: building the pool and validating it after every
// op are linear in its blocks, so one line at the format's maximum (2^22
// blocks) would take seconds and read as a hang, while a small pool runs
// the same code with shorter loops.
#include <sstream>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "tools/replay/prefix_replay.hpp"

namespace {

constexpr int64_t kMaxFuzzedBlocks = 4096;

bool too_large_for_fuzzing(const std::string& op, const nlohmann::json& line) {
  if (op != "config") return false;
  const auto blocks = line.find("num_blocks");
  return blocks != line.end() && blocks->is_number() && blocks->get<double>() > kMaxFuzzedBlocks;
}

}  // namespace

int kvrt_fuzz_replay_prefix(const uint8_t* data, size_t size) {
  const std::string text(kvrt::fuzz::as_text(data, size));
  for (const kvrt::PrefixReplayOptions options : {kvrt::PrefixReplayOptions{kvrt::PrefixReplayProfile::kvrt, true},
                                                  kvrt::PrefixReplayOptions{kvrt::PrefixReplayProfile::vllm, false}}) {
    kvrt::PrefixReplay replay(options);
    std::istringstream in(text);
    std::ostringstream out;
    const kvrt::replay::ReplaySummary summary =
        kvrt::replay::run_trace(in, out, [&](const std::string& op, const nlohmann::json& line) {
          if (too_large_for_fuzzing(op, line))
            return kvrt::replay::OpOutcome(
                kvrt::replay::ReplayError{kvrt::replay::ReplayErrorType::invalid_value, "not fuzzed"});
          kvrt::replay::OpOutcome outcome = replay.apply(op, line);
          const kvrt::Status valid = replay.validate();
          KVRT_FUZZ_REQUIRE(valid.ok(), op + ": " + valid.error().describe());
          return outcome;
        });
    KVRT_FUZZ_REQUIRE(summary.errors <= summary.ops && summary.ops <= summary.lines, "");
  }
  return 0;
}
