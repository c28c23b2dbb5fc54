#include "tools/blocksize/decode_batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>

#include "services/common/digest.hpp"
#include "services/common/units.hpp"
#include "services/executor/chunk_attention.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/shared_prefix_ledger.hpp"

namespace kvrt::blocksize {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
double median_seconds(uint32_t trials, F&& once) {
  std::vector<double> t;
  for (uint32_t i = 0; i < std::max(trials, 1u); ++i) t.push_back(once());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

uint64_t mix_hash(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<uint64_t> prefix_hashes(const RunningRequest& r) {
  std::vector<uint64_t> h;
  h.reserve(r.tokens.size() + 1);
  h.push_back(mix_hash(0, std::hash<std::string>{}(r.salt)));
  for (TokenId t : r.tokens) h.push_back(mix_hash(h.back(), static_cast<uint32_t>(t)));
  return h;
}

Result<DecodeBatch> DecodeBatch::build(const std::vector<RunningRequest>& running,
                                       const std::unordered_map<uint32_t, uint64_t>& written, uint32_t block_tokens,
                                       const KernelTimingConfig& timing) {
  DecodeBatch b;
  b.running_ = &running;
  b.block_tokens_ = block_tokens;
  b.timing_ = timing;
  uint64_t rows = 0;
  for (size_t r = 0; r < running.size(); ++r) {
    const uint64_t T = running[r].tokens.size();
    if (!b.chosen_.empty() && rows + T > timing.max_rows) break;
    b.chosen_.push_back(r);
    rows += T;
  }
  std::unordered_map<uint32_t, uint32_t> slot_of;
  for (size_t r : b.chosen_) {
    std::vector<uint32_t>& slots = b.slots_.emplace_back();
    std::vector<uint32_t>& valid = b.valid_.emplace_back();
    for (uint32_t block : running[r].blocks) {
      slots.push_back(slot_of.emplace(block, static_cast<uint32_t>(slot_of.size())).first->second);
      valid.push_back(static_cast<uint32_t>(written.at(block)));
    }
  }
  if (timing.trials == 0) return b;
  const executor::PlainPoolShape shape{static_cast<uint32_t>(slot_of.size()),
                                       block_tokens,
                                       timing.kv_heads,
                                       timing.head_dim,
                                       timing.head_dim,
                                       ScalarType::fp32,
                                       ScalarType::fp32};
  b.k_.resize(shape.k_elements());
  b.v_.resize(shape.v_elements());
  for (size_t i = 0; i < b.k_.size(); ++i) b.k_[i] = static_cast<float>((i * 2654435761u) % 1024) / 1024.0f - 0.5f;
  for (size_t i = 0; i < b.v_.size(); ++i) b.v_[i] = static_cast<float>((i * 40503u) % 1024) / 1024.0f - 0.5f;
  Result<executor::PagedKvView> view = executor::plain_kv_view(
      shape,
      executor::KvTensorBytes{reinterpret_cast<const std::byte*>(b.k_.data()), b.k_.size() * 4, ScalarType::fp32},
      executor::KvTensorBytes{reinterpret_cast<const std::byte*>(b.v_.data()), b.v_.size() * 4, ScalarType::fp32});
  if (!view.ok()) return view.error();
  b.view_ = *view;
  return b;
}

double DecodeBatch::read_floor(uint64_t bytes) const {
  // A read-only pass over the pool's K and V as 64-bit words summed as
  // integers (order free, so the compiler vectorises it), scaled to `bytes`.
  volatile uint64_t sink = 0;  // keeps the sums from being optimised away
  auto words = [](const std::vector<float>& f) {
    return std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(f.data()), f.size() / 2);
  };
  const double seconds = median_seconds(timing_.trials, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t a = 0;
    for (uint64_t x : words(k_)) a += x;
    for (uint64_t x : words(v_)) a += x;
    sink = sink + a;
    return seconds_since(t0);
  });
  return seconds * static_cast<double>(bytes) / (4.0 * static_cast<double>(k_.size() + v_.size()));
}

Status DecodeBatch::time_paged(KernelTableCost& k) const {
  std::vector<executor::DecodeRequest> requests;
  for (size_t i = 0; i < chosen_.size(); ++i)
    requests.push_back(
        executor::DecodeRequest{executor::KvBlockTable{slots_[i], valid_[i], (*running_)[chosen_[i]].tokens.size()}});
  std::vector<float> q(chosen_.size() * timing_.q_heads * timing_.head_dim, 0.125f), out(q.size());
  const executor::DecodeArgs args{executor::HeadMapping{timing_.q_heads, timing_.kv_heads},
                                  requests,
                                  q,
                                  out,
                                  {},
                                  executor::AttentionOptions{k.kernel_block, 0}};
  Status failed = Status::success();
  k.step_seconds = median_seconds(timing_.trials, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    Result<executor::DecodeReceipt> rc = executor::paged_decode(view_, args);
    const double s = seconds_since(t0);
    if (!rc.ok()) {
      failed = rc.error();
      return s;
    }
    k.kernel_blocks = rc->kernel_blocks;
    k.kv_bytes = rc->kv_bytes;
    return s;
  });
  KVRT_TRY(failed);
  k.read_floor_seconds = read_floor(k.kv_bytes);
  k.timed_requests = chosen_.size();
  return Status::success();
}

Result<ChunkCost> DecodeBatch::chunks(uint32_t chunk_tokens) const {
  const std::vector<RunningRequest>& running = *running_;
  // Lexicographic order (salt first): the sequences sharing a chunk, which
  // share every token before its end, are consecutive.
  std::vector<size_t> order(chosen_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const RunningRequest& x = running[chosen_[a]];
    const RunningRequest& y = running[chosen_[b]];
    return std::tie(x.salt, x.tokens) < std::tie(y.salt, y.tokens);
  });
  executor::ExecutionSnapshot snapshot;
  snapshot.tree_version = 1;
  snapshot.tree_state_digest = sha256(std::string_view("kvrt blocksize decode batch"));
  snapshot.contract = executor::ExecutionContract{executor::HeadMapping{timing_.q_heads, timing_.kv_heads},
                                                  timing_.head_dim,
                                                  timing_.head_dim,
                                                  ScalarType::fp32,
                                                  ScalarType::fp32,
                                                  1};
  // A chunk is identified by the sequence content through its end, (salt,
  // tokens [0, end)), by hash; its rows are read from the blocks of the
  // first sequence that reads it (in a runtime with exact reuse the sharing
  // sequences' rows are equal, 0x0BB).
  std::unordered_map<uint64_t, uint32_t> chunk_of;
  for (size_t i : order) {
    const RunningRequest& r = running[chosen_[i]];
    const std::vector<uint64_t> h = prefix_hashes(r);
    executor::SnapshotSequence seq{RequestId{i + 1}, TableVersion{1}, r.tokens.size(), {}};
    for (uint64_t a = 0; a < r.tokens.size(); a += chunk_tokens) {
      const uint64_t e = std::min<uint64_t>(r.tokens.size(), a + chunk_tokens);
      auto [it, fresh] = chunk_of.emplace(mix_hash(h[e], e), static_cast<uint32_t>(snapshot.chunks.size()));
      if (fresh) {
        executor::SnapshotChunk c;
        c.name = "c";  // (one append: GCC 12's -Wrestrict misreads "c" + to_string at -O3)
        c.name += std::to_string(snapshot.chunks.size());
        c.identity = sha256(std::string_view(c.name));
        c.first_position = a;
        for (uint64_t pos = a; pos < e;) {
          const uint64_t block = pos / block_tokens_;
          const uint64_t end = std::min<uint64_t>(e, (block + 1) * block_tokens_);
          c.runs.push_back(executor::KvRowRun{slots_[i][block], static_cast<uint32_t>(pos - block * block_tokens_),
                                              static_cast<uint32_t>(end - pos), valid_[i][block]});
          pos = end;
        }
        snapshot.chunks.push_back(std::move(c));
      }
      seq.path.push_back(it->second);
    }
    snapshot.sequences.push_back(std::move(seq));
  }
  KVRT_TRY(snapshot.assign_coverage());
  KVRT_TRY(snapshot.validate());
  const uint64_t kv_row_bytes = 2ull * timing_.head_dim * 4;
  const executor::SharedPrefixLedger ledger =
      executor::shared_prefix_ledger(snapshot, executor::LedgerWidths{kv_row_bytes, 4, 4});
  ChunkCost cost;
  cost.chunk_tokens = chunk_tokens;
  cost.sequences = snapshot.sequences.size();
  cost.chunks = ledger.chunks;
  cost.ordinary_visits = executor::ordinary_chunk_visits(snapshot, chunk_tokens);
  cost.materialised_chunks = ledger.materialised_chunks;
  cost.partial_rows = ledger.partial_rows;
  cost.partial_bytes = ledger.partial_bytes * timing_.q_heads;
  cost.saved_reads = ledger.saved_reads;
  if (timing_.trials == 0) return cost;
  std::vector<float> q(snapshot.sequences.size() * timing_.q_heads * timing_.head_dim, 0.125f), out(q.size());
  const executor::SharedPrefixArgs args{
      &snapshot, snapshot.fence(), executor::HeadMapping{timing_.q_heads, timing_.kv_heads}, q, out, {}};
  Status failed = Status::success();
  cost.step_seconds = median_seconds(timing_.trials, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    Result<executor::SharedPrefixReceipt> rc = executor::chunk_attention(view_, args);
    const double s = seconds_since(t0);
    if (!rc.ok()) failed = rc.error();
    return s;
  });
  KVRT_TRY(failed);
  KernelTableCost paged;
  paged.kernel_block = block_tokens_;
  KVRT_TRY(time_paged(paged));
  cost.paged_step_seconds = paged.step_seconds;
  return cost;
}

}  // namespace kvrt::blocksize
