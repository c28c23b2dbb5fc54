#include "services/tier/session_object_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace kvrt {
namespace {

constexpr char kMagic[] = "KVRTSES1";
constexpr char kTrailer[] = "DONE";
// Bounds a reader holds a file to before it allocates [items].
constexpr uint64_t kMaxStringBytes = 1 << 16;
constexpr uint64_t kMaxTokens = 1 << 24;
constexpr uint64_t kMaxGroups = 64;

struct Writer {
  std::vector<uint8_t> out;
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void digest(const Sha256Digest& d) { raw(d.bytes.data(), d.bytes.size()); }
};

struct Reader {
  const std::vector<uint8_t>& in;
  size_t at = 0;
  std::string error;
  bool need(size_t n, const char* what) {
    if (!error.empty()) return false;
    if (in.size() - at < n) {
      error = std::string("the file ends inside ") + what;
      return false;
    }
    return true;
  }
  uint64_t u64(const char* what) {
    if (!need(8, what)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{in[at + i]} << (8 * i);
    at += 8;
    return v;
  }
  std::string str(const char* what) {
    const uint64_t n = u64(what);
    if (error.empty() && n > kMaxStringBytes) error = std::string(what) + " is longer than 64 KiB";
    if (!need(n, what)) return {};
    std::string s(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
    return s;
  }
  Sha256Digest digest(const char* what) {
    Sha256Digest d;
    if (!need(d.bytes.size(), what)) return d;
    std::memcpy(d.bytes.data(), in.data() + at, d.bytes.size());
    at += d.bytes.size();
    return d;
  }
};

}  // namespace

std::vector<uint8_t> encode_session_object(const SessionHistory& h) {
  Writer w;
  w.raw(kMagic, 8);
  const SessionHistoryIdentity& id = h.identity;
  w.str(id.session_id);
  w.str(id.tenant_id);
  w.str(id.namespace_id);
  w.u64(id.namespace_generation.value);
  w.digest(id.semantic_digest);
  w.digest(id.layout_digest);
  w.str(id.position_truncation_contract);
  w.u64(h.tokens.size());
  for (TokenId t : h.tokens) w.u64(static_cast<uint32_t>(t));
  w.u64(h.group_rows.size());
  for (const std::vector<uint8_t>& rows : h.group_rows) {
    w.u64(rows.size());
    w.raw(rows.data(), rows.size());
  }
  const Sha256Digest d = sha256(std::span<const uint8_t>(w.out));
  w.raw(kTrailer, 4);
  w.digest(d);
  return std::move(w.out);
}

Result<SessionHistory> decode_session_object(const std::vector<uint8_t>& bytes) {
  auto bad = [](const std::string& why) { return make_error(ErrorCode::decode_failed, why, "session_object"); };
  constexpr size_t kTail = 4 + 32;
  if (bytes.size() < 8 + kTail || std::memcmp(bytes.data(), kMagic, 8) != 0)
    return bad("not a kvrt session object (magic KVRTSES1)");
  const size_t body = bytes.size() - kTail;
  if (std::memcmp(bytes.data() + body, kTrailer, 4) != 0) return bad("no completion trailer: the save did not finish");
  Sha256Digest stored;
  std::memcpy(stored.bytes.data(), bytes.data() + body + 4, stored.bytes.size());
  if (sha256(std::span<const uint8_t>(bytes.data(), body)) != stored)
    return bad("the digest does not cover the object's bytes");
  const std::vector<uint8_t> content(bytes.begin(), bytes.begin() + static_cast<long>(body));
  Reader r{content, 8, {}};
  SessionHistory h;
  SessionHistoryIdentity& id = h.identity;
  id.session_id = r.str("session_id");
  id.tenant_id = r.str("tenant_id");
  id.namespace_id = r.str("namespace_id");
  id.namespace_generation = NamespaceGeneration{r.u64("namespace_generation")};
  id.semantic_digest = r.digest("semantic_digest");
  id.layout_digest = r.digest("layout_digest");
  id.position_truncation_contract = r.str("position_truncation_contract");
  const uint64_t tokens = r.u64("tokens");
  if (r.error.empty() && tokens > kMaxTokens) return bad("more than 2^24 tokens");
  for (uint64_t i = 0; i < tokens && r.error.empty(); ++i)
    h.tokens.push_back(static_cast<TokenId>(static_cast<uint32_t>(r.u64("tokens"))));
  const uint64_t groups = r.u64("groups");
  if (r.error.empty() && groups > kMaxGroups) return bad("more than 64 cache groups");
  for (uint64_t g = 0; g < groups && r.error.empty(); ++g) {
    const uint64_t n = r.u64("group rows");
    if (!r.need(n, "group rows")) break;
    h.group_rows.emplace_back(content.begin() + static_cast<long>(r.at), content.begin() + static_cast<long>(r.at + n));
    r.at += n;
  }
  if (!r.error.empty()) return bad(r.error);
  if (r.at != content.size()) return bad("bytes after the last group");
  return h;
}

Status write_session_object(const std::string& path, const SessionHistory& history) {
  const std::vector<uint8_t> bytes = encode_session_object(history);
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(ErrorCode::io, "open " + temporary + ": " + std::strerror(errno), "directory");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(temporary.c_str());
      return make_error(ErrorCode::io, "write " + temporary + ": " + why, "directory");
    }
    done += static_cast<size_t>(n);
  }
  // Durable before it is visible under its name: a crash leaves the
  // temporary file, which no reader takes for a save.
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    return make_error(ErrorCode::io, "save " + path + ": " + why, "directory");
  }
  return Status::success();
}

Result<SessionHistory> read_session_object(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, "cannot open " + path, "session_object");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(ErrorCode::io, "cannot read " + path, "session_object");
  return decode_session_object(bytes);
}

}  // namespace kvrt
