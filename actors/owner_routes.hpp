#pragma once
// How an owner actor answers a routed call, written once for every owner:
// find the route (services/session/routes.hpp) among the owner's, decode its
// request, make one call, encode the receipt, with the trace slice, the
// flow arrow and the log lines every owner writes. Bytes that do not decode
// answer an encoded typed Error and the actor keeps serving: nothing a
// client sends may crash the node. Include only from actors/*.cpp (CAF).
#include <chrono>
#include <string>
#include <type_traits>
#include <utility>

#include "actors/actor_protocol.hpp"
#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

namespace kvrt::actors {

inline wire_bytes error_reply(const Error& e) { return to_wire(codec::encode(ErrorMessage{e})); }

// A receipt, or a Result of one (an owner that refuses a whole request,
// like a grant the authorization owner does not give).
template <class Receipt>
Result<Receipt> as_result(Receipt r) {
  return r;
}
template <class Receipt>
Result<Receipt> as_result(Result<Receipt> r) {
  return r;
}

// One receipt of `route`, answered now, for the node's latency histograms.
inline void record_latency(const Observability& obs, RouteId route, std::chrono::steady_clock::time_point started) {
  if (obs.latency) obs.latency->record(route.value, std::chrono::steady_clock::now() - started);
}

// Decodes the request of route R from `bytes` and hands it to
// handle(request), which answers R::Receipt, a Result of one, or a
// caf::result<wire_bytes> (an owner that answers later, through a promise).
template <class R, class Handle>
caf::result<wire_bytes> serve_route(const Observability& obs, const char* actor, uint64_t session,
                                    const wire_bytes& bytes, Handle&& handle) {
  // One slice per served call, named after its route ("allocator.batch"),
  // beside the worker's "allocator.call" of the same trace.
  static const std::string slice_name = std::string(R::name) + ".batch";
  TraceSlice slice(obs.trace, actor, slice_name, {});
  const auto started = std::chrono::steady_clock::now();
  Result<typename R::Request> request = codec::decode<typename R::Request>(as_span(bytes));
  if (!request.ok()) {
    log_rejected(obs.log, actor, session, request.error());
    return error_reply(request.error());
  }
  TraceContext trace;
  if constexpr (requires { request->trace; }) trace = request->trace;
  slice.set_trace(trace);
  if (obs.trace) obs.trace->flow_finish(actor, ChromeTraceRecorder::now_us(), flow_id(trace));
  using Answer = std::invoke_result_t<Handle, typename R::Request&&>;
  if constexpr (std::is_same_v<Answer, caf::result<wire_bytes>>) {
    // Answered later: the owner records its latency when it delivers.
    return handle(std::move(*request));
  } else {
    Result<typename R::Receipt> receipt = as_result(handle(std::move(*request)));
    if (!receipt.ok()) {
      log_refused(obs.log, actor, session, trace, receipt.error());
      record_latency(obs, R::id, started);
      return error_reply(receipt.error());
    }
    log_answered(obs.log, actor, session, trace, *receipt);
    wire_bytes reply = to_wire(codec::encode(*receipt));
    record_latency(obs, R::id, started);
    return reply;
  }
}

// Answers a routed call for owner O: the route's request goes to
// handle(request) (an overload set or a generic lambda covering O's routes);
// a route of another owner, or none, answers a typed error.
template <Owner O, class Handle>
caf::result<wire_bytes> serve_owner_routes(const Observability& obs, uint16_t route, uint64_t session,
                                           const wire_bytes& bytes, Handle&& handle) {
  const char* actor = owner_name(O).data();
  std::optional<caf::result<wire_bytes>> answer;
  for_each_route([&]<class R>() {
    if constexpr (R::owner == O) {
      if (R::id == RouteId{route}) answer = serve_route<R>(obs, actor, session, bytes, handle);
    }
  });
  if (answer) return std::move(*answer);
  return error_reply(make_error(ErrorCode::invalid_argument,
                                std::string(owner_name(O)) + " serves no route " + std::to_string(route) + " (" +
                                    std::string(route_name(RouteId{route})) + ")",
                                "route"));
}

// Statistics of an owner: its cheap counters, and its full validate() (which
// re-derives every invariant from scratch) when asked or in a debug build.
#ifdef NDEBUG
inline constexpr bool kValidateOnEveryStats = false;
#else
inline constexpr bool kValidateOnEveryStats = true;
#endif
inline void record_validation(OwnerStats& stats, const Status& v) {
  stats.validated = true;
  stats.validate_ok = v.ok();
  if (!v.ok()) stats.validate_error = v.error().describe();
}
template <class Service>
wire_bytes stats_reply(const Service& service, bool validate) {
  OwnerStats stats = service.stats();
  if (validate || kValidateOnEveryStats) record_validation(stats, service.validate());
  return to_wire(codec::encode(stats));
}

}  // namespace kvrt::actors
