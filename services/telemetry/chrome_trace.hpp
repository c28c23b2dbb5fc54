#pragma once
// ChromeTraceRecorder: actor-level traces as Chrome trace-event JSON, which
// Perfetto and chrome://tracing open. One track (thread id) per
// actor or worker, one complete slice ("ph":"X") per handled message, and a
// flow arrow ("ph":"s" at the request, "ph":"f" at its receipt) keyed by the
// message's span id, so a worker's call and the owner slice that answered it
// are joined across processes.
//
// Off by default: every recording site takes a `ChromeTraceRecorder*` and
// does nothing when it is null (one branch). When on, events are buffered
// under a mutex and written by flush() or the destructor, never on the hot
// path's syscall budget.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"
#include "services/common/trace_context.hpp"

namespace kvrt {

class ChromeTraceRecorder {
 public:
  // `process_name` labels this process's tracks; events go to `path`.
  ChromeTraceRecorder(std::string path, std::string process_name);
  ~ChromeTraceRecorder();
  ChromeTraceRecorder(const ChromeTraceRecorder&) = delete;
  ChromeTraceRecorder& operator=(const ChromeTraceRecorder&) = delete;

  static uint64_t now_us();  // microseconds on the steady clock shared by the processes of one host

  // A handled message: [start_us, end_us) on track `track`.
  void slice(std::string_view track, std::string_view name, uint64_t start_us, uint64_t end_us,
             const TraceContext& trace);
  // Flow arrow endpoints: the start where a request leaves, the finish where
  // its receipt is handled (both bound to the enclosing slice).
  void flow_start(std::string_view track, uint64_t at_us, uint64_t flow_id);
  void flow_finish(std::string_view track, uint64_t at_us, uint64_t flow_id);

  Status flush();  // writes the whole file (valid JSON) with every event so far
  size_t events() const;

 private:
  uint32_t track_id(std::string_view track);  // caller holds mutex_
  std::string path_;
  std::string process_name_;
  uint32_t pid_ = 0;
  mutable std::mutex mutex_;
  std::vector<std::string> tracks_;
  std::vector<std::string> events_;  // serialized JSON objects
};

// The flow id joining a request's slice to the owner slice that handled it:
// unique across the workers of a node because trace ids are (see
// TraceContext).
inline uint64_t flow_id(const TraceContext& t) { return (t.trace_id * 0x9e3779b97f4a7c15ull) ^ t.span_id; }

// Records one slice from construction to destruction.
class TraceSlice {
 public:
  TraceSlice(ChromeTraceRecorder* recorder, std::string_view track, std::string_view name, TraceContext trace)
      : recorder_(recorder),
        track_(track),
        name_(name),
        trace_(trace),
        start_(recorder ? ChromeTraceRecorder::now_us() : 0) {}
  ~TraceSlice() {
    if (recorder_ != nullptr) recorder_->slice(track_, name_, start_, ChromeTraceRecorder::now_us(), trace_);
  }
  void set_trace(const TraceContext& t) { trace_ = t; }
  TraceSlice(const TraceSlice&) = delete;
  TraceSlice& operator=(const TraceSlice&) = delete;

 private:
  ChromeTraceRecorder* recorder_;
  std::string_view track_, name_;
  TraceContext trace_;
  uint64_t start_;
};

}  // namespace kvrt
