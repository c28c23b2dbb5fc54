#include "tools/replay/prefix_replay.hpp"

#include <algorithm>

#include "services/common/units.hpp"

namespace kvrt {

using replay::FieldReader;
using replay::OpOutcome;
using replay::OutFields;
using replay::ReplayError;
using replay::ReplayErrorType;

namespace {

constexpr uint32_t kDefaultBlockSize = 16;
constexpr uint32_t kDefaultNumBlocks = 64;
constexpr int64_t kMaxBlockSize = 4096;     // [tokens]
constexpr int64_t kMaxNumBlocks = 1 << 22;  // [blocks] (128 MiB of allocator metadata)

// "" is no salt / no adapter, as vLLM's truthiness tests.
std::string or_empty(const std::optional<std::string>& s) { return s.value_or(std::string()); }

}  // namespace

Result<PrefixReplayProfile> parse_prefix_replay_profile(std::string_view name) {
  if (name == "vllm") return PrefixReplayProfile::vllm;
  if (name == "kvrt") return PrefixReplayProfile::kvrt;
  return make_error(ErrorCode::invalid_argument,
                    "unknown prefix replay profile '" + std::string(name) + "' (expected vllm or kvrt)", "profile");
}

PrefixReplay::PrefixReplay(const PrefixReplayOptions& options) : options_(options) {
  ReplayError unused;
  const bool ok = configure(kDefaultBlockSize, kDefaultNumBlocks, kDefaultBlockSize * kDefaultNumBlocks, unused);
  KVRT_ASSERT(ok, "the default prefix replay configuration is valid");
}

bool PrefixReplay::configure(uint32_t block_size, uint32_t num_blocks, uint32_t max_model_len, ReplayError& error) {
  const bool vllm = options_.profile == PrefixReplayProfile::vllm;
  // Block 0 is vLLM's null block: the pool is ids 1 .. num_blocks - 1.
  BlockAllocatorConfig ac;
  ac.block_size = block_size;
  ac.max_requests = num_blocks;  // every running request holds at least one block
  ac.queue_policy = vllm ? FreeQueuePolicy::single_lru_queue : FreeQueuePolicy::free_first_then_oldest_evictable;
  ac.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{1}, PoolGeneration{1}, num_blocks - 1, 1, 0, {}});
  Result<BlockAllocator> allocator = BlockAllocator::create(ac);
  PrefixIndexConfig ic;
  ic.hash_family = HashFamily::sha256;
  ic.block_tokens = block_size;
  ic.cache_groups = 1;
  ic.policy = ReusePolicy::full_block;
  ic.collision_witness = !vllm;
  ic.publish_duplicates = vllm;
  Result<PrefixIndex> index = PrefixIndex::create(ic);
  if (!allocator.ok() || !index.ok()) {
    error = ReplayError{ReplayErrorType::invalid_value, (allocator.ok() ? index.error() : allocator.error()).reason};
    return false;
  }
  allocator_.emplace(std::move(allocator).value());
  index_.emplace(std::move(index).value());
  scope_.emplace(index_->local_scope().value());
  block_size_ = block_size;
  num_blocks_ = num_blocks;
  max_model_len_ = max_model_len;
  running_.clear();
  return true;
}

std::vector<TokenId> PrefixReplay::token_ids(const std::vector<int64_t>& values) {
  std::vector<TokenId> ids(values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    KVRT_ASSERT(token_ids_.size() < static_cast<size_t>(INT32_MAX), "more than 2^31 distinct token values");
    const auto next = static_cast<TokenId>(token_ids_.size());
    ids[k] = token_ids_.try_emplace(values[k], next).first->second;
  }
  return ids;
}

BlockExtrasPlan PrefixReplay::extras_plan(const std::optional<std::string>& salt,
                                          const std::optional<std::string>& lora) const {
  RequestExtras extras;
  extras.cache_salt = or_empty(salt);                              // FORMAT.md: an extra of block 0 only
  extras.lora_name = or_empty(lora);                               // an extra of every block
  return index_->extras_plan(*scope_, std::move(extras)).value();  // the local scope has no salt of its own
}

uint32_t PrefixReplay::hit_blocks(const std::vector<TokenId>& tokens, const std::vector<BlockHash>& hashes,
                                  std::vector<PhysicalBlockHandle>* handles) const {
  // The logits cap (0x07A): at most floor((len - 1) / P) blocks.
  const uint32_t cap_blocks = static_cast<uint32_t>((tokens.size() - 1) / block_size_);
  return index_->match_full_blocks(hashes, cap_blocks, tokens, &*allocator_, handles);
}

void PrefixReplay::absorb_evictions() { index_->absorb(allocator_->drain_events()); }

nlohmann::ordered_json PrefixReplay::block_ids(RequestId id) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const std::vector<PhysicalBlockHandle> table = allocator_->table(id, 0).value();
  for (const PhysicalBlockHandle& h : table) out.push_back(h.block.value);
  return out;
}

PrefixReplayState PrefixReplay::state() const {
  const BlockAllocator::PoolCounts c = allocator_->counts(0);
  return PrefixReplayState{uint64_t{c.free} + c.evictable, index_->cached_blocks(), c.evictable, index_->hash_keys(),
                           running_.size()};
}

void PrefixReplay::append_state(OutFields& out) const {
  const PrefixReplayState s = state();
  out["free"] = s.free;
  out["cached"] = s.cached;
  out["evictable"] = s.evictable;
  out["hash_keys"] = s.hash_keys;
  out["running"] = s.running;
}

OpOutcome PrefixReplay::apply(const std::string& op, const nlohmann::json& line) {
  FieldReader f(line);
  OpOutcome outcome = op == "config"    ? config(f)
                      : op == "request" ? request(f)
                      : op == "decode"  ? decode(f)
                      : op == "free"    ? free_request(f)
                      : op == "probe"   ? probe(f)
                      : op == "reset"
                          ? reset()
                          : OpOutcome{ReplayError{ReplayErrorType::unknown_op, "prefix replay has no op '" + op + "'"}};
  if (auto* fields = std::get_if<OutFields>(&outcome)) append_state(*fields);
  return outcome;
}

OpOutcome PrefixReplay::config(FieldReader& f) {
  const int64_t block_size = f.optional_integer("block_size").value_or(kDefaultBlockSize);
  const int64_t num_blocks = f.optional_integer("num_blocks").value_or(kDefaultNumBlocks);
  const std::optional<int64_t> max_model_len = f.optional_integer("max_model_len");
  if (!f.ok()) return f.error();
  if (block_size < 1 || block_size > kMaxBlockSize)
    return ReplayError{ReplayErrorType::invalid_value,
                       "block_size must be in [1, " + std::to_string(kMaxBlockSize) + "] tokens"};
  if (num_blocks < 2 || num_blocks > kMaxNumBlocks)
    return ReplayError{ReplayErrorType::invalid_value,
                       "num_blocks must be in [2, " + std::to_string(kMaxNumBlocks) + "] (block 0 is the null block)"};
  const int64_t model_len = max_model_len.value_or(block_size * num_blocks);
  if (model_len < 1 || model_len > INT32_MAX)
    return ReplayError{ReplayErrorType::invalid_value, "max_model_len must be in [1, 2^31 - 1] tokens"};
  ReplayError error;
  if (!configure(static_cast<uint32_t>(block_size), static_cast<uint32_t>(num_blocks), static_cast<uint32_t>(model_len),
                 error))
    return error;
  OutFields out;
  out["usable_blocks"] = num_blocks_ - 1;
  return out;
}

OpOutcome PrefixReplay::request(FieldReader& f) {
  const std::string id = f.string("id");
  const std::vector<int64_t> values = f.integer_list("tokens");
  const std::optional<std::string> salt = f.optional_string("salt");
  const std::optional<std::string> lora = f.optional_string("lora");
  if (!f.ok()) return f.error();
  if (values.empty())
    return ReplayError{ReplayErrorType::invalid_value, "tokens must not be empty (S_prompt >= 1, spec 0x07A)"};
  if (running_.count(id) != 0)
    return ReplayError{ReplayErrorType::invalid_value, "request '" + id + "' is already running"};

  Running r;
  r.tokens = token_ids(values);
  r.prompt_tokens = static_cast<uint32_t>(r.tokens.size());
  r.extras = extras_plan(salt, lora);
  index_->extend_hashes(*scope_, r.tokens, r.extras, r.hashes);
  std::vector<PhysicalBlockHandle> hit;
  const uint32_t hits = hit_blocks(r.tokens, r.hashes, &hit);

  OutFields out;
  out["hit_tokens"] = uint64_t{hits} * block_size_;
  auto not_admitted = [&] {
    out["admitted"] = false;
    out["new_blocks"] = 0;
    out["evicted"] = 0;
    return out;
  };
  if (r.tokens.size() > max_model_len_) return not_admitted();
  // FORMAT.md admission: new blocks plus the hit blocks that currently have
  // no user (reviving them takes them off the free queue).
  const uint64_t blocks = ceil_div(r.tokens.size(), block_size_);
  uint64_t needed = blocks - hits;
  for (const PhysicalBlockHandle& h : hit) needed += allocator_->block(h).value().refcount == 0 ? 1 : 0;
  if (needed > state().free) return not_admitted();

  const Result<AllocationReceipt> allocated = allocator_->allocate(AllocateArgs{r.prompt_tokens, hit, {}});
  KVRT_ASSERT(allocated.ok() && allocated->outcome == AllocationOutcome::committed,
              "admission was checked against the free queue");
  const AllocationReceipt& allocation = *allocated;
  absorb_evictions();
  r.allocator_id = allocation.request_id;
  // The whole prompt is prefilled inside the op: its rows are committed, then
  // every full block of the prompt is published at once.
  const Result<AllocationReceipt> committed =
      allocator_->commit_rows(CommitRowsArgs{allocator_->fence(r.allocator_id).value(), r.prompt_tokens});
  KVRT_ASSERT(committed.ok(), "prefill rows of fresh private blocks commit: " + committed.error().describe());
  const PrefixPublishArgs publish{r.allocator_id, r.tokens, r.hashes,
                                  &r.extras,      hits,     static_cast<uint32_t>(r.hashes.size())};
  AllocatorPublicationTarget target(*allocator_);
  const Result<PublishOutcome> published = index_->publish_blocks(*scope_, target, publish);
  KVRT_ASSERT(published.ok(), "prompt publication: " + published.error().describe());

  out["admitted"] = true;
  out["new_blocks"] = allocation.new_physical_blocks;
  out["evicted"] = allocation.evicted_handles.size();
  if (options_.ids) out["block_ids"] = block_ids(r.allocator_id);
  running_.emplace(id, std::move(r));
  return out;
}

OpOutcome PrefixReplay::decode(FieldReader& f) {
  const std::string id = f.string("id");
  const std::vector<int64_t> values = f.integer_list("tokens");
  if (!f.ok()) return f.error();
  const auto it = running_.find(id);
  if (it == running_.end()) {
    OutFields out;
    out["skipped"] = true;
    return out;
  }
  Running& r = it->second;
  const std::vector<TokenId> ids = token_ids(values);
  uint64_t decoded = 0, new_blocks = 0, evicted = 0;
  bool preempted = false;
  for (TokenId t : ids) {
    if (r.tokens.size() >= max_model_len_) break;  // the request is length-capped
    const RequestFence fence = allocator_->fence(r.allocator_id).value();
    const Result<AllocationReceipt> appended = allocator_->append(AppendArgs{fence, {}, {}});
    KVRT_ASSERT(appended.ok(), "append of a running request: " + appended.error().describe());
    const AllocationReceipt& step = *appended;
    if (step.outcome == AllocationOutcome::out_of_capacity) {
      // No block for the step: the request is preempted, every block freed
      // tail first (their hashes kept), and it leaves the running set.
      const Result<ReleaseResult> dropped = allocator_->release(ReleaseArgs{fence, ReleaseReason::preempted});
      KVRT_ASSERT(dropped.ok(), "preemption: " + dropped.error().describe());
      absorb_evictions();
      preempted = true;
      break;
    }
    new_blocks += step.new_physical_blocks;
    evicted += step.evicted_handles.size();
    absorb_evictions();
    r.tokens.push_back(t);
    ++decoded;
    const Result<AllocationReceipt> committed = allocator_->commit_rows(
        CommitRowsArgs{allocator_->fence(r.allocator_id).value(), static_cast<uint32_t>(r.tokens.size())});
    KVRT_ASSERT(committed.ok(), "decode row of a private tail commits: " + committed.error().describe());
    // A block is published the moment it becomes full; its hash covers the
    // generated tokens.
    if (r.tokens.size() % block_size_ == 0) {
      index_->extend_hashes(*scope_, r.tokens, r.extras, r.hashes);
      const uint32_t block = static_cast<uint32_t>(r.hashes.size()) - 1;
      const PrefixPublishArgs publish{r.allocator_id, r.tokens, r.hashes, &r.extras, block, block + 1};
      AllocatorPublicationTarget target(*allocator_);
      const Result<PublishOutcome> published = index_->publish_blocks(*scope_, target, publish);
      KVRT_ASSERT(published.ok(), "decode block publication: " + published.error().describe());
    }
  }
  OutFields out;
  out["decoded"] = decoded;
  out["new_blocks"] = new_blocks;
  out["preempted"] = preempted;
  out["evicted"] = evicted;
  if (preempted)
    running_.erase(it);
  else if (options_.ids)
    out["block_ids"] = block_ids(r.allocator_id);
  return out;
}

OpOutcome PrefixReplay::free_request(FieldReader& f) {
  const std::string id = f.string("id");
  if (!f.ok()) return f.error();
  const auto it = running_.find(id);
  OutFields out;
  if (it == running_.end()) {
    out["skipped"] = true;
    return out;
  }
  // Released tail first: each block whose refcount reaches 0 joins the tail
  // of the free queue with its hash kept (allocator release_tables).
  const Result<ReleaseResult> dropped =
      allocator_->release(ReleaseArgs{allocator_->fence(it->second.allocator_id).value(), ReleaseReason::finished});
  KVRT_ASSERT(dropped.ok(), "release of a running request: " + dropped.error().describe());
  absorb_evictions();
  out["num_tokens"] = it->second.tokens.size();
  running_.erase(it);
  return out;
}

OpOutcome PrefixReplay::probe(FieldReader& f) {
  const std::vector<int64_t> values = f.integer_list("tokens");
  const std::optional<std::string> salt = f.optional_string("salt");
  const std::optional<std::string> lora = f.optional_string("lora");
  if (!f.ok()) return f.error();
  if (values.empty())
    return ReplayError{ReplayErrorType::invalid_value, "tokens must not be empty (S_prompt >= 1, spec 0x07A)"};
  const std::vector<TokenId> ids = token_ids(values);
  std::vector<BlockHash> hashes;
  index_->extend_hashes(*scope_, ids, extras_plan(salt, lora), hashes);
  OutFields out;
  out["hit_tokens"] = uint64_t{hit_blocks(ids, hashes, nullptr)} * block_size_;
  return out;
}

OpOutcome PrefixReplay::reset() {
  // vLLM reset_prefix_cache: refused while any block is in use; otherwise
  // every hash goes and the free queue keeps its order.
  const BlockAllocator::PoolCounts c = allocator_->counts(0);
  OutFields out;
  if (c.live + c.in_transaction > 0) {
    out["ok"] = false;
    return out;
  }
  const Status cleared = index_->clear(*allocator_);
  KVRT_ASSERT(cleared.ok(), "clearing an index with no block in use: " + cleared.error().describe());
  out["ok"] = true;
  return out;
}

Status PrefixReplay::validate() const {
  KVRT_TRY(allocator_->validate());
  KVRT_TRY(index_->validate(&*allocator_));
  auto broken = [](const std::string& what) {
    return make_error(ErrorCode::invariant_violated, "prefix replay ledger: " + what, "validate");
  };
  if (allocator_->live_requests() != running_.size())
    return broken(std::to_string(allocator_->live_requests()) + " allocator requests for " +
                  std::to_string(running_.size()) + " running");
  for (const auto& [id, r] : running_) {
    const Result<uint32_t> context = allocator_->context_tokens(r.allocator_id);
    if (!context.ok() || *context != r.tokens.size())
      return broken("request '" + id + "' context differs from its tokens");
    if (r.hashes.size() > r.tokens.size() / block_size_) return broken("request '" + id + "' hashes a partial block");
  }
  const BlockAllocator::PoolCounts c = allocator_->counts(0);
  const PrefixReplayState s = state();
  if (s.free + c.live + c.in_transaction != usable_blocks())
    return broken("free " + std::to_string(s.free) + " + in use " + std::to_string(c.live) + " != usable " +
                  std::to_string(usable_blocks()));
  if (s.evictable > s.cached || s.evictable > s.free || s.hash_keys > s.cached)
    return broken("evictable <= cached, evictable <= free, hash_keys <= cached do not all hold");
  return Status::success();
}

replay::ReplaySummary run_prefix_replay(std::istream& in, std::ostream& out, const PrefixReplayOptions& options) {
  PrefixReplay replay(options);
  return replay::run_trace(in, out,
                           [&](const std::string& op, const nlohmann::json& line) { return replay.apply(op, line); });
}

}  // namespace kvrt
