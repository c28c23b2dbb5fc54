// `kvrt replay radix` (tools/replay/radix_replay.hpp, docs/replay-format.md):
// a JSON-lines trace applied to the radix tree, under both profiles. Every
// line answers a result or an error line, and after every op the tree's
// laws hold and its lock counts equal the handles held (0x08D).
#include <string>

#include "fuzz/replay_trace_fuzzing.hpp"
#include "tools/replay/radix_replay.hpp"

int kvrt_fuzz_replay_radix(const uint8_t* data, size_t size) {
  kvrt::fuzz::fuzz_replay_trace<kvrt::RadixReplay>(kvrt::fuzz::as_text(data, size),
                                                   {kvrt::RadixReplayOptions{kvrt::RadixReplayProfile::kvrt, false},
                                                    kvrt::RadixReplayOptions{kvrt::RadixReplayProfile::sglang, true}},
                                                   [](const std::string&, const nlohmann::json&) { return false; });
  return 0;
}
