#pragma once
// NodeConfig: what `kvrt node --config FILE` reads. The [node]
// table sets the runtime; the [[namespace]] and [[principal]] tables are the
// authorization owner's (services/authorization/authorization_config.hpp).
// Every field error names the file, line and field (TomlReader).
#include <cstdint>
#include <string>
#include <string_view>

#include "services/authorization/authorization_config.hpp"
#include "services/common/result.hpp"
#include "services/prefix/prefix_lengths.hpp"
#include "services/radix/radix_options.hpp"

namespace kvrt {

// The choices of [node], parsed once when the file is loaded (docs/conventions.md: no
// configuration string is compared after that). name_of() gives the name
// the file spells, for messages and for configs written by `kvrt run`.
enum class PoolBackend : uint8_t { shm, cuda };
enum class NodeScheduler : uint8_t { sharing, polling };
enum class PrefixIndexKind : uint8_t { hash_chain, radix };
enum class PoolSegments : uint8_t { named, unnamed };
std::string_view name_of(PoolBackend backend);
std::string_view name_of(PoolSegments segments);
std::string_view name_of(NodeScheduler scheduler);
std::string_view name_of(PrefixIndexKind index);
// The config spelling of a reuse policy: "full_block", "immutable_partial_tail".
std::string_view config_name_of(ReusePolicy policy);

// [mapper] (optional): the vAttention-style mapper owner. Its
// tensors take cache group 0's layers, K/V heads, head width and K dtype;
// the section sizes the reservation and the page pool.
// [events] (optional): KV events on vLLM's wire (events/kv_event_publisher.hpp).
// The table turns them on (enabled = false turns them off again); its
// fields are vLLM's KVEventsConfig's, with the node's addresses on loopback.
struct NodeEventsConfig {
  bool enabled = false;
  std::string endpoint = "tcp://127.0.0.1:5557";         // PUB; a port of "*" picks a free one
  std::string replay_endpoint = "tcp://127.0.0.1:5558";  // ROUTER; "" for none
  uint32_t buffer_steps = 10000;                         // batches kept for replay
  uint32_t hwm = 100000;                                 // PUB high-water mark [messages]
  uint32_t max_queue_size = 100000;                      // events waiting to be sent [events]
  std::string topic;
  bool int_block_hashes = false;  // hashes as 64-bit integers (vLLM's VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES)
  uint32_t data_parallel_rank = 0;
};

// [metrics] (optional): the Prometheus endpoint (metrics/, docs/operations.md
// "Metrics") and the live evaluation of the joint alerts of 0x0CF. The
// table turns it on (enabled = false turns it off again).
struct NodeMetricsConfig {
  bool enabled = false;
  std::string listen = "127.0.0.1:9400";     // host:port; port 0 picks a free one
  uint32_t alert_interval_ms = 1000;         // how often the node samples its counters for the alerts [ms]
  uint32_t alert_window_ms = 60000;          // the window "rising" and "falling" are judged over [ms]
  uint32_t reference_leak_grace_ms = 30000;  // a nonzero refcount delta must last this long [ms]
  uint32_t map_wait_slo_ms = 50;             // mapping-stall budget [ms]
  uint32_t stable_tolerance_percent = 20;    // "candidate matches stable": within this of the long-run rate
};

// [tier] (optional): the session tier of CachedAttention (0x0CC): inactive
// sessions' histories saved as files in `directory` (created; the kvrt
// objects in it are removed when the node starts), at most `budget_mib`,
// least recently used first out.
struct NodeTierConfig {
  bool enabled = false;  // the [tier] table is present
  std::string directory;
  uint64_t budget_mib = 1024;  // [MiB]
};

struct NodeMapperConfig {
  bool enabled = false;           // the [mapper] table is present
  uint32_t request_slots = 0;     // B [slots]
  uint32_t max_tokens = 0;        // T_max [tokens per request]
  uint64_t page_group_bytes = 0;  // G [bytes]; 0 = one OS page
  uint32_t handle_count = 0;      // N_handle [page groups]
  // 0x06D one step ahead: after each step, a background thread maps the
  // pages the next decode step of the same slots would map (receipts,
  // ledgers and digest unchanged; only where the OS work happens).
  bool map_ahead = true;
};

struct NodeConfig {
  std::string config_path;        // the file read (for messages and relative paths)
  std::string layout_path;        // layout manifest TOML; relative to the config file's directory
  uint64_t blocks_per_group = 0;  // pool capacity per cache group [blocks]
  // Where the K/V pools live: shm, POSIX shared memory that workers map
  // (segment names in the session receipt); cuda, device memory on GPU 0
  // that workers import through CUDA IPC (handles in the session receipt,
  // gpu/cuda_pool_store.hpp). With cuda the node's kernel executor runs
  // the CUDA decode kernel over them (gpu/cuda_decode_kernel.hpp).
  PoolBackend pool_backend = PoolBackend::shm;
  // How workers reach shared-memory pools. named: POSIX names in /dev/shm
  // that the session receipt names (any process of the node's uid can open
  // them). unnamed: memfd segments that have no name at all; a worker
  // session whose principal is allowed a namespace receives their
  // descriptors over the session channel (the pool_descriptors route), and
  // nothing is left in /dev/shm when the node dies. Needs the session
  // channel and shm pools.
  PoolSegments pool_segments = PoolSegments::named;
  // Pools per trust domain (the authorization configuration's [[domain]]s,
  // plus one for namespaces that name none): each domain gets pool segments
  // of its own and its own allocator, prefix index, reuse coordinator and
  // executor owners over them, and a worker session is handed only its
  // principal's domain's pools (TrustDomainPlan): shared-memory segments
  // by descriptor (needs unnamed segments), GPU pools as their CUDA IPC
  // handles in the session receipt. Not with fault_injection or a [mapper]
  // (whose page pool every worker maps). A principal's namespaces must lie
  // in one domain.
  bool domain_pools = false;
  std::string host = "127.0.0.1";         // loopback only by default: the node serves one host's workers
  uint16_t port = 0;                      // 0: any free port (the descriptor names the chosen one)
  uint32_t heartbeat_interval_ms = 250;   // middleman heartbeats: a hung worker is detected too
  uint32_t connection_timeout_ms = 2000;  // silence after which a worker counts as gone [ms]
  uint32_t scheduler_threads = 2;         // CAF worker threads [threads]
  // sharing: scheduler threads sleep when their queue is empty, and every
  // message to an idle owner wakes one (about 10 us per hop on these VMs).
  // polling: CAF's work-stealing scheduler, whose threads keep polling
  // their queues for `scheduler_poll_attempts` empty polls before they sleep,
  // so a message that arrives while traffic flows is taken at once. Costs a
  // busy core while the node is in use (docs/benchmarks.md, rpc).
  NodeScheduler scheduler = NodeScheduler::sharing;
  uint32_t scheduler_poll_attempts = 1000000;
  // The session channel (services/session/channel_frame.hpp): workers call
  // their session through a Unix socket in the token directory instead of
  // the middleman. Off: every call goes through the middleman.
  bool session_channel = true;
  uint32_t max_requests = 1 << 14;  // allocator request slots [requests]
  // Whether a session may arm the owners' named fault points (the allocator's
  // after_reserve_group_<g>): on for fault-injection runs and their tests,
  // off in serving, where an armed point would fail a real request.
  bool fault_injection = false;
  // Zero every block the allocator hands out (allocate, append into a new
  // bundle, copy-on-write) before its new owner sees it, so that no request
  // reads rows a released request, an evicted page or another tenant left
  // there. Off by default: it writes a whole bundle per block handed out.
  bool zero_on_recycle = false;
  // The prefix-reuse owner: the hash-chain index (vLLM's design, weak
  // identity tags) or the radix index (SGLang's design over pages of P_a
  // tokens, holding leases on what it caches). Same messages either way.
  PrefixIndexKind prefix_index = PrefixIndexKind::hash_chain;
  // Where a prefix hit may end (0x07D): full blocks only (vLLM's policy), or
  // also inside an immutable partial tail that a finished request published,
  // whose rows the allocator copies into the new request's own block (the
  // copy-rows intent). Both index owners serve either.
  ReusePolicy reuse_policy = ReusePolicy::full_block;
  uint32_t radix_budget_blocks = 0;                     // blocks per group the radix may hold; 0 = half the pool
  EvictionPolicy radix_eviction = EvictionPolicy::lru;  // the radix tree's eviction policy
  AuthorizationConfig authorization;
  NodeMapperConfig mapper;
  NodeTierConfig tier;
  NodeEventsConfig events;
  NodeMetricsConfig metrics;
};

Result<NodeConfig> load_node_config(const std::string& path);
Result<NodeConfig> parse_node_config(std::string_view text, const std::string& origin);

}  // namespace kvrt
