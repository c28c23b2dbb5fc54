// `kvrt trace-merge` input (services/telemetry/trace_merge.hpp): a Chrome
// trace-event file written by another process. A file that is accepted
// merges to a file that is itself accepted and merges to the same text.
#include "services/telemetry/trace_merge.hpp"

#include "fuzz/fuzz_target.hpp"

int kvrt_fuzz_trace_merge(const uint8_t* data, size_t size) {
  kvrt::TraceMerge merged;
  const kvrt::Status added = merged.add(kvrt::fuzz::as_text(data, size), "trace.json");
  if (!added.ok()) {
    KVRT_FUZZ_TYPED_ERROR(added.error());
    KVRT_FUZZ_REQUIRE(merged.events() == 0, "a refused file adds nothing");
    return 0;
  }
  const std::string text = merged.json();
  kvrt::TraceMerge again;
  const kvrt::Status readded = again.add(text, "merged.json");
  KVRT_FUZZ_REQUIRE(readded.ok(), readded.error().describe());
  KVRT_FUZZ_REQUIRE(again.events() == merged.events() && again.json() == text, "");
  return 0;
}
