#pragma once
// TraceMerge: joins the Chrome trace-event files that a node and its workers
// write (each process its own, ChromeTraceRecorder) into one, so Perfetto
// shows every process's tracks on one time axis and draws the flow arrows
// from a worker's request to the owner slice that answered it
// (`kvrt trace-merge`). The files come from other processes, so each is read
// as untrusted text.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

class TraceMerge {
 public:
  // Appends the events of one file's text, in their order. invalid_argument,
  // with nothing appended, when the text is not a Chrome trace-event file (a
  // JSON value with an array "traceEvents"); `origin` names it.
  Status add(std::string_view text, const std::string& origin);
  size_t events() const { return events_.size(); }
  // The merged file: {"displayTimeUnit":"ns","traceEvents":[...]}, compact.
  std::string json() const;

 private:
  std::vector<std::string> events_;  // each event as compact JSON
};

}  // namespace kvrt
