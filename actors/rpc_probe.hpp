#pragma once
// InProcessAllocatorProbe: one allocator owner actor in a local actor system
// and a caller in the same process (a blocking thread, or an actor), for `kvrt bench rpc`'s
// in-process round trip (the same decode -> call -> encode path a worker's
// message takes, without the network). CAF-free interface.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/common/result.hpp"

namespace kvrt {

class InProcessAllocatorProbe {
 public:
  static Result<std::unique_ptr<InProcessAllocatorProbe>> create(BlockAllocator allocator);
  ~InProcessAllocatorProbe();
  // Sends encoded AllocatorBatch bytes as session 1 and returns the reply bytes
  // (the probe's system runs the in-process scheduler policy, work stealing,
  // which favours actor callers: a blocking thread waits longer under it).
  Result<std::vector<uint8_t>> call(const std::vector<uint8_t>& batch);

  // Round trips driven by an event-based actor of the same actor system, the
  // way an engine integrated as an actor calls the owner (no blocking thread
  // woken per message). Each round trip is timed from encode() through the
  // owner to decode(reply); decode returns the encoded batch to send next,
  // untimed (e.g. releasing what the timed batch allocated), or nothing.
  // The first `warmup` round trips are not reported [us].
  using Encode = std::function<std::vector<uint8_t>()>;
  using Decode = std::function<Result<std::optional<std::vector<uint8_t>>>(const std::vector<uint8_t>& reply)>;
  Result<std::vector<double>> actor_driven_rtts(int warmup, int timed, Encode encode, Decode decode);

 private:
  struct Impl;
  explicit InProcessAllocatorProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvrt
