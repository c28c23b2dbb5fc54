// Workload: loading (parse, then generate) and the figures a run reports
// against (requests, requested tokens, T_max of the reservation baseline, 0x02).
#include "tools/workload/workload.hpp"

#include <algorithm>

#include "services/common/toml_reader.hpp"
#include "tools/workload/workload_spec.hpp"

namespace kvrt::workload {
namespace {

// Calls fn(context_tokens, copies) once per distinct request shape of `job`:
// context_tokens is that request's prompt plus decode [tokens], copies how
// many requests have it (a fork's branches all reach the same length).
template <class Fn>
void for_each_request(const Job& job, Fn&& fn) {
  if (job.kind == JobKind::chat) {
    // Turn k's prompt holds the prefix, every earlier user turn and answer,
    // and user turn k.
    uint64_t history = job.prefix.size();
    for (const Turn& t : job.turns) {
      history += t.user_tokens.size() + t.decode_tokens;
      fn(history, uint64_t{1});
    }
    return;
  }
  const uint64_t copies = job.kind == JobKind::fork ? job.branches : 1;
  for (const Turn& t : job.turns) fn(job.prefix.size() + t.user_tokens.size() + t.decode_tokens, copies);
}

// Nothing is generated unless the whole file checks out.
Result<Workload> expand(const Result<TomlReader>& reader) {
  if (!reader.ok()) return reader.error();
  WorkloadSpec spec;
  KVRT_TRY_ASSIGN(spec, parse_workload_spec(*reader));
  return generate_workload(spec);
}

}  // namespace

std::string_view to_string(JobKind k) {
  switch (k) {
    case JobKind::chat:
      return "chat";
    case JobKind::few_shot:
      return "few_shot";
    case JobKind::fork:
      return "fork";
    case JobKind::long_document:
      return "long_document";
    case JobKind::templated:
      return "templated";
  }
  return "unknown_job_kind";
}

uint64_t Workload::request_count() const {
  uint64_t n = 0;
  for (const Job& j : jobs) for_each_request(j, [&](uint64_t, uint64_t copies) { n += copies; });
  return n;
}

uint64_t Workload::requested_tokens() const {
  uint64_t n = 0;
  for (const Job& j : jobs) for_each_request(j, [&](uint64_t context, uint64_t copies) { n += context * copies; });
  return n;
}

uint32_t Workload::max_context_tokens() const {
  uint64_t longest = 0;
  for (const Job& j : jobs)
    for_each_request(j, [&](uint64_t context, uint64_t) { longest = std::max(longest, context); });
  // A loaded workload stays within kMaxContextTokens (the parser checks it);
  // a hand-built one saturates rather than wrapping.
  return static_cast<uint32_t>(std::min<uint64_t>(longest, UINT32_MAX));
}

Result<Workload> parse_workload(std::string_view text, const std::string& origin) {
  return expand(TomlReader::parse(text, origin));
}

Result<Workload> load_workload(const std::string& path) { return expand(TomlReader::open(path)); }

// Every job is one unit: a fork's branches and a long document's questions
// never split across workers. Outside the documented precondition (w < n) the
// rule "i mod n == w" holds no job, so the result is empty rather than a crash.
std::vector<const Job*> jobs_for_worker(const Workload& workload, uint32_t worker, uint32_t workers) {
  std::vector<const Job*> out;
  if (workers == 0 || worker >= workers) return out;
  for (size_t i = worker; i < workload.jobs.size(); i += workers) out.push_back(&workload.jobs[i]);
  return out;
}

uint32_t tenant_of_worker(const Workload& workload, uint32_t worker) {
  return workload.tenants.empty() ? 0 : worker % static_cast<uint32_t>(workload.tenants.size());
}

std::vector<const Job*> jobs_for_tenant_worker(const Workload& workload, uint32_t worker, uint32_t workers) {
  std::vector<const Job*> out;
  const auto tenants = static_cast<uint32_t>(workload.tenants.size());
  if (workers == 0 || worker >= workers || tenants == 0) return out;
  const uint32_t tenant = worker % tenants;
  const uint32_t rank = worker / tenants;                             // among the tenant's workers
  const uint32_t peers = (workers - tenant + tenants - 1) / tenants;  // workers w < n with w mod T == tenant
  const std::string& ns = workload.tenants[tenant].namespace_name;
  uint64_t k = 0;  // the tenant's jobs seen so far
  for (const Job& job : workload.jobs) {
    if (job.namespace_name != ns) continue;
    if (k++ % peers == rank) out.push_back(&job);
  }
  return out;
}

}  // namespace kvrt::workload
