#pragma once
// `kvrt blocksize`: the block-size cost vector of spec 0x09 and 0x0BL,
// measured rather than collapsed. One workload is replayed once per
// allocator block size P_a through kvrt's own components, and each
// component of 0x09A is reported on its own:
//
//   storage      request-view tail (each request's map counted alone) and
//                the blocks and tail rows the pool really holds, beside the
//                storage-identity ideal of 0x09B (every exact prefix stored
//                once, inside the longest path that contains it);
//   metadata     the record families of 0x02E / 0x09B (request-map
//                entries, pool descriptors, hash entries, valid-tail
//                records, free-queue items) at declared record sizes;
//   hits         full-block prefix hits under the 0x07A logits cap and the
//                prompt rows recomputed (the hash-chain prefix cache of
//                `kvrt replay prefix`, over the real allocator and index);
//                beside them, the immutable partial-tail alternative (0x07D):
//                token-granular hits from kvrt's radix tree, the same at every
//                P_a, and the rows each P_a must then copy (hit mod P_a);
//   transitions  blocks taken from the free queue;
//   COW          for forked branches (0x05C, 0x09C): rows copied when each
//                branch writes into the shared partial block, the traffic
//                (read + write, 2 r B_row) and the destination capacity
//                (P_a B_row per copy), from the allocator's own receipts;
//   table cells  dense / used / padded block-table cells of the decode
//                batch per kernel block size P_k dividing P_a (0x0AB);
//   kernel time  one decode step of the running batch through the CPU paged
//                decode kernel at (P_a, P_k), beside the time a plain read
//                of the same K/V bytes takes in the same run (the floor);
//   chunks       shared-prefix execution at chunk size P_c (0x0BD): chunk
//                visits against a per-sequence schedule's, partial states
//                kept, reads saved, and one timed ChunkAttention step;
//   VMM mapping  for each page group of G token rows (vAttention mode,
//                0x06D): the real mapper over a memfd maps every request's
//                frontier as it prefills and decodes; mapping calls, pages
//                and the page-group tail rows.
//
// Nothing picks a "best" size: the vector is the answer (0x09A, 0x0BL step
// 7 hands candidates to the scheduler).
#include <cstdint>
#include <string>
#include <vector>

#include "services/address/ragged_table_ledger.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "tools/ledger/kvrt_record_sizes.hpp"
#include "tools/ledger/metadata_ledger.hpp"

namespace kvrt {

// One request of the swept workload, in arrival order.
struct SweepRequest {
  std::string salt;             // requests of different salts (tenants) never share blocks
  std::vector<TokenId> prompt;  // [tokens], > 0
  std::vector<TokenId> decode;  // generated after the prompt [tokens]
  uint32_t branches = 1;        // > 1: the prompt is forked into this many branches (COW)
};

// One decode step through the CPU kernel (services/executor/paged_decode):
// fp32 K/V of the given heads, one query row per running request, on the
// calling thread. Requests are taken in arrival order until their contexts
// reach max_rows, so a large workload is timed on its first requests.
struct KernelTimingConfig {
  uint32_t trials = 0;  // timed repetitions (the median is kept); 0: no timing
  uint32_t q_heads = 8, kv_heads = 2, head_dim = 64;
  uint64_t max_rows = uint64_t{1} << 17;  // [rows]
};

struct BlockSizeSweepConfig {
  std::vector<uint32_t> allocator_block_sizes;  // P_a [tokens], each in [1, 4096]
  std::vector<uint32_t> kernel_block_sizes;     // P_k [tokens]; only those dividing a P_a are measured
  uint64_t row_bytes = 0;                       // B_row over every cache group [bytes / token], > 0
  // The provisioned pool the descriptors and free queue count [token slots];
  // 0: what the largest P_a needs to hold every request at once.
  uint64_t pool_tokens = 0;
  MetadataRecordSizes record_sizes;  // declared, not measured (0x09B)
  KernelTimingConfig kernel_timing;
  std::vector<uint32_t> chunk_tokens;  // P_c values for shared-prefix execution [rows], each > 0
  // VMM page groups to measure [token rows per page group]; each times the
  // mapper's row of 128 bytes per K or V tensor (one layer, one K/V head of
  // 64 fp16 lanes) must be a multiple of the OS page.
  std::vector<uint32_t> page_group_tokens;
};

struct KernelTableCost {
  uint32_t kernel_block = 0;  // P_k [tokens]
  RaggedTableLedger table;    // over the decode batch's contexts
  // With kernel timing: one decode step of the timed requests.
  uint64_t timed_requests = 0;    // [requests]
  uint64_t kernel_blocks = 0;     // visited, per K/V head [blocks]
  uint64_t kv_bytes = 0;          // K and V read [bytes]
  double step_seconds = 0;        // median [s]
  double read_floor_seconds = 0;  // a plain read of kv_bytes in the same run [s]
};

// Shared-prefix execution at chunk size P_c over the decode batch (0x0BD,
// 0x0BE, 0x0BI): one chunk object per distinct prefix chunk, visited once
// for all the sequences that share it.
struct ChunkCost {
  uint32_t chunk_tokens = 0;         // P_c [rows]
  uint64_t sequences = 0;            // the decode batch [requests]
  uint64_t chunks = 0;               // chunk objects the shared schedule visits
  uint64_t ordinary_visits = 0;      // sum_r ceil(T_r / P_c): a per-sequence schedule's visits
  uint64_t materialised_chunks = 0;  // coverage above 1: partial states kept
  uint64_t partial_rows = 0;         // [rows] per query head
  uint64_t partial_bytes = 0;        // [bytes]
  uint64_t saved_reads = 0;          // K/V rows a shared schedule does not read again [rows]
  double step_seconds = 0;           // one ChunkAttention step, with timing [s]
  double paged_step_seconds = 0;     // the paged step at P_k = P_a over the same batch [s]
};

struct PageGroupCost {
  uint32_t tokens_per_page = 0;  // G [rows]
  uint64_t map_calls = 0;        // OS mappings made (one per page per tensor)
  uint64_t mapped_pages = 0;     // pages per tensor mapped with every request running
  uint64_t tail_rows = 0;        // mapped but unwritten rows, per tensor [rows]
  uint64_t steps = 0;            // mapper steps (prefill, then one per decoded token)
  double map_seconds = 0;        // wall time of those steps [s]
};

struct BlockSizeCost {
  uint32_t allocator_block = 0;  // P_a [tokens]
  // storage (0x09B), with every request running [rows or blocks]
  uint64_t request_block_refs = 0;        // sum of the requests' table lengths [entries]
  uint64_t request_view_tail_rows = 0;    // sum_r (N_r P - T_r) [rows]
  uint64_t runtime_unique_blocks = 0;     // blocks the pool holds [blocks]
  uint64_t runtime_unique_tail_rows = 0;  // their unwritten rows [rows]
  uint64_t ideal_unique_blocks = 0;       // every exact prefix stored once [blocks]
  uint64_t ideal_unique_tail_rows = 0;    // [rows]
  MetadataLedger metadata;
  // hits (0x07A cap, full blocks)
  uint64_t prompt_tokens = 0;      // [tokens]
  uint64_t hit_tokens = 0;         // [tokens]
  uint64_t recomputed_tokens = 0;  // prompt - hit [tokens]
  // the immutable partial-tail alternative (0x07D, same cap)
  uint64_t partial_tail_hit_tokens = 0;  // [tokens], independent of P_a
  uint64_t partial_tail_copy_rows = 0;   // sum of hit mod P_a: rows copied out of shared partial blocks [rows]
  // transitions
  uint64_t blocks_allocated = 0;  // taken from the free queue [blocks]
  // copy-on-write (0x09C)
  uint64_t cow_copies = 0;               // branches that copied a shared partial block
  uint64_t cow_rows = 0;                 // rows copied [rows]
  uint64_t cow_traffic_bytes = 0;        // 2 r B_row summed [bytes]
  uint64_t cow_capacity_bytes = 0;       // P_a B_row per copy [bytes]
  std::vector<KernelTableCost> kernels;  // per legal P_k, ascending
  std::vector<ChunkCost> chunks;         // per P_c, in the order given
};

struct BlockSizeSweep {
  BlockSizeSweepConfig config;
  uint64_t requests = 0;                   // after fork expansion [requests]
  std::vector<BlockSizeCost> costs;        // one per P_a, in the order given
  std::vector<PageGroupCost> page_groups;  // one per page group, in the order given
};

// Replays `requests` once per P_a. Errors: invalid_argument naming the
// field (no sizes, a size of 0 or above 4096, a P_k of 0, an empty prompt,
// no row bytes), or what a component refused (the replay's or the
// allocator's typed error, with the P_a it happened at).
Result<BlockSizeSweep> sweep_block_sizes(const std::vector<SweepRequest>& requests, const BlockSizeSweepConfig& config);

// The fixture of 0x09B: A of 33 tokens, B and C its exact prefixes of 25 and
// 16 tokens, 64 KiB rows, a pool of 128 token slots, P_a = 4 .. 64.
std::vector<SweepRequest> nested_prefix_fixture();
BlockSizeSweepConfig nested_prefix_fixture_config();

}  // namespace kvrt
