#include "actors/gateway_connect.hpp"

#include <atomic>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "services/common/process_identity.hpp"

namespace kvrt::actors {

namespace {

// Long enough for a healthy node's whole handshake, short enough that a node
// killed mid-connect is noticed well inside the 1 s detection target.
constexpr std::chrono::milliseconds kConnectSlice{25};

std::string node_address(const NodeDescriptor& node) { return node.host + ":" + std::to_string(node.port); }

bool node_has_exited(const NodeDescriptor& node) {
  if (node.node_pid == 0) return false;  // a descriptor without the node's identity: wait for the middleman
  return owner_state(ProcessIdentity{static_cast<int32_t>(node.node_pid), node.node_start_ticks}) != OwnerState::alive;
}

// Threads that destroy what a caller gave up on, joined at exit.
class Retirement {
 public:
  ~Retirement() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Retiree& r : retirees_) r.thread.join();
  }
  void add(std::shared_ptr<void> owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    // A finished thread keeps its stack until it is joined.
    for (auto it = retirees_.begin(); it != retirees_.end();) {
      if (it->done->load(std::memory_order_acquire)) {
        it->thread.join();
        it = retirees_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread thread([owner = std::move(owner), done]() mutable {
      owner.reset();
      done->store(true, std::memory_order_release);
    });
    retirees_.push_back(Retiree{std::move(thread), std::move(done)});
  }

 private:
  struct Retiree {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex mutex_;
  std::list<Retiree> retirees_;
};

}  // namespace

GatewayConnection connect_gateway(caf::actor_system& system, const NodeDescriptor& node,
                                  std::chrono::milliseconds timeout) {
  caf::scoped_actor self{system};
  const caf::io::middleman_actor middleman = system.middleman().actor_handle();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // The middleman answers every repeat of a connect it is still working on
  // once that connect completes (it keeps one per host and port).
  for (;;) {
    std::optional<Result<gateway_actor>> answer;
    self->request(middleman, caf::timespan{kConnectSlice}, caf::connect_atom::value, node.host, node.port)
        .receive(
            [&](const caf::node_id&, caf::strong_actor_ptr& remote, const std::set<std::string>& interface) {
              if (!remote)
                answer = make_error(ErrorCode::rpc_failed,
                                    "the node at " + node_address(node) + " publishes no gateway", "node");
              else if (!system.assignable(interface, system.message_types<gateway_actor>()))
                answer = make_error(ErrorCode::rpc_failed,
                                    "the actor published at " + node_address(node) + " is not a kvrt gateway", "node");
              else
                answer = caf::actor_cast<gateway_actor>(std::move(remote));
            },
            [&](caf::error& e) {
              if (e != caf::sec::request_timeout)
                answer =
                    make_error(ErrorCode::node_unreachable,
                               "cannot reach the node at " + node_address(node) + ": " + caf::to_string(e), "node");
            });
    if (answer) return GatewayConnection{std::move(*answer), false};
    if (node_has_exited(node))
      return GatewayConnection{
          make_error(ErrorCode::node_unreachable,
                     "the node at " + node_address(node) + " (pid " + std::to_string(node.node_pid) +
                         ") exited while this client was connecting to it",
                     "node"),
          true};
    if (std::chrono::steady_clock::now() >= deadline)
      return GatewayConnection{make_error(ErrorCode::node_unreachable,
                                          "the node at " + node_address(node) + " did not accept a connection in " +
                                              std::to_string(timeout.count()) + " ms",
                                          "node"),
                               true};
  }
}

void retire_in_background(std::shared_ptr<void> owner) {
  static Retirement retirement;
  retirement.add(std::move(owner));
}

}  // namespace kvrt::actors
