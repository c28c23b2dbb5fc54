#pragma once
// The one actor-side driver of every cross-owner protocol. Each protocol is
// a sans-IO run in its owner's folder (ExecuteBatchRun, PrefixBatchRun,
// ReuseBatchRun): it says which request it needs next (next()), takes the
// answer (answer()) or a transport failure (failed()), and knows its own
// stage order; it is tested without any actor system. This driver only
// moves the requests to the owners that answer them and the answers back.
// Include only from actors/*.cpp (CAF).
#include <memory>
#include <optional>
#include <utility>

#include "actors/actor_protocol.hpp"

namespace kvrt::actors {

// How the owner waits for an answer. awaiting suspends its mailbox until
// the answer arrives: nothing else changes the owner's state between its
// decision and the confirmation (the index owners' publications).
// interleaved lets other messages in meanwhile (the reuse coordinator, whose
// every step re-checks what an earlier one read).
enum class Waiting : uint8_t { awaiting, interleaved };

inline Error transport_error(const char* owner, const caf::error& e) {
  return make_error(ErrorCode::rpc_failed, std::string(owner) + ": " + caf::to_string(e), owner);
}

// Waits for one answer the chosen way.
template <Waiting W, class Handle, class OnAnswer, class OnError>
void on_answer(Handle&& handle, OnAnswer&& ok, OnError&& err) {
  if constexpr (W == Waiting::awaiting)
    std::forward<Handle>(handle).await(std::forward<OnAnswer>(ok), std::forward<OnError>(err));
  else
    std::forward<Handle>(handle).then(std::forward<OnAnswer>(ok), std::forward<OnError>(err));
}

// Runs `run` to its end: send(request, resume) sends one request of the
// run to the owner that answers it and calls resume() once the run has its
// answer; done(run) follows the last one. A request that needs no answer
// (a release) is sent and resumed at once.
template <class Run, class Send, class Done>
void drive(std::shared_ptr<Run> run, Send send, Done done) {
  std::optional<typename Run::Request> request = run->next();
  if (!request) return done(run);
  send(*request, [run, send, done]() { drive(run, send, done); });
}

}  // namespace kvrt::actors
