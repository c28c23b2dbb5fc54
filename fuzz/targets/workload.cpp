// A workload of `kvrt run` (tools/workload/workload.hpp, config/workloads/):
// parsed and expanded into its jobs. A workload that loads keeps what the
// loader promises: token ids inside the vocabulary, every job in a declared
// tenant, jobs numbered densely, and a share of the jobs for every worker.
#include "tools/workload/workload.hpp"

#include <set>

#include "fuzz/fuzz_target.hpp"

int kvrt_fuzz_workload(const uint8_t* data, size_t size) {
  kvrt::Result<kvrt::workload::Workload> w =
      kvrt::workload::parse_workload(kvrt::fuzz::as_text(data, size), "/fuzz/workload.toml");
  if (!w.ok()) {
    KVRT_FUZZ_TYPED_ERROR(w.error());
    return 0;
  }
  KVRT_FUZZ_REQUIRE(!w->jobs.empty(), "");
  std::set<std::string> tenants;
  for (const kvrt::workload::TenantSpec& t : w->tenants) tenants.insert(t.namespace_name);
  const auto in_vocab = [&](kvrt::TokenId t) { return t >= 0 && static_cast<uint32_t>(t) < w->vocab; };
  for (size_t i = 0; i < w->jobs.size(); ++i) {
    const kvrt::workload::Job& job = w->jobs[i];
    KVRT_FUZZ_REQUIRE(job.id == i, "");
    KVRT_FUZZ_REQUIRE(tenants.contains(job.namespace_name), job.namespace_name);
    for (kvrt::TokenId t : job.prefix) KVRT_FUZZ_REQUIRE(in_vocab(t), std::to_string(t));
    for (const kvrt::workload::Turn& turn : job.turns)
      for (kvrt::TokenId t : turn.user_tokens) KVRT_FUZZ_REQUIRE(in_vocab(t), std::to_string(t));
  }
  size_t shared_out = 0;
  for (uint32_t worker = 0; worker < 3; ++worker) shared_out += kvrt::workload::jobs_for_worker(*w, worker, 3).size();
  KVRT_FUZZ_REQUIRE(shared_out == w->jobs.size(), "every job goes to exactly one worker");
  (void)w->request_count();
  (void)w->requested_tokens();
  (void)w->max_context_tokens();
  return 0;
}
