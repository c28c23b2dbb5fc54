// The configuration of `kvrt chaos` (tools/chaos/chaos_config.hpp,
// config/chaos.toml) and the fault schedule it draws. A config that loads
// has its documented ranges, and its schedule is in time order (ties in
// kind order), inside the campaign, with every worker fault on a slot.
//
// The schedule is drawn only for configs expecting at most
// kMaxFuzzedEvents faults: its size is rate x duration, and at the
// documented maxima (60000 per minute of each kind for 24 h) that is about
// 5 x 10^8 events, which would read as an out-of-memory here.
#include "tools/chaos/chaos_config.hpp"

#include "fuzz/fuzz_target.hpp"

namespace {

constexpr double kMaxFuzzedEvents = 1e5;

}  // namespace

int kvrt_fuzz_chaos_config(const uint8_t* data, size_t size) {
  kvrt::Result<kvrt::chaos::ChaosConfig> c =
      kvrt::chaos::parse_chaos_config(kvrt::fuzz::as_text(data, size), "/fuzz/chaos.toml");
  if (!c.ok()) {
    KVRT_FUZZ_TYPED_ERROR(c.error());
    return 0;
  }
  KVRT_FUZZ_REQUIRE(c->workers >= 1 && c->duration_s >= 1 && !c->node_config_path.empty(), "");
  double expected = 0;
  for (uint32_t rate : c->per_minute) expected += static_cast<double>(rate) * c->duration_s / 60.0;
  if (expected > kMaxFuzzedEvents) return 0;
  const std::vector<kvrt::chaos::FaultEvent> events = kvrt::chaos::make_fault_schedule(*c, c->seed);
  for (size_t i = 0; i < events.size(); ++i) {
    const kvrt::chaos::FaultEvent& e = events[i];
    KVRT_FUZZ_REQUIRE(e.at_ms < uint64_t{1000} * c->duration_s, "");
    KVRT_FUZZ_REQUIRE(
        i == 0 || events[i - 1].at_ms < e.at_ms || (events[i - 1].at_ms == e.at_ms && events[i - 1].kind <= e.kind),
        "");
    KVRT_FUZZ_REQUIRE(!kvrt::chaos::is_worker_fault(e.kind) || e.slot < c->workers, "");
  }
  KVRT_FUZZ_REQUIRE(kvrt::chaos::make_fault_schedule(*c, c->seed) == events, "the same seed draws the same schedule");
  return 0;
}
