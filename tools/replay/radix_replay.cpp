#include "tools/replay/radix_replay.hpp"

#include <algorithm>
#include <unordered_map>

namespace kvrt {

using replay::FieldReader;
using replay::OpOutcome;
using replay::OutFields;
using replay::ReplayError;
using replay::ReplayErrorType;

namespace {

RadixOptions default_options(RadixReplayProfile profile) {
  RadixOptions o;
  o.page_size = 1;
  o.eviction = EvictionPolicy::lru;
  o.count_hits = profile == RadixReplayProfile::kvrt;
  return o;
}

nlohmann::ordered_json slot_list(const std::vector<TokenSlotId>& slots) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (TokenSlotId s : slots) a.push_back(s.value);
  return a;
}

}  // namespace

Result<RadixReplayProfile> parse_radix_replay_profile(std::string_view name) {
  if (name == "sglang") return RadixReplayProfile::sglang;
  if (name == "kvrt") return RadixReplayProfile::kvrt;
  return make_error(ErrorCode::invalid_argument,
                    "unknown radix replay profile '" + std::string(name) + "' (expected sglang or kvrt)", "profile");
}

RadixReplay::RadixReplay(const RadixReplayOptions& options)
    : options_(options), tree_(RadixTree::create(default_options(options.profile)).value()) {}

uint64_t RadixReplay::extra_key_id(const std::optional<std::string>& extra) {
  // Absent (or null) and "" are different keys, as None and "" in SGLang.
  if (!extra) return 0;
  return extra_keys_.try_emplace(*extra, extra_keys_.size() + 1).first->second;
}

std::vector<TokenId> RadixReplay::token_ids(const std::vector<int64_t>& values) {
  std::vector<TokenId> ids(values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const auto next = static_cast<TokenId>(token_ids_.size());
    KVRT_ASSERT(token_ids_.size() < static_cast<size_t>(INT32_MAX), "more than 2^31 distinct token values");
    ids[k] = token_ids_.try_emplace(values[k], next).first->second;
  }
  return ids;
}

void RadixReplay::append_state(OutFields& out) const {
  const RadixLedger& l = tree_.ledger();
  out["evictable"] = l.evictable_tokens;
  out["protected"] = l.protected_tokens;
  out["total"] = l.total_tokens;
  out["nodes"] = l.nodes;
}

OpOutcome RadixReplay::apply(const std::string& op, const nlohmann::json& line) {
  FieldReader f(line);
  OpOutcome outcome = op == "config"   ? config(f)
                      : op == "insert" ? insert(f)
                      : op == "match"  ? match(f)
                      : op == "lock"   ? lock(f)
                      : op == "unlock" ? unlock(f)
                      : op == "evict"  ? evict(f, false)
                      : op == "trim"   ? evict(f, true)
                      : op == "reset"
                          ? reset()
                          : OpOutcome{ReplayError{ReplayErrorType::unknown_op, "radix replay has no op '" + op + "'"}};
  if (auto* fields = std::get_if<OutFields>(&outcome)) append_state(*fields);
  return outcome;
}

OpOutcome RadixReplay::config(FieldReader& f) {
  RadixOptions o = default_options(options_.profile);
  const std::optional<int64_t> page = f.optional_integer("page_size");
  const std::optional<std::string> policy = f.optional_string("eviction_policy");
  if (!f.ok()) return f.error();
  if (page) {
    if (options_.profile == RadixReplayProfile::sglang && *page != 1)
      return ReplayError{ReplayErrorType::invalid_value, "profile sglang replays page_size 1 only"};
    if (*page < 1 || *page > 65536)
      return ReplayError{ReplayErrorType::invalid_value, "page_size must be in [1, 65536] tokens"};
    o.page_size = static_cast<uint32_t>(*page);
  }
  if (policy) {
    const Result<EvictionPolicy> p = parse_eviction_policy(*policy);
    if (!p.ok()) return ReplayError{ReplayErrorType::invalid_value, p.error().reason};
    o.eviction = *p;
  }
  tree_ = RadixTree::create(o).value();  // options checked above
  handles_.clear();
  return OutFields::object();
}

OpOutcome RadixReplay::reset() {
  tree_.reset();
  handles_.clear();
  return OutFields::object();
}

OpOutcome RadixReplay::insert(FieldReader& f) {
  const std::vector<int64_t> tokens = f.integer_list("tokens");
  const std::optional<std::string> extra = f.optional_string("extra_key");
  const int64_t priority = f.optional_integer("priority").value_or(0);
  if (!f.ok()) return f.error();
  // FORMAT.md: each insert takes len(tokens) fresh slot ids, consecutive
  // over the whole trace; the duplicates of the cached prefix (and, with
  // pages, the unaligned tail) go back to the pool.
  std::vector<TokenSlotId> slots(tokens.size());
  for (auto& s : slots) s = TokenSlotId{next_slot_++};
  const std::vector<TokenId> ids = token_ids(tokens);
  const RadixInsertResult r = tree_.insert(RadixKeyView{ids, extra_key_id(extra)}, slots, priority).value();
  OutFields out;
  out["prefix_len"] = r.prefix_len;
  out["inserted"] = r.inserted;
  return out;
}

OpOutcome RadixReplay::match(FieldReader& f) {
  const std::vector<int64_t> tokens = f.integer_list("tokens");
  const std::optional<std::string> extra = f.optional_string("extra_key");
  if (!f.ok()) return f.error();
  const std::vector<TokenId> ids = token_ids(tokens);
  std::vector<TokenSlotId> slots;
  const RadixMatchResult m = tree_.match(RadixKeyView{ids, extra_key_id(extra)}, options_.indices ? &slots : nullptr);
  OutFields out;
  out["matched"] = m.matched;
  if (options_.indices) out["indices"] = slot_list(slots);
  return out;
}

OpOutcome RadixReplay::lock(FieldReader& f) {
  const std::vector<int64_t> tokens = f.integer_list("tokens");
  const std::optional<std::string> extra = f.optional_string("extra_key");
  std::optional<std::string> name = f.optional_string("handle");
  if (!f.ok()) return f.error();
  if (name && handles_.contains(*name))
    return ReplayError{ReplayErrorType::handle_in_use, "handle '" + *name + "' is already locked; unlock it first"};
  if (!name) {
    // Auto handles h1, h2, ... skip names the trace chose itself.
    do
      name = std::string("h").append(std::to_string(++auto_handles_));  // (g++ 12 -Wrestrict false positive on "h" + s)
    while (handles_.contains(*name));
  }
  const uint64_t extra_id = extra_key_id(extra);
  const std::vector<TokenId> ids = token_ids(tokens);
  std::vector<TokenSlotId> slots;
  const RadixMatchResult m = tree_.match(RadixKeyView{ids, extra_id}, options_.indices ? &slots : nullptr);
  const int64_t delta = tree_.inc_lock(m.terminal).value();  // live: just returned by match
  handles_.emplace(*name, Handle{m.terminal, tokens, extra_id, ++handle_sequence_});
  OutFields out;
  out["matched"] = m.matched;
  out["delta"] = delta;
  out["handle"] = *name;
  if (options_.indices) out["indices"] = slot_list(slots);
  return out;
}

OpOutcome RadixReplay::unlock(FieldReader& f) {
  const std::optional<std::string> name = f.optional_string("handle");
  if (!f.ok()) return f.error();
  auto it = handles_.end();
  if (name) {
    it = handles_.find(*name);
    if (it == handles_.end())
      return ReplayError{ReplayErrorType::unknown_handle, "handle '" + *name + "' is not locked"};
  } else {
    if (!f.has("tokens")) return ReplayError{ReplayErrorType::missing_field, "unlock needs 'handle' or 'tokens'"};
    const std::vector<int64_t> tokens = f.integer_list("tokens");
    const std::optional<std::string> extra = f.optional_string("extra_key");
    if (!f.ok()) return f.error();
    // Unlock by tokens never creates an extra-key id: an unknown key matches no lock.
    const auto key = extra ? extra_keys_.find(*extra) : extra_keys_.end();
    const uint64_t extra_id = !extra ? 0 : key == extra_keys_.end() ? UINT64_MAX : key->second;
    for (auto h = handles_.begin(); h != handles_.end(); ++h)
      if (h->second.tokens == tokens && h->second.extra_key == extra_id &&
          (it == handles_.end() || h->second.sequence > it->second.sequence))
        it = h;
    if (it == handles_.end())
      return ReplayError{ReplayErrorType::unknown_handle, "no lock is held with these tokens and extra_key"};
  }
  const int64_t delta = tree_.dec_lock(it->second.terminal).value();  // a held handle's node is live and locked
  OutFields out;
  out["delta"] = delta;
  out["handle"] = it->first;
  handles_.erase(it);
  return out;
}

OpOutcome RadixReplay::evict(FieldReader& f, bool trim) {
  const int64_t amount = f.integer(trim ? "max_total" : "n");
  if (!f.ok()) return f.error();
  if (amount < 0 && options_.profile == RadixReplayProfile::kvrt)
    return ReplayError{ReplayErrorType::invalid_value, std::string(trim ? "max_total" : "n") + " must be >= 0 tokens"};
  int64_t requested = amount;
  if (trim) {
    const auto total = static_cast<int64_t>(tree_.ledger().total_tokens);
    requested = std::max<int64_t>(0, total - amount);
  }
  const RadixEvictResult r = tree_.evict(requested > 0 ? static_cast<uint64_t>(requested) : 0);
  OutFields out;
  out["requested"] = requested;
  out["evicted"] = r.evicted_tokens;
  return out;
}

Status RadixReplay::validate() const {
  KVRT_TRY(tree_.validate());
  std::unordered_map<uint64_t, uint32_t> through;  // node id -> handles whose path contains it
  for (const auto& [name, h] : handles_) {
    if (!tree_.is_live(h.terminal))
      return make_error(ErrorCode::invariant_violated, "handle '" + name + "' names an evicted node", "validate");
    for (RadixNodeRef v = h.terminal; !v.is_root(); v = tree_.parent_of(v)) ++through[v.id.value];
  }
  Status status;
  tree_.for_each_node([&](RadixNodeRef, const RadixNode& n) {
    const auto it = through.find(n.id.value);
    const uint32_t expected = it == through.end() ? 0 : it->second;
    if (status.ok() && n.lock_count != expected)
      status = make_error(ErrorCode::invariant_violated,
                          "node " + std::to_string(n.id.value) + " lock count differs from the handles through it",
                          "validate");
  });
  return status;
}

replay::ReplaySummary run_radix_replay(std::istream& in, std::ostream& out, const RadixReplayOptions& options) {
  RadixReplay state(options);
  return replay::run_trace(in, out,
                           [&](const std::string& op, const nlohmann::json& line) { return state.apply(op, line); });
}

}  // namespace kvrt
