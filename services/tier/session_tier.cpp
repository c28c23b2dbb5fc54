#include "services/tier/session_tier.hpp"

#include <algorithm>
#include <filesystem>

#include "services/reuse/reuse_evidence.hpp"
#include "services/tier/session_object_file.hpp"

namespace kvrt {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view kObjectSuffix = ".kvses";

bool is_object_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(kObjectSuffix) || name.ends_with(std::string(kObjectSuffix) + ".tmp");
}

std::string short_hex(const Sha256Digest& d) { return d.hex().substr(0, 12); }
}  // namespace

std::string_view to_string(SessionTierRefusal r) {
  switch (r) {
    case SessionTierRefusal::no_saved_history:
      return "no_saved_history";
    case SessionTierRefusal::namespace_rotated:
      return "namespace_rotated";
    case SessionTierRefusal::semantic_changed:
      return "semantic_changed";
    case SessionTierRefusal::layout_changed:
      return "layout_changed";
    case SessionTierRefusal::position_contract_changed:
      return "position_contract_changed";
    case SessionTierRefusal::history_not_prefix:
      return "history_not_prefix";
    case SessionTierRefusal::incomplete_save:
      return "incomplete_save";
  }
  return "unknown";
}

RejectionReason reason_of(SessionTierRefusal r) {
  switch (r) {
    case SessionTierRefusal::no_saved_history:
      return RejectionReason::no_candidate;
    case SessionTierRefusal::namespace_rotated:
      return RejectionReason::stale_candidate_generation;
    case SessionTierRefusal::semantic_changed:
      return RejectionReason::semantic_mismatch;
    case SessionTierRefusal::layout_changed:
      return RejectionReason::layout_mismatch;
    case SessionTierRefusal::position_contract_changed:
    case SessionTierRefusal::history_not_prefix:
    case SessionTierRefusal::incomplete_save:
      return RejectionReason::session_interval_mismatch;
  }
  return RejectionReason::no_candidate;
}

Sha256Digest session_tokens_digest(std::span<const TokenId> tokens) {
  std::vector<uint32_t> ids(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ids[i] = static_cast<uint32_t>(tokens[i]);
  return covered_tokens_digest(ids);
}

Result<SessionTier> SessionTier::open(const SessionTierConfig& config) {
  if (config.directory.empty()) return make_error(ErrorCode::invalid_argument, "no tier directory", "directory");
  if (config.budget_bytes == 0) return make_error(ErrorCode::invalid_argument, "a budget of 0 bytes", "budget_bytes");
  std::error_code ec;
  fs::create_directories(config.directory, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create " + config.directory + ": " + ec.message(), "directory");
  // A previous owner's objects (and any save it did not finish) go: the
  // tier starts empty with the node.
  for (const fs::directory_entry& e : fs::directory_iterator(config.directory, ec))
    if (e.is_regular_file() && is_object_file(e.path())) fs::remove(e.path(), ec);
  if (ec) return make_error(ErrorCode::io, "cannot clean " + config.directory + ": " + ec.message(), "directory");
  return SessionTier(config);
}

std::string SessionTier::key_of(const SessionHistoryIdentity& id) {
  // One object per (tenant, namespace, session): a later save replaces it.
  CanonicalWriter w("kvrt.SessionTierKey.v1");
  w.str("tenant", id.tenant_id).str("namespace", id.namespace_id).str("session", id.session_id);
  return w.finish().hex();
}

std::string SessionTier::path_of(const std::string& file) const {
  return (fs::path(config_.directory) / file).string();
}

void SessionTier::remove(std::map<std::string, ObjectRecord>::iterator it) {
  std::error_code ec;
  fs::remove(path_of(it->second.file), ec);
  bytes_ -= it->second.bytes;
  objects_.erase(it);
}

Result<SessionReuseReceipt> SessionTier::demote(const SessionHistory& h) {
  const uint64_t H = h.tokens.size();
  if (H == 0) return make_error(ErrorCode::invalid_argument, "an empty history", "tokens");
  if (h.group_rows.empty()) return make_error(ErrorCode::invalid_argument, "no cache group's rows", "group_rows");
  for (size_t g = 0; g < h.group_rows.size(); ++g)
    if (h.group_rows[g].empty() || h.group_rows[g].size() % H != 0)
      return make_error(ErrorCode::invalid_argument,
                        "group " + std::to_string(g) + " holds " + std::to_string(h.group_rows[g].size()) +
                            " bytes, not " + std::to_string(H) + " rows of one size",
                        "group_rows");
  const std::string key = key_of(h.identity);
  std::string file = key.substr(0, 32);
  file += "-";
  file += std::to_string(publications_ + 1);
  file += kObjectSuffix;
  // The file's size is the encoded size; checked against the budget before anything moves.
  const std::vector<uint8_t> encoded = encode_session_object(h);
  const uint64_t size = encoded.size();
  if (size > config_.budget_bytes)
    return make_error(ErrorCode::invalid_argument,
                      "a history of " + std::to_string(size) + " bytes is larger than the tier's budget of " +
                          std::to_string(config_.budget_bytes),
                      "budget_bytes");
  KVRT_TRY(write_session_object(path_of(file), h));
  ++publications_;
  // The new save replaces the session's older one, then the budget evicts
  // least recently used objects (never the one just saved).
  if (auto old = objects_.find(key); old != objects_.end()) remove(old);
  ObjectRecord record{h.identity, H, size, file, publications_, ++clock_, session_tokens_digest(h.tokens)};
  objects_[key] = record;
  bytes_ += size;
  while (bytes_ > config_.budget_bytes) {
    auto victim = objects_.end();
    for (auto it = objects_.begin(); it != objects_.end(); ++it)
      if (it->first != key && (victim == objects_.end() || it->second.last_use < victim->second.last_use)) victim = it;
    if (victim == objects_.end()) break;  // only the new save: it fits (checked above)
    remove(victim);
    ++stats_.evicted;
  }
  ++stats_.demotions;
  stats_.demoted_bytes += size;
  SessionReuseReceipt r;
  r.session_id = h.identity.session_id;
  r.tenant_id = h.identity.tenant_id;
  r.namespace_id = h.identity.namespace_id;
  r.namespace_generation = h.identity.namespace_generation;
  r.semantic_digest = h.identity.semantic_digest;
  r.layout_digest = h.identity.layout_digest;
  r.covered_interval = TokenInterval{0, static_cast<uint32_t>(H)};
  r.covered_tokens_digest = record.tokens_digest;
  r.position_truncation_contract = h.identity.position_truncation_contract;
  r.publication_generation = publications_;
  r.source_tier_object_id = file;
  r.resume_prefill_tokens = 0;
  return r;
}

SessionTierStats SessionTier::stats() const {
  SessionTierStats s = stats_;
  s.objects = objects_.size();
  s.bytes = bytes_;
  return s;
}

SessionResumeAnswer SessionTier::refuse(SessionTierRefusal r, std::string detail) {
  ++stats_.refusals;
  ++stats_.refused_by[static_cast<size_t>(r)];
  return SessionResumeRefused{r, std::move(detail)};
}

SessionResumeAnswer SessionTier::resume(const SessionHistoryIdentity& now, std::span<const TokenId> prompt) {
  // The object is found by tenant, namespace and session; every other field
  // of the identity must then be the one it was saved under (0x0CC).
  auto it = objects_.find(key_of(now));
  // Another tenant's or namespace's save of the same session label is not
  // looked at: saying it exists would disclose it across the boundary (0x0CE).
  if (it == objects_.end())
    return refuse(SessionTierRefusal::no_saved_history, "nothing saved for this session in this namespace");
  const ObjectRecord& o = it->second;
  const SessionHistoryIdentity& saved = o.identity;
  if (saved.namespace_generation != now.namespace_generation)
    return refuse(SessionTierRefusal::namespace_rotated, "saved under generation " +
                                                             std::to_string(saved.namespace_generation.value) +
                                                             ", now " + std::to_string(now.namespace_generation.value));
  if (saved.semantic_digest != now.semantic_digest)
    return refuse(SessionTierRefusal::semantic_changed,
                  "semantic digest " + short_hex(saved.semantic_digest) + ", now " + short_hex(now.semantic_digest));
  if (saved.layout_digest != now.layout_digest)
    return refuse(SessionTierRefusal::layout_changed,
                  "layout digest " + short_hex(saved.layout_digest) + ", now " + short_hex(now.layout_digest));
  if (saved.position_truncation_contract != now.position_truncation_contract)
    return refuse(
        SessionTierRefusal::position_contract_changed,
        "contract \"" + saved.position_truncation_contract + "\", now \"" + now.position_truncation_contract + "\"");
  if (prompt.size() <= o.history_tokens || session_tokens_digest(prompt.first(o.history_tokens)) != o.tokens_digest)
    return refuse(SessionTierRefusal::history_not_prefix, "the saved " + std::to_string(o.history_tokens) +
                                                              " tokens are not a proper prefix of the " +
                                                              std::to_string(prompt.size()) + "-token prompt");
  Result<SessionHistory> read = read_session_object(path_of(o.file));
  if (!read.ok() || read->identity != saved || read->tokens.size() != o.history_tokens) {
    const std::string why = read.ok() ? "the object's identity or length differs from its record" : read.error().reason;
    remove(it);  // never usable again
    return refuse(SessionTierRefusal::incomplete_save, why);
  }
  it->second.last_use = ++clock_;
  SessionResume out;
  SessionReuseReceipt& r = out.receipt;
  r.session_id = saved.session_id;
  r.tenant_id = saved.tenant_id;
  r.namespace_id = saved.namespace_id;
  r.namespace_generation = saved.namespace_generation;
  r.semantic_digest = saved.semantic_digest;
  r.layout_digest = saved.layout_digest;
  r.covered_interval = TokenInterval{0, static_cast<uint32_t>(o.history_tokens)};
  r.covered_tokens_digest = o.tokens_digest;
  r.position_truncation_contract = saved.position_truncation_contract;
  r.publication_generation = o.publication_generation;
  r.source_tier_object_id = o.file;
  r.resume_prefill_tokens = static_cast<uint32_t>(prompt.size() - o.history_tokens);
  out.group_rows = std::move(read->group_rows);
  ++stats_.resumes;
  stats_.resumed_rows += o.history_tokens;
  return out;
}

uint64_t SessionTier::retire(const std::string& namespace_id, NamespaceGeneration current) {
  uint64_t n = 0;
  for (auto it = objects_.begin(); it != objects_.end();) {
    const auto next = std::next(it);
    if (it->second.identity.namespace_id == namespace_id &&
        it->second.identity.namespace_generation.value < current.value) {
      remove(it);
      ++n;
    }
    it = next;
  }
  stats_.retired += n;
  return n;
}

Status SessionTier::validate() const {
  auto broken = [](const std::string& why) { return make_error(ErrorCode::invariant_violated, why, "session_tier"); };
  uint64_t total = 0;
  std::map<std::string, uint64_t> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(config_.directory, ec))
    if (e.is_regular_file() && is_object_file(e.path())) files[e.path().filename().string()] = e.file_size();
  for (const auto& [key, o] : objects_) {
    if (key != key_of(o.identity)) return broken("object " + o.file + " is indexed under another identity's key");
    const auto f = files.find(o.file);
    if (f == files.end()) return broken("object " + o.file + " has no file");
    if (f->second != o.bytes) return broken("object " + o.file + " has another size on disk");
    files.erase(f);
    total += o.bytes;
  }
  if (!files.empty()) return broken("file " + files.begin()->first + " belongs to no object");
  if (total != bytes_) return broken("the byte total is not the objects' sum");
  if (bytes_ > config_.budget_bytes) return broken("the tier holds more than its budget");
  return Status::success();
}

}  // namespace kvrt
