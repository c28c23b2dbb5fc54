#pragma once
// The node's KV event publisher: the index owners' events (a KvEventSink
// each) leave the node on vLLM's transport, as vLLM's ZmqEventPublisher
// sends them (vllm/distributed/kv_events.py), so a consumer written for vLLM
// reads a kvrt node unchanged:
//   - a PUB socket: one message per EventBatch, three frames: the topic, the
//     batch's sequence number (8 bytes, big-endian, from 0 without gaps) and
//     the msgpack payload (events/kv_event_wire.hpp);
//   - a ROUTER replay socket: a client sends [empty, start sequence number
//     (8 bytes, big-endian)] and receives, for every buffered batch from
//     that number on, [empty, sequence number, payload], then the end
//     marker [empty, -1 (8 bytes, big-endian), empty].
// The last buffer_steps batches stay for replay. Events are batched as they
// come: the publishing thread takes whatever the owners queued since its
// last send (in their order) and sends it as one batch; a full queue drops
// the newest events and counts them (a consumer sees the gap as a missing
// BlockStored or BlockRemoved, and can clear and replay).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "events/kv_event_wire.hpp"
#include "services/common/result.hpp"
#include "services/prefix/kv_events.hpp"

namespace kvrt::events {

struct KvEventPublisherConfig {
  // Where the sockets bind (the node is the stable side: it always binds).
  // A port of "*" picks a free one; endpoint() tells which.
  std::string endpoint = "tcp://127.0.0.1:5557";
  std::string replay_endpoint = "tcp://127.0.0.1:5558";  // empty: no replay socket
  uint32_t buffer_steps = 10000;                         // batches kept for replay
  int32_t hwm = 100000;                                  // the PUB socket's send high-water mark [messages]
  uint32_t max_queue_size = 100000;                      // events waiting to be sent [events]
  std::string topic;
  KvEventWireOptions wire;
  std::string medium = "CPU";  // the pools' memory: "CPU" (shared memory) or "GPU" (CUDA pools)
};

struct KvEventPublisherStats {
  uint64_t batches_published = 0;
  uint64_t events_published = 0;
  uint64_t events_dropped = 0;  // queue full
  uint64_t replays_served = 0;
};

class KvEventPublisher final : public KvEventSink {
 public:
  // Binds both sockets and starts the publishing thread. Errors: io
  // ("events.endpoint" / "events.replay_endpoint") when a socket cannot bind.
  static Result<std::unique_ptr<KvEventPublisher>> start(const KvEventPublisherConfig& config);
  // Sends what is queued (for at most a second), then closes the sockets.
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Any thread: queues the event (its medium set to the pools'), or counts
  // it dropped when max_queue_size events wait already.
  void on_event(const KvEvent& event) override;

  // The bound addresses (a "*" port resolved), for the node descriptor.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  KvEventPublisherStats stats() const;

 private:
  struct Sockets;
  KvEventPublisher(KvEventPublisherConfig config, std::unique_ptr<Sockets> sockets);
  void run();
  void send_batch(std::vector<KvEvent>& events);
  void serve_replay();

  KvEventPublisherConfig config_;
  std::unique_ptr<Sockets> sockets_;
  std::string endpoint_, replay_endpoint_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<KvEvent> queue_;
  bool stopping_ = false;

  // The publishing thread's own (read by stats() under mutex_).
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::string>> replay_buffer_;
  KvEventPublisherStats stats_;
  std::thread thread_;
};

}  // namespace kvrt::events
