#pragma once
// TraceContext: the trace id and span id every kvrt message carries, so a
// Perfetto trace and the logs follow one call across processes. A worker opens a trace per scheduler iteration; every
// hop that handles the message opens a child span whose parent is the span it
// received, so a Chrome trace can draw a flow arrow from request to receipt.
#include <cstdint>

namespace kvrt {

struct TraceContext {
  uint64_t trace_id = 0;        // one per scheduler iteration of one worker; 0 = untraced
  uint64_t span_id = 0;         // the sender's span
  uint64_t parent_span_id = 0;  // the span that caused this one; 0 at the root

  // The context a handler passes on: same trace, new span, parented here.
  TraceContext child(uint64_t new_span_id) const { return TraceContext{trace_id, new_span_id, span_id}; }
  friend bool operator==(const TraceContext&, const TraceContext&) = default;
};

}  // namespace kvrt
