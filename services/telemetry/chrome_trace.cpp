#include "services/telemetry/chrome_trace.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

namespace kvrt {

ChromeTraceRecorder::ChromeTraceRecorder(std::string path, std::string process_name)
    : path_(std::move(path)), process_name_(std::move(process_name)), pid_(static_cast<uint32_t>(::getpid())) {}

ChromeTraceRecorder::~ChromeTraceRecorder() { (void)flush(); }

uint64_t ChromeTraceRecorder::now_us() {
  // CLOCK_MONOTONIC is one clock for every process of the host, so slices of
  // the node and its workers line up on one time axis.
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

uint32_t ChromeTraceRecorder::track_id(std::string_view track) {
  for (size_t i = 0; i < tracks_.size(); ++i)
    if (tracks_[i] == track) return static_cast<uint32_t>(i + 1);
  tracks_.emplace_back(track);
  return static_cast<uint32_t>(tracks_.size());
}

void ChromeTraceRecorder::slice(std::string_view track, std::string_view name, uint64_t start_us, uint64_t end_us,
                                const TraceContext& trace) {
  nlohmann::json e;
  std::lock_guard lock(mutex_);
  e["name"] = std::string(name);
  e["ph"] = "X";
  e["ts"] = start_us;
  e["dur"] = end_us >= start_us ? end_us - start_us : 0;
  e["pid"] = pid_;
  e["tid"] = track_id(track);
  e["args"] = {{"trace_id", trace.trace_id}, {"span_id", trace.span_id}, {"parent_span_id", trace.parent_span_id}};
  events_.push_back(e.dump());
}

void ChromeTraceRecorder::flow_start(std::string_view track, uint64_t at_us, uint64_t flow_id) {
  std::lock_guard lock(mutex_);
  nlohmann::json e = {{"name", "receipt"}, {"cat", "rpc"},          {"ph", "s"}, {"id", flow_id}, {"ts", at_us},
                      {"pid", pid_},       {"tid", track_id(track)}};
  events_.push_back(e.dump());
}

void ChromeTraceRecorder::flow_finish(std::string_view track, uint64_t at_us, uint64_t flow_id) {
  std::lock_guard lock(mutex_);
  nlohmann::json e = {{"name", "receipt"}, {"cat", "rpc"}, {"ph", "f"},   {"bp", "e"},
                      {"id", flow_id},     {"ts", at_us},  {"pid", pid_}, {"tid", track_id(track)}};
  events_.push_back(e.dump());
}

size_t ChromeTraceRecorder::events() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

Status ChromeTraceRecorder::flush() {
  std::lock_guard lock(mutex_);
  std::ofstream out(path_, std::ios::trunc);
  if (!out) return make_error(ErrorCode::io, "cannot write trace file " + path_, "trace");
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  nlohmann::json meta = {{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"args", {{"name", process_name_}}}};
  out << meta.dump();
  for (size_t i = 0; i < tracks_.size(); ++i) {
    nlohmann::json t = {
        {"name", "thread_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", i + 1}, {"args", {{"name", tracks_[i]}}}};
    out << ",\n" << t.dump();
  }
  for (const std::string& e : events_) out << ",\n" << e;
  out << "\n]}\n";
  if (!out) return make_error(ErrorCode::io, "short write to trace file " + path_, "trace");
  return Status::success();
}

}  // namespace kvrt
