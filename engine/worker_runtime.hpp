#pragma once
// `kvrt worker`: one engine-like process driving a node through kvrt::Client
//. It runs a random shared-prefix workload for a bounded time: every
// request matches its prompt against the prefix index, allocates with the
// hit, writes the K/V rows of the suffix into the shared-memory pools at the
// receipt's blocks, commits them, decodes a few tokens (batched appends and
// commits for all requests in flight), publishes its full prompt blocks and
// releases. Every reused row is read back and compared with the row this
// worker would have written, so a reuse that is not exact is counted, never
// hidden. CAF-free: it only uses the client library.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "services/common/result.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt {

class ChromeTraceRecorder;

struct WorkerOptions {
  std::string worker_name = "worker";
  std::string token_hex;
  std::string namespace_name;          // empty: the session's first allowed namespace
  double duration_s = 5.0;             // stop starting requests after this [s]
  uint64_t max_requests = 0;           // 0: no limit [requests]
  uint64_t seed = 1;                   // this worker's choices
  uint64_t workload_seed = 7;          // shared by every worker: the system prompts
  uint32_t system_prompts = 4;         // shared prefixes in the workload
  uint32_t system_prompt_tokens = 96;  // [tokens]
  uint32_t max_suffix_tokens = 40;     // user turn [tokens]
  uint32_t decode_tokens = 8;          // tokens generated per request [tokens]
  uint32_t in_flight = 4;              // requests batched per iteration
  ChromeTraceRecorder* trace = nullptr;
  uint32_t call_timeout_ms = 30000;  // a call with no reply by then fails with rpc_timeout [ms]
  std::string channel_socket;        // empty: the node's; else a proxy's (ClientOptions::channel_socket)
  bool channel_only = false;         // the session opens and runs on the session channel alone (ClientOptions)
  // Called once the node accepted the hello, before any request (`kvrt
  // worker` prints the session id, which the node's log lines name).
  std::function<void(const SessionReceipt&)> on_session;
};

// Receipt latency of a worker's round trips, as its calls saw them.
struct CallLatency {
  double p50_us = 0, p99_us = 0, max_us = 0;  // [us]
};

struct WorkerSummary {
  uint64_t requests = 0;       // completed and released
  uint64_t prompt_tokens = 0;  // [tokens]
  uint64_t hit_tokens = 0;     // prompt tokens served from the prefix index [tokens]
  uint64_t rows_written = 0;   // K/V token rows this worker wrote [rows]
  uint64_t reused_rows_checked = 0;
  uint64_t reuse_mismatches = 0;  // reused rows whose bytes differ from the recomputed row
  uint64_t out_of_capacity = 0;   // allocations refused for capacity (retried later)
  uint64_t quota_exceeded = 0;    // allocations refused for the namespace's block quota
  uint64_t operation_errors = 0;  // typed errors in receipts
  // Transactions an armed fault point ended (an allocation rolled back, a
  // reuse attempt ended with fault_injected; fault-injection runs only): the
  // request went on without them, recomputing instead of reusing.
  uint64_t faults_absorbed = 0;
  // A live invalidation or purge of the namespace (0x01A, 0x0CE): ops
  // refused because the grant's generation is no longer current or the
  // namespace stopped admitting, the times the worker authorized again, and
  // reuse receipts a purge revoked. The requests go on without reuse; not
  // errors.
  uint64_t stale_generation_refusals = 0;
  uint64_t reauthorizations = 0;
  uint64_t receipts_revoked = 0;
  uint64_t hits_withdrawn = 0;  // allocations refused because a revoked receipt's blocks were gone
  uint64_t round_trips = 0;
  CallLatency call_us;                // over every round trip
  uint64_t successors_published = 0;  // reuse attempts ended by publishing this worker's prompt blocks (0x0CD step 10)
  // Virtual reservations (the node's layout declares virtual_pages, 0x06):
  // every request's rows live in a request slot of the node's mapper owner.
  std::string physical_mode = "paged_blocks";
  uint64_t mapper_steps = 0;          // step ops [ops]
  uint64_t mapper_steps_short = 0;    // answered short of page handles: nothing mapped [ops]
  uint64_t pages_mapped = 0;          // pages the node mapped for this worker [pages]
  uint64_t retained_slot_reuses = 0;  // bindings that found the previous owner's pages kept (0x06E)
  uint64_t slots_unavailable = 0;     // requests not started: no free slot or no pages for the prompt
  uint64_t slot_rows_checked = 0;     // every row of every finished request, read back from its slot
  uint64_t slot_row_mismatches = 0;   // of those, rows whose bytes are not the ones written
  double wall_s = 0;
  std::string first_error;  // the first typed error seen, for the log
  // Set when the session was lost (node_lost, session_ended): the worker
  // stopped there, with requests unfinished.
  std::optional<Error> stopped_by;
};

Result<WorkerSummary> run_worker(const NodeDescriptor& node, const WorkerOptions& options);

}  // namespace kvrt
