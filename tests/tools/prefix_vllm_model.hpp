#pragma once
// An independent, literal model of vLLM v1's prefix cache (BlockPool +
// KVCacheManager, single full-attention group) as docs/replay-format.md
// describes it, written the way vllm/v1/core/block_pool.py reads: blocks with
// ref_cnt and an optional block hash, one free queue (front = next to take),
// and a hash -> blocks map in insertion order. A block's "hash" here is its
// meaning (salt, lora, whole token prefix), so nothing is hashed. The
// `kvrt replay prefix --profile vllm` output must equal this model's output
// line for line (prefix_replay_test.cpp).
//
// It answers only well-formed lines; a line it cannot answer gets {"error": true}
// and the test compares only that an error was printed.
#include <algorithm>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace kvrt::test {

class VllmPrefixModel {
 public:
  VllmPrefixModel() { configure(16, 64, 16 * 64); }

  bool running(const std::string& id) const { return running_.count(id) != 0; }

  nlohmann::ordered_json apply(const nlohmann::json& line) {
    nlohmann::ordered_json out;
    const std::string op = line.value("op", "");
    if (op == "config") {
      const int64_t P = line.value("block_size", int64_t{16}), n = line.value("num_blocks", int64_t{64});
      configure(P, n, line.value("max_model_len", P * n));
      out["usable_blocks"] = n - 1;
    } else if (op == "request") {
      request(line, out);
    } else if (op == "decode") {
      decode(line, out);
    } else if (op == "free") {
      auto it = running_.find(line.at("id").get<std::string>());
      if (it == running_.end()) {
        out["skipped"] = true;
      } else {
        out["num_tokens"] = it->second.tokens.size();
        free_blocks(it->second.blocks);
        running_.erase(it);
      }
    } else if (op == "probe") {
      const auto tokens = line.at("tokens").get<std::vector<int64_t>>();
      out["hit_tokens"] = hits(tokens, line.value("salt", ""), line.value("lora", "")).size() * P_;
    } else if (op == "reset") {
      const bool in_use = std::any_of(blocks_.begin() + 1, blocks_.end(), [](const Block& b) { return b.ref > 0; });
      if (!in_use) {
        cached_.clear();
        for (Block& b : blocks_) b.hash.reset();
      }
      out["ok"] = !in_use;
    }
    size_t cached = 0, evictable = 0;
    for (size_t i = 1; i < blocks_.size(); ++i)
      if (blocks_[i].hash) {
        ++cached;
        evictable += blocks_[i].ref == 0;
      }
    out["free"] = free_queue_.size();
    out["cached"] = cached;
    out["evictable"] = evictable;
    out["hash_keys"] = cached_.size();
    out["running"] = running_.size();
    return out;
  }

 private:
  using Hash = std::tuple<std::string, std::string, std::vector<int64_t>>;  // salt, lora, prefix
  struct Block {
    int ref = 0;
    std::optional<Hash> hash;
  };
  struct Request {
    std::vector<int64_t> tokens;
    std::string salt, lora;
    std::vector<int> blocks;
  };

  void configure(int64_t P, int64_t n, int64_t max_model_len) {
    P_ = static_cast<size_t>(P);
    max_model_len_ = static_cast<size_t>(max_model_len);
    blocks_.assign(static_cast<size_t>(n), Block{});
    free_queue_.clear();
    for (int i = 1; i < n; ++i) free_queue_.push_back(i);  // block 0 is the null block
    cached_.clear();
    running_.clear();
  }

  Hash hash_of(const std::vector<int64_t>& tokens, size_t block, const std::string& salt,
               const std::string& lora) const {
    return Hash{salt, lora,
                std::vector<int64_t>(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>((block + 1) * P_))};
  }

  // find_longest_cache_hit with max_cache_hit_length = len - 1.
  std::vector<int> hits(const std::vector<int64_t>& tokens, const std::string& salt, const std::string& lora) const {
    std::vector<int> out;
    const size_t max_blocks = (tokens.size() - 1) / P_;
    for (size_t j = 0; j < max_blocks; ++j) {
      auto it = cached_.find(hash_of(tokens, j, salt, lora));
      if (it == cached_.end()) break;
      out.push_back(it->second.front());  // the earliest inserted surviving block
    }
    return out;
  }

  // get_new_blocks: pop the front, drop its hash (_maybe_evict_cached_block).
  int take_block(size_t& evicted) {
    const int id = free_queue_.front();
    free_queue_.pop_front();
    Block& b = blocks_[static_cast<size_t>(id)];
    if (b.hash) {
      auto& list = cached_[*b.hash];
      list.erase(std::find(list.begin(), list.end(), id));
      if (list.empty()) cached_.erase(*b.hash);
      b.hash.reset();
      ++evicted;
    }
    b.ref = 1;
    return id;
  }

  void publish(Request& r, size_t block) {
    const int id = r.blocks[block];
    const Hash h = hash_of(r.tokens, block, r.salt, r.lora);
    blocks_[static_cast<size_t>(id)].hash = h;
    cached_[h].push_back(id);
  }

  // free_blocks(reversed(req_blocks)): tail first, zero-ref blocks to the back.
  void free_blocks(const std::vector<int>& blocks) {
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
      Block& b = blocks_[static_cast<size_t>(*it)];
      if (--b.ref == 0) free_queue_.push_back(*it);
    }
  }

  void request(const nlohmann::json& line, nlohmann::ordered_json& out) {
    Request r;
    r.tokens = line.at("tokens").get<std::vector<int64_t>>();
    r.salt = line.value("salt", "");
    r.lora = line.value("lora", "");
    const std::vector<int> hit = hits(r.tokens, r.salt, r.lora);
    out["hit_tokens"] = hit.size() * P_;
    const size_t blocks = (r.tokens.size() + P_ - 1) / P_;
    size_t needed = blocks - hit.size();
    for (int id : hit) needed += blocks_[static_cast<size_t>(id)].ref == 0;
    if (r.tokens.size() > max_model_len_ || needed > free_queue_.size()) {
      out["admitted"] = false;
      out["new_blocks"] = 0;
      out["evicted"] = 0;
      return;
    }
    for (int id : hit) {  // touch: revive, off the free queue
      Block& b = blocks_[static_cast<size_t>(id)];
      if (b.ref++ == 0) free_queue_.erase(std::find(free_queue_.begin(), free_queue_.end(), id));
      r.blocks.push_back(id);
    }
    size_t evicted = 0;
    for (size_t j = hit.size(); j < blocks; ++j) r.blocks.push_back(take_block(evicted));
    for (size_t j = hit.size(); j < r.tokens.size() / P_; ++j) publish(r, j);
    out["admitted"] = true;
    out["new_blocks"] = blocks - hit.size();
    out["evicted"] = evicted;
    out["block_ids"] = r.blocks;
    running_[line.at("id").get<std::string>()] = std::move(r);
  }

  void decode(const nlohmann::json& line, nlohmann::ordered_json& out) {
    auto it = running_.find(line.at("id").get<std::string>());
    if (it == running_.end()) {
      out["skipped"] = true;
      return;
    }
    Request& r = it->second;
    size_t decoded = 0, new_blocks = 0, evicted = 0;
    bool preempted = false;
    for (int64_t t : line.at("tokens").get<std::vector<int64_t>>()) {
      if (r.tokens.size() >= max_model_len_) break;
      if (r.tokens.size() % P_ == 0) {
        if (free_queue_.empty()) {
          preempted = true;
          break;
        }
        r.blocks.push_back(take_block(evicted));
        ++new_blocks;
      }
      r.tokens.push_back(t);
      ++decoded;
      if (r.tokens.size() % P_ == 0) publish(r, r.tokens.size() / P_ - 1);
    }
    out["decoded"] = decoded;
    out["new_blocks"] = new_blocks;
    out["preempted"] = preempted;
    out["evicted"] = evicted;
    if (preempted) {
      free_blocks(r.blocks);
      running_.erase(it);
    } else {
      out["block_ids"] = r.blocks;
    }
  }

  size_t P_ = 16, max_model_len_ = 0;
  std::vector<Block> blocks_;
  std::list<int> free_queue_;
  std::map<Hash, std::vector<int>> cached_;
  std::map<std::string, Request> running_;
};

}  // namespace kvrt::test
