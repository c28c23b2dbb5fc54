#include "events/kv_event_publisher.hpp"

#include <chrono>
#include <zmq.hpp>

namespace kvrt::events {
namespace {

std::string big_endian(int64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8))
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
};

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(const KvEventPublisherConfig& config) {
  auto sockets = std::make_unique<Sockets>();
  try {
    sockets->pub.set(zmq::sockopt::sndhwm, config.hwm);
    sockets->pub.set(zmq::sockopt::linger, 0);
    sockets->pub.bind(config.endpoint);
  } catch (const zmq::error_t& e) {
    return make_error(ErrorCode::io, "events: cannot bind the publisher to " + config.endpoint + ": " + e.what(),
                      "events.endpoint");
  }
  if (!config.replay_endpoint.empty()) {
    try {
      sockets->replay.emplace(sockets->context, zmq::socket_type::router);
      sockets->replay->set(zmq::sockopt::linger, 0);
      sockets->replay->bind(config.replay_endpoint);
    } catch (const zmq::error_t& e) {
      return make_error(ErrorCode::io,
                        "events: cannot bind the replay socket to " + config.replay_endpoint + ": " + e.what(),
                        "events.replay_endpoint");
    }
  }
  return std::unique_ptr<KvEventPublisher>(new KvEventPublisher(config, std::move(sockets)));
}

KvEventPublisher::KvEventPublisher(KvEventPublisherConfig config, std::unique_ptr<Sockets> sockets)
    : config_(std::move(config)), sockets_(std::move(sockets)) {
  endpoint_ = sockets_->pub.get(zmq::sockopt::last_endpoint);
  if (sockets_->replay) replay_endpoint_ = sockets_->replay->get(zmq::sockopt::last_endpoint);
  // The sockets move to the publishing thread here; thread start is the
  // full barrier ZMQ asks for when a socket changes threads.
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void KvEventPublisher::on_event(const KvEvent& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.size() >= config_.max_queue_size) {
    ++stats_.events_dropped;
    return;
  }
  queue_.push_back(event);
  if (auto* stored = std::get_if<KvBlockStored>(&queue_.back())) stored->medium = config_.medium;
  if (auto* removed = std::get_if<KvBlockRemoved>(&queue_.back())) removed->medium = config_.medium;
  if (queue_.size() == 1) wake_.notify_one();
}

KvEventPublisherStats KvEventPublisher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KvEventPublisher::run() {
  for (;;) {
    std::vector<KvEvent> batch;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // A short wait keeps the replay socket answered while nothing is published.
      wake_.wait_for(lock, std::chrono::milliseconds(10), [&] { return stopping_ || !queue_.empty(); });
      batch.swap(queue_);
      stop = stopping_;
    }
    if (!batch.empty()) send_batch(batch);
    serve_replay();
    if (stop) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty()) break;
    }
  }
}

void KvEventPublisher::send_batch(std::vector<KvEvent>& events) {
  const uint64_t seq = next_seq_++;
  std::string payload = encode_event_batch(events, now_seconds(), config_.wire);
  const std::string seq_bytes = big_endian(static_cast<int64_t>(seq));
  // PUB never blocks: past the high-water mark ZMQ drops for slow subscribers,
  // who then catch up through the replay socket.
  sockets_->pub.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
  sockets_->pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
  sockets_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
  replay_buffer_.emplace_back(seq, std::move(payload));
  while (replay_buffer_.size() > config_.buffer_steps) replay_buffer_.pop_front();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.batches_published;
  stats_.events_published += events.size();
}

void KvEventPublisher::serve_replay() {
  if (!sockets_->replay) return;
  zmq::socket_t& router = *sockets_->replay;
  for (;;) {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    if (!router.recv(frame, zmq::recv_flags::dontwait)) return;
    frames.push_back(std::move(frame));
    while (router.get(zmq::sockopt::rcvmore)) {
      zmq::message_t more;
      (void)router.recv(more, zmq::recv_flags::none);
      frames.push_back(std::move(more));
    }
    // [identity, empty delimiter, start sequence number]; anything else is
    // not a replay request and gets no answer (as vLLM's publisher does).
    if (frames.size() != 3 || frames[2].size() != 8) continue;
    const auto* b = static_cast<const uint8_t*>(frames[2].data());
    uint64_t start = 0;
    for (int i = 0; i < 8; ++i) start = (start << 8) | b[i];
    const std::string identity = frames[0].to_string();
    const auto reply = [&](const std::string& seq, const std::string& payload) {
      router.send(zmq::buffer(identity), zmq::send_flags::sndmore);
      router.send(zmq::buffer(std::string()), zmq::send_flags::sndmore);
      router.send(zmq::buffer(seq), zmq::send_flags::sndmore);
      router.send(zmq::buffer(payload), zmq::send_flags::none);
    };
    for (const auto& [seq, payload] : replay_buffer_)
      if (seq >= start) reply(big_endian(static_cast<int64_t>(seq)), payload);
    reply(big_endian(-1), std::string());
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.replays_served;
  }
}

}  // namespace kvrt::events
