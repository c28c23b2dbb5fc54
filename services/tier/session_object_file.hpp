#pragma once
// The on-disk form of one saved session history (the session tier's object,
// 0x0CC "source-tier object identity"). One file per object:
//
//   "KVRTSES1" | identity | H | tokens | groups | per group: B_row,g, rows
//   | "DONE" | SHA-256 of every byte before "DONE"
//
// integers little-endian, strings and byte runs length-prefixed. A file is
// written under a temporary name, flushed and renamed, so a crash leaves no
// file that reads as complete; a reader refuses a file that is short, long,
// of another format, or whose digest does not cover its bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "services/tier/session_history.hpp"

namespace kvrt {

std::vector<uint8_t> encode_session_object(const SessionHistory& history);
// Errors: decode_failed naming what is wrong (never an exception).
Result<SessionHistory> decode_session_object(const std::vector<uint8_t>& bytes);

// Writes atomically (temporary file, fsync, rename). Errors: io.
Status write_session_object(const std::string& path, const SessionHistory& history);
// Errors: io (missing, unreadable), decode_failed.
Result<SessionHistory> read_session_object(const std::string& path);

}  // namespace kvrt
