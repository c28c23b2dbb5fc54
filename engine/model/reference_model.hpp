#pragma once
// The reference model of `kvrt run`: a small deterministic
// decoder-only transformer on the CPU whose K/V rows are real, depend on the
// whole prefix, and live in kvrt's pools. No weights are downloaded: every
// weight is drawn from ModelConfig::seed.
//
// Shape. Layer count, K/V heads and head width of every layer come from the
// cache layout manifest (the group that holds the layer, 0x01A), so the model
// writes exactly the rows the pools were laid out for, in the manifest's
// K/V dtypes (widened exactly when read). Query heads per layer are
// H_q = G * H_kv (GQA, G = q_heads_per_kv); d_model is a config value, and
// each layer projects d_model -> H_q*d (Q), H_kv*d (K, V) and H_q*d -> d_model.
// Positions use RoPE (rotate-half convention, theta from config) on Q and K
// before K is stored. Pre-norm (RMSNorm) residual blocks, a ReLU MLP of
// mlp_dim, tied-free output projection to vocab logits; greedy decoding.
//
// Attention goes through the executor's paged kernels reading the cache
// (services/executor/paged_prefill.hpp): the model first writes a chunk's K/V
// rows for a layer, then attends causally over [0, position] of every row.
//
// Batch invariance (why reuse can be judged bitwise). A row's K/V bytes and
// the last row's logits are a function of the sequence's tokens only: not of
// how its rows were split into forward() calls (a reused prefix, a prefill
// suffix, single decode rows), not of the other sequences in the batch, not
// of the thread count. Every projection accumulates in one fixed order per
// row, and the attention call uses fixed kernel options (documented in the
// .cpp with the reason). tests/model_test.cpp proves it bitwise.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_kv_cache.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::executor {
class ThreadPool;
}

namespace kvrt::model {

struct ModelConfig {
  uint64_t seed = 1;            // weights are drawn from it
  uint32_t vocab = 256;         // token ids [0, vocab) [tokens]
  uint32_t d_model = 64;        // residual width [scalars]
  uint32_t q_heads_per_kv = 2;  // G of GQA; H_q = G * H_kv per layer
  uint32_t mlp_dim = 128;       // MLP hidden width [scalars]
  double rope_theta = 10000.0;  // RoPE base
  uint32_t threads = 1;         // executor worker threads (results do not depend on it)
};

// Reads the [model] table of a TOML file (every key optional, defaults above).
// Errors: config_parse / config_field naming file, line and field.
Result<ModelConfig> load_model_config(const std::string& path);
// The same from TOML text already in memory (`origin` names it in errors).
Result<ModelConfig> parse_model_config(std::string_view text, const std::string& origin);

// One sequence's slice of work for forward(): rows [first_row, tokens.size())
// are computed and written into the cache at the sequence's blocks; rows
// [0, first_row) must already be there (reused or computed earlier).
//
// Position ids (Prompt Cache, 0x0CB): row r of the sequence is stored at
// row r of its table, and rotated by RoPE at positions[r], or at r when
// `positions` is empty. A prompt assembled from declared modules stores
// its segments one after another while its position ids jump over the
// schema's gaps; a module computed at positions [100, 164) has other K/V
// bits than the same text at [0, 64), which is why it is reused only there.
struct ForwardChunk {
  ForwardChunk() = default;
  ForwardChunk(const SequenceBlocks* b, std::span<const TokenId> t, uint32_t first, std::span<const uint32_t> p = {})
      : blocks(b), tokens(t), first_row(first), positions(p) {}
  const SequenceBlocks* blocks = nullptr;  // the sequence's table in every group
  std::span<const TokenId> tokens;         // the whole sequence so far [tokens]
  uint32_t first_row = 0;                  // [tokens]
  std::span<const uint32_t> positions;     // empty, or one increasing position id per token [positions]
};

// What shared-prefix execution read, summed over layers [K/V token rows],
// from the executor's ledger of each executed snapshot (0x0BE):
struct SharedPrefixReads {
  uint64_t shared_rows_read_once = 0;    // shared_rows x layers, once per call
  uint64_t shared_rows_per_request = 0;  // what per-request attention would read: shared_rows x layers x chunks
};

class ReferenceModel {
 public:
  // Errors: config_field for a zero or inconsistent size (vocab, d_model,
  // q_heads_per_kv, mlp_dim, rope_theta), layout_mismatch-family error when
  // the manifest is not valid or has tp_world_size != 1.
  static Result<ReferenceModel> create(const ModelConfig& config, const CacheLayoutManifest& layout);

  // Computes the chunks' rows, writes their K/V into `cache`, and returns the
  // logits of each chunk's last row ([chunk][vocab]). Every argument is
  // checked before the first write (empty chunk, token out of vocab, a table
  // too short for tokens.size() rows in some group, a slot outside the cache):
  // a typed error names the chunk and field, and nothing is written.
  Result<std::vector<std::vector<float>>> forward(ModelKvCache& cache, std::span<const ForwardChunk> chunks) const;

  // Shared-prefix decode (spec 0x0BC; many questions over one document):
  // one decode row per chunk (first_row == tokens.size() - 1), where every
  // chunk's table holds the SAME slots for logical blocks
  // [0, shared_rows / P_a) in every group. Per layer, one ExecutionSnapshot
  // (one shared chunk of rows [0, shared_rows) covering every sequence, one
  // private chunk per sequence of rows [shared_rows, context); the layers of
  // a cache group share one, built from its tables) runs through
  // executor::hydragen_attention, so the shared K/V is read once for the
  // batch. Writes the new K/V rows like forward() and returns each chunk's
  // logits. Not bitwise equal to forward(): the LSE merge rounds differently
  // from the monolithic tile kernel (bounds: shared_prefix_decode.cpp). Its
  // results do not depend on the thread count or on the other sequences.
  // Errors (before any write): those of forward(); invalid_argument when
  // fewer than 2 chunks are given ("chunks"), when a chunk is not a single
  // decode row ("chunks[c].first_row"), when shared_rows is 0, not a multiple
  // of P_a, or > some chunk's first_row ("shared_rows"); incompatible
  // ("shared_rows") when the tables do not share those blocks physically.
  // `reads`, when given, receives the call's shared-row reads (on success only).
  Result<std::vector<std::vector<float>>> forward_shared_prefix(ModelKvCache& cache,
                                                                std::span<const ForwardChunk> chunks,
                                                                uint32_t shared_rows,
                                                                SharedPrefixReads* reads = nullptr) const;

  // Decode whose attention over the committed rows runs elsewhere (the
  // node's executor owner, 0x0BA-0x0BD): one decode row per chunk
  // (first_row == tokens.size() - 1 >= 1). Per layer, after the new rows'
  // K/V are stored, `committed` receives the layer's queries
  // ([chunks][H_q][d_h]) and must write each chunk's attention over its rows
  // [0, first_row) as outputs ([chunks][H_q][d_h]) and natural-log LSEs
  // ([chunks][H_q]); the model then merges each chunk's new row, read back
  // from the cache, as a one-key partition with the exact LSE merge (0x0BA).
  // Bounded against forward() as forward_shared_prefix() is
  // (shared_prefix_decode.cpp), never bitwise. An error `committed` returns
  // ends the pass with that error; the new rows' K/V of the layers run so far
  // stay written (a later forward() over the same rows writes the same bits).
  // Errors (before any write): those of forward(); invalid_argument when a
  // chunk is not a single decode row after at least one committed row
  // ("chunks[c].first_row").
  using CommittedAttention = std::function<Status(uint32_t layer, std::span<const float> queries,
                                                  std::span<float> outputs, std::span<float> lse)>;
  Result<std::vector<std::vector<float>>> forward_decode_merged(ModelKvCache& cache,
                                                                std::span<const ForwardChunk> chunks,
                                                                const CommittedAttention& committed) const;

  const ModelConfig& config() const;
  uint32_t layer_count() const;
  // Multiply-adds of one token row, for progress and throughput figures [MAC / token].
  uint64_t macs_per_token() const;

  ReferenceModel(ReferenceModel&&) noexcept;
  ReferenceModel& operator=(ReferenceModel&&) noexcept;
  ~ReferenceModel();

 private:
  struct Weights;
  ReferenceModel(ModelConfig config, CacheLayoutManifest layout, std::unique_ptr<Weights> weights);
  ModelConfig config_;
  CacheLayoutManifest layout_;
  std::unique_ptr<Weights> weights_;
  // config.threads workers (1: the calling thread only); forward() shares it
  // (ThreadPool serialises concurrent callers).
  std::unique_ptr<executor::ThreadPool> threads_;
};

// Greedy choice: the largest logit, the lowest token id on a tie (a NaN
// ranks below every number). logits must not be empty (KVRT_ASSERT).
TokenId greedy_token(std::span<const float> logits);
// The k best token ids in order (ties by lowest id): a fork's branch b starts
// from ranked_tokens(logits, n)[b] and then decodes greedily (beam-style).
// Returns min(k, logits.size()) ids; element 0 is greedy_token(logits).
std::vector<TokenId> ranked_tokens(std::span<const float> logits, uint32_t k);

}  // namespace kvrt::model
