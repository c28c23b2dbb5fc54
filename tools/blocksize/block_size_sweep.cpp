#include "tools/blocksize/block_size_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "services/allocator/block_allocator.hpp"
#include "services/common/units.hpp"
#include "services/mapper/memfd_backing.hpp"
#include "services/mapper/vmm_mapper.hpp"
#include "tools/blocksize/decode_batch.hpp"
#include "tools/replay/prefix_replay.hpp"
#include "tools/replay/radix_replay.hpp"

namespace kvrt {
namespace {

constexpr uint32_t kMaxBlockTokens = 4096;

using blocksize::DecodeBatch;
using blocksize::RunningRequest;

// Fork branches become requests of their own in the prefix replay (it has
// no fork): branch k > 0 decodes other tokens than branch 0, so the
// branches diverge at their first generated token, as sampled branches do.
struct ExpandedRequest {
  const SweepRequest* source = nullptr;
  uint32_t branch = 0;
  std::vector<TokenId> decode;
};

std::vector<ExpandedRequest> expand(const std::vector<SweepRequest>& requests) {
  std::vector<ExpandedRequest> out;
  for (const SweepRequest& r : requests)
    for (uint32_t k = 0; k < r.branches; ++k) {
      ExpandedRequest e{&r, k, r.decode};
      if (k > 0 && !e.decode.empty()) e.decode[0] = e.decode[0] ^ static_cast<TokenId>(k);
      out.push_back(std::move(e));
    }
  return out;
}

// The storage-identity ideal of 0x09B: block j of a context of T tokens is
// its prefix of min(T, (j+1)P) tokens; equal prefixes are one block, and a
// partial prefix that another context extends lives inside that context's
// block. Prefixes are compared by a 64-bit hash of (salt, tokens, length).
void ideal_storage(const std::vector<RunningRequest>& running, uint32_t P, BlockSizeCost& cost) {
  std::vector<std::vector<uint64_t>> prefix(running.size());
  std::unordered_set<uint64_t> extended;  // (length, hash) of every prefix some context extends
  for (size_t r = 0; r < running.size(); ++r) {
    prefix[r] = blocksize::prefix_hashes(running[r]);
    for (size_t L = 1; L < running[r].tokens.size(); ++L) extended.insert(blocksize::mix_hash(prefix[r][L], L));
  }
  std::unordered_map<uint64_t, uint64_t> blocks;  // (length, hash) -> unwritten rows of its block
  for (size_t r = 0; r < running.size(); ++r) {
    const uint64_t T = running[r].tokens.size();
    for (uint64_t j = 0; j * P < T; ++j) {
      const uint64_t L = std::min<uint64_t>(T, (j + 1) * P);
      const uint64_t key = blocksize::mix_hash(prefix[r][L], L);
      if (L < (j + 1) * P && extended.contains(key)) continue;  // inside a longer context's block
      blocks.emplace(key, (j + 1) * P - L);
    }
  }
  cost.ideal_unique_blocks = blocks.size();
  for (const auto& [key, tail] : blocks) cost.ideal_unique_tail_rows += tail;
}

// Forked branches write into the parent's shared partial block (0x05C):
// the real allocator forks branches - 1 children after the prompt and
// appends one row to every branch, children first; each copy is one
// allocator receipt with copied_rows > 0.
Status measure_copy_on_write(const SweepRequest& r, uint32_t P, uint64_t row_bytes, BlockSizeCost& cost) {
  const uint32_t prompt = static_cast<uint32_t>(r.prompt.size());
  BlockAllocatorConfig c;
  c.block_size = P;
  c.groups.push_back(GroupPoolConfig{CacheGroupId{0},
                                     PoolId{1},
                                     PoolGeneration{1},
                                     static_cast<uint32_t>(ceil_div(prompt, P)) + 2 * r.branches + 1,
                                     0,
                                     row_bytes,
                                     {}});
  Result<BlockAllocator> created = BlockAllocator::create(c);
  if (!created.ok()) return created.error();
  BlockAllocator& alloc = *created;
  Result<AllocationReceipt> a = alloc.allocate(AllocateArgs{prompt, {}, std::nullopt, nullptr, 0});
  if (!a.ok()) return a.error();
  RequestFence parent{a->request_id, a->request_generation, a->table_version_after};
  Result<AllocationReceipt> committed = alloc.commit_rows(CommitRowsArgs{parent, prompt});
  if (!committed.ok()) return committed.error();
  parent.table_version = committed->table_version_after;
  std::vector<RequestFence> branches;
  for (uint32_t k = 1; k < r.branches; ++k) {
    Result<AllocationReceipt> f = alloc.fork(ForkArgs{parent});
    if (!f.ok()) return f.error();
    branches.push_back(RequestFence{f->request_id, f->request_generation, f->table_version_after});
  }
  branches.push_back(parent);
  for (const RequestFence& b : branches) {
    Result<AllocationReceipt> appended = alloc.append(AppendArgs{b, {}, std::nullopt, nullptr});
    if (!appended.ok()) return appended.error();
    if (appended->copied_rows == 0) continue;
    ++cost.cow_copies;
    cost.cow_rows += appended->copied_rows;
    cost.cow_traffic_bytes += 2 * uint64_t{appended->copied_rows} * row_bytes;
    cost.cow_capacity_bytes += uint64_t{P} * row_bytes;
  }
  return alloc.validate();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The mapper of vAttention mode (0x06D) with page groups of G rows: one
// layer, one K/V head of 64 fp16 lanes (128 bytes per row and tensor),
// every request bound to a slot, stepped over its prompt, then once per
// decoded token, all running together as in the replay.
Result<PageGroupCost> measure_page_group(const std::vector<ExpandedRequest>& expanded, uint32_t G) {
  constexpr uint32_t kHeadDim = 64, kElementBytes = 2;
  const uint64_t page_bytes = uint64_t{G} * kHeadDim * kElementBytes;
  if (G == 0 || page_bytes % MemfdBacking::os_page_bytes() != 0)
    return make_error(
        ErrorCode::invalid_argument,
        "a page group of " + std::to_string(G) + " rows is " + std::to_string(page_bytes) +
            " bytes per tensor, not a multiple of the OS page (" + std::to_string(MemfdBacking::os_page_bytes()) +
            " bytes: " + std::to_string(MemfdBacking::os_page_bytes() / (kHeadDim * kElementBytes)) + " rows)",
        "page_groups");
  uint64_t longest = 0, handles = 0;
  for (const ExpandedRequest& e : expanded) {
    const uint64_t T = e.source->prompt.size() + e.decode.size();
    longest = std::max(longest, T);
    handles += 2 * ceil_div(T, G);
  }
  const MapperConfig config{1,
                            static_cast<uint32_t>(expanded.size()),
                            static_cast<uint32_t>(ceil_div(longest, G) * G),
                            1,
                            kHeadDim,
                            kElementBytes,
                            page_bytes,
                            static_cast<uint32_t>(handles)};
  Result<std::unique_ptr<VmmMapper>> made = VmmMapper::init(config, std::make_unique<MemfdBacking>());
  if (!made.ok()) return made.error();
  VmmMapper& mapper = **made;
  PageGroupCost cost;
  cost.tokens_per_page = G;
  const auto t0 = std::chrono::steady_clock::now();
  auto step = [&](RequestId id, uint32_t tokens) -> Status {
    Result<StepResult> r = mapper.step({StepRequest{id, tokens}}, MappingPath::synchronous);
    if (!r.ok()) return r.error();
    if (r->feasibility != MappingFeasibility::ready)
      return make_error(ErrorCode::invariant_violated, "the mapper ran out of page handles sized for every request",
                        "page_groups");
    ++cost.steps;
    for (const MappedFrontierReceipt& receipt : r->receipts) cost.map_calls += receipt.new_mappings.size();
    return Status::success();
  };
  for (size_t i = 0; i < expanded.size(); ++i) {
    const ExpandedRequest& e = expanded[i];
    const RequestId id{i + 1};
    const uint32_t prompt = static_cast<uint32_t>(e.source->prompt.size());
    Result<SlotBinding> bound =
        mapper.alloc_reqid(id, RequestGeneration{1}, prompt + static_cast<uint32_t>(e.decode.size()));
    if (!bound.ok()) return bound.error();
    KVRT_TRY(step(id, prompt));
    for (uint32_t d = 1; d <= e.decode.size(); ++d) KVRT_TRY(step(id, prompt + d));
    const uint64_t T = prompt + e.decode.size();
    cost.mapped_pages += ceil_div(T, G);
    cost.tail_rows += ceil_div(T, G) * G - T;
  }
  cost.map_seconds = seconds_since(t0);
  KVRT_TRY(mapper.validate());
  return cost;
}

// The immutable partial-tail policy's hits (0x07D): kvrt's radix tree at
// page size 1, each request matched over its first S_prompt - 1 tokens (the
// logits cap, 0x07A) under its salt, then its whole context inserted, in
// arrival order as the prefix replay admits them. Returns each request's hit.
Result<std::vector<uint64_t>> partial_tail_hits(const std::vector<ExpandedRequest>& expanded) {
  RadixReplay replay(RadixReplayOptions{RadixReplayProfile::sglang, false});
  std::vector<uint64_t> hits;
  for (const ExpandedRequest& e : expanded) {
    const std::vector<TokenId>& prompt = e.source->prompt;
    nlohmann::json match{{"op", "match"}, {"tokens", std::vector<TokenId>(prompt.begin(), prompt.end() - 1)}};
    std::vector<TokenId> context = prompt;
    context.insert(context.end(), e.decode.begin(), e.decode.end());
    nlohmann::json insert{{"op", "insert"}, {"tokens", context}};
    if (!e.source->salt.empty()) match["extra_key"] = insert["extra_key"] = e.source->salt;
    replay::OpOutcome m = replay.apply("match", match);
    replay::OpOutcome i = replay.apply("insert", insert);
    for (const replay::OpOutcome* o : {&m, &i})
      if (const auto* err = std::get_if<replay::ReplayError>(o))
        return make_error(ErrorCode::invalid_argument, "the radix replay refused a request: " + err->message,
                          "workload");
    hits.push_back(std::get<replay::OutFields>(m)["matched"].get<uint64_t>());
  }
  return hits;
}

Error at_block_size(uint32_t P, const Error& e) {
  Error out = e;
  out.reason = "at P_a = " + std::to_string(P) + ": " + e.reason;
  return out;
}

Result<BlockSizeCost> measure(const std::vector<SweepRequest>& requests, const std::vector<ExpandedRequest>& expanded,
                              const std::vector<uint64_t>& tail_hits, const BlockSizeSweepConfig& config, uint32_t P,
                              uint64_t pool_tokens) {
  BlockSizeCost cost;
  cost.allocator_block = P;
  for (uint64_t h : tail_hits) {
    cost.partial_tail_hit_tokens += h;
    cost.partial_tail_copy_rows += h % P;
  }
  uint64_t need = 1;  // the replay's null block
  uint64_t longest = 0;
  for (const ExpandedRequest& e : expanded) {
    const uint64_t T = e.source->prompt.size() + e.decode.size();
    need += ceil_div(T, P);
    longest = std::max(longest, T);
  }
  PrefixReplay replay(PrefixReplayOptions{PrefixReplayProfile::kvrt, true});
  auto apply = [&](const std::string& op, const nlohmann::json& line) -> Result<replay::OutFields> {
    replay::OpOutcome o = replay.apply(op, line);
    if (auto* e = std::get_if<replay::ReplayError>(&o))
      return make_error(ErrorCode::invalid_argument,
                        "at P_a = " + std::to_string(P) + ", the prefix replay refused " + op + ": " + e->message, op);
    return std::get<replay::OutFields>(std::move(o));
  };
  if (Result<replay::OutFields> configured =
          apply("config", {{"op", "config"},
                           {"block_size", P},
                           {"num_blocks", need},
                           {"max_model_len", std::max<uint64_t>(longest, uint64_t{P} * need)}});
      !configured.ok())
    return configured.error();
  std::vector<RunningRequest> running;
  for (size_t i = 0; i < expanded.size(); ++i) {
    const ExpandedRequest& e = expanded[i];
    std::string id = "r";  // (one append: GCC 12's -Wrestrict misreads "r" + to_string at -O3)
    id += std::to_string(i);
    nlohmann::json ask{{"op", "request"}, {"id", id}, {"tokens", e.source->prompt}};
    if (!e.source->salt.empty()) ask["salt"] = e.source->salt;
    Result<replay::OutFields> asked = apply("request", ask);
    if (!asked.ok()) return asked.error();
    replay::OutFields& admitted = *asked;
    if (!admitted.value("admitted", false))
      return make_error(
          ErrorCode::invariant_violated,
          "at P_a = " + std::to_string(P) + " request " + id + " was not admitted by a pool sized for all", "pool");
    cost.prompt_tokens += e.source->prompt.size();
    cost.hit_tokens += admitted["hit_tokens"].get<uint64_t>();
    cost.blocks_allocated += admitted["new_blocks"].get<uint64_t>();
    RunningRequest r{e.source->prompt, e.source->salt, admitted["block_ids"].get<std::vector<uint32_t>>()};
    if (!e.decode.empty()) {
      Result<replay::OutFields> stepped = apply("decode", {{"op", "decode"}, {"id", id}, {"tokens", e.decode}});
      if (!stepped.ok()) return stepped.error();
      replay::OutFields& decoded = *stepped;
      cost.blocks_allocated += decoded["new_blocks"].get<uint64_t>();
      r.blocks = decoded["block_ids"].get<std::vector<uint32_t>>();
      r.tokens.insert(r.tokens.end(), e.decode.begin(), e.decode.end());
    }
    running.push_back(std::move(r));
  }
  KVRT_TRY(replay.validate());
  cost.recomputed_tokens = cost.prompt_tokens - cost.hit_tokens;

  // Storage with every request running: the tables as the allocator holds them.
  std::unordered_map<uint32_t, uint64_t> written;  // block id -> rows some table has written in it
  std::vector<uint64_t> contexts;
  for (const RunningRequest& r : running) {
    const uint64_t T = r.tokens.size();
    contexts.push_back(T);
    cost.request_block_refs += r.blocks.size();
    cost.request_view_tail_rows += uint64_t{r.blocks.size()} * P - T;
    for (size_t j = 0; j < r.blocks.size(); ++j) {
      uint64_t& rows = written[r.blocks[j]];
      rows = std::max<uint64_t>(rows, std::min<uint64_t>(P, T - j * P));
    }
  }
  cost.runtime_unique_blocks = written.size();
  for (const auto& [block, rows] : written) cost.runtime_unique_tail_rows += P - rows;
  ideal_storage(running, P, cost);

  MetadataCounts counts;
  counts.request_block_refs = cost.request_block_refs;
  counts.pool_blocks = ceil_div(pool_tokens, P);
  counts.cached_hashes = replay.state().hash_keys;
  counts.live_requests = running.size();
  counts.free_queue_entries =
      counts.pool_blocks > cost.runtime_unique_blocks ? counts.pool_blocks - cost.runtime_unique_blocks : 0;
  cost.metadata = compute_metadata_ledger(config.record_sizes, counts);

  for (const SweepRequest& r : requests)
    if (r.branches > 1)
      if (Status st = measure_copy_on_write(r, P, config.row_bytes, cost); !st.ok())
        return at_block_size(P, st.error());

  Result<DecodeBatch> batch = DecodeBatch::build(running, written, P, config.kernel_timing);
  if (!batch.ok()) return at_block_size(P, batch.error());
  std::vector<uint32_t> kernels = config.kernel_block_sizes;
  std::sort(kernels.begin(), kernels.end());
  kernels.erase(std::unique(kernels.begin(), kernels.end()), kernels.end());
  for (uint32_t pk : kernels) {
    if (P % pk != 0) continue;  // 0x0AC: a kernel block must divide the allocator block
    Result<RaggedTableLedger> table = ragged_table_ledger(contexts, pk);
    if (!table.ok()) return table.error();
    KernelTableCost k{pk, std::move(*table), 0, 0, 0, 0, 0};
    if (config.kernel_timing.trials > 0)
      if (Status st = batch->time_paged(k); !st.ok()) return at_block_size(P, st.error());
    cost.kernels.push_back(std::move(k));
  }
  for (uint32_t pc : config.chunk_tokens) {
    Result<ChunkCost> chunked = batch->chunks(pc);
    if (!chunked.ok()) return at_block_size(P, chunked.error());
    cost.chunks.push_back(*chunked);
  }
  return cost;
}

}  // namespace

Result<BlockSizeSweep> sweep_block_sizes(const std::vector<SweepRequest>& requests,
                                         const BlockSizeSweepConfig& config) {
  if (config.allocator_block_sizes.empty())
    return make_error(ErrorCode::invalid_argument, "no allocator block size to sweep", "sizes");
  for (uint32_t p : config.allocator_block_sizes)
    if (p == 0 || p > kMaxBlockTokens)
      return make_error(ErrorCode::invalid_argument,
                        "allocator block size " + std::to_string(p) + " is outside [1, 4096]", "sizes");
  for (uint32_t p : config.kernel_block_sizes)
    if (p == 0) return make_error(ErrorCode::invalid_argument, "a kernel block size of 0", "kernel_sizes");
  for (uint32_t p : config.chunk_tokens)
    if (p == 0) return make_error(ErrorCode::invalid_argument, "a chunk size of 0", "chunk_sizes");
  if (config.row_bytes == 0) return make_error(ErrorCode::invalid_argument, "row bytes must be > 0", "row_bytes");
  KVRT_TRY(validate_record_sizes(config.record_sizes));
  if (requests.empty()) return make_error(ErrorCode::invalid_argument, "the workload has no request", "workload");
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].prompt.empty())
      return make_error(ErrorCode::invalid_argument, "request " + std::to_string(i) + " has an empty prompt",
                        "workload");
    if (requests[i].branches == 0)
      return make_error(ErrorCode::invalid_argument, "request " + std::to_string(i) + " has 0 branches", "workload");
  }
  const std::vector<ExpandedRequest> expanded = expand(requests);
  uint64_t pool_tokens = config.pool_tokens;
  if (pool_tokens == 0) {
    const uint32_t largest =
        *std::max_element(config.allocator_block_sizes.begin(), config.allocator_block_sizes.end());
    for (const ExpandedRequest& e : expanded)
      pool_tokens += ceil_div(e.source->prompt.size() + e.decode.size(), largest) * largest;
  }
  const Result<std::vector<uint64_t>> tail_hits = partial_tail_hits(expanded);
  if (!tail_hits.ok()) return tail_hits.error();
  BlockSizeSweep out{config, expanded.size(), {}, {}};
  out.config.pool_tokens = pool_tokens;
  for (uint32_t P : config.allocator_block_sizes) {
    Result<BlockSizeCost> cost = measure(requests, expanded, *tail_hits, config, P, pool_tokens);
    if (!cost.ok()) return cost.error();
    out.costs.push_back(std::move(*cost));
  }
  for (uint32_t G : config.page_group_tokens) {
    Result<PageGroupCost> mapped = measure_page_group(expanded, G);
    if (!mapped.ok()) return mapped.error();
    out.page_groups.push_back(*mapped);
  }
  return out;
}

std::vector<SweepRequest> nested_prefix_fixture() {
  std::vector<TokenId> a(33);
  for (uint32_t i = 0; i < a.size(); ++i) a[i] = static_cast<TokenId>(1000 + i);
  return {SweepRequest{"", a, {}, 1}, SweepRequest{"", {a.begin(), a.begin() + 25}, {}, 1},
          SweepRequest{"", {a.begin(), a.begin() + 16}, {}, 1}};
}

BlockSizeSweepConfig nested_prefix_fixture_config() {
  BlockSizeSweepConfig c;
  c.allocator_block_sizes = {4, 8, 16, 32, 64};
  c.kernel_block_sizes = {4, 8, 16};
  c.row_bytes = 64 * 1024;
  c.pool_tokens = 128;
  c.record_sizes = kvrt_record_sizes();
  return c;
}

}  // namespace kvrt
