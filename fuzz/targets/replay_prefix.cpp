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
#include <string>

#include "fuzz/replay_trace_fuzzing.hpp"
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
  kvrt::fuzz::fuzz_replay_trace<kvrt::PrefixReplay>(kvrt::fuzz::as_text(data, size),
                                                    {kvrt::PrefixReplayOptions{kvrt::PrefixReplayProfile::kvrt, true},
                                                     kvrt::PrefixReplayOptions{kvrt::PrefixReplayProfile::vllm, false}},
                                                    too_large_for_fuzzing);
  return 0;
}
