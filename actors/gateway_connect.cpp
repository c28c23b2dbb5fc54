#include "actors/gateway_connect.hpp"

#include <condition_variable>
#include <future>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "services/common/process_identity.hpp"

namespace kvrt::actors {

namespace {

// How often the waiting caller looks at the node's process: well inside the
// 1 s detection target, and cheap (one read of /proc/<pid>/stat).
constexpr std::chrono::milliseconds kLivenessPoll{25};
// How long a process that exits waits for the systems it retired before it
// leaves them to the exit (below).
constexpr std::chrono::seconds kRetirementGrace{3};

bool node_has_exited(const NodeDescriptor& node) {
  if (node.node_pid == 0) return false;  // a descriptor without the node's identity: wait for the middleman
  return owner_state(node.process()) != OwnerState::alive;
}

using ConnectAnswer = std::promise<Result<gateway_actor>>;

// Asks the middleman for the gateway once and hands its answer to the
// waiting caller. One request, not one per slice: the middleman serves its
// requests one at a time, and each queued repeat of a connect that failed
// would start a connect of its own. A class, not a function actor (see
// AnchorActor in client.cpp); it ends once the answer came, whenever that is.
class GatewayConnector final : public caf::event_based_actor {
 public:
  GatewayConnector(caf::actor_config& cfg, const NodeDescriptor& node, std::shared_ptr<ConnectAnswer> answer)
      : caf::event_based_actor(cfg),
        host_(node.host),
        port_(node.port),
        address_(node.address()),
        answer_(std::move(answer)) {}
  caf::behavior make_behavior() override {
    request(home_system().middleman().actor_handle(), caf::infinite, caf::connect_atom::value, host_, port_)
        .then(
            [this](const caf::node_id&, caf::strong_actor_ptr& remote, const std::set<std::string>& interface) {
              answer_->set_value(judge(std::move(remote), interface));
              quit();
            },
            [this](caf::error& e) {
              answer_->set_value(make_error(ErrorCode::node_unreachable,
                                            "cannot reach the node at " + address_ + ": " + caf::to_string(e), "node"));
              quit();
            });
    return {};
  }

 private:
  Result<gateway_actor> judge(caf::strong_actor_ptr remote, const std::set<std::string>& interface) {
    if (!remote) return make_error(ErrorCode::rpc_failed, "the node at " + address_ + " publishes no gateway", "node");
    if (!home_system().assignable(interface, home_system().message_types<gateway_actor>()))
      return make_error(ErrorCode::rpc_failed, "the actor published at " + address_ + " is not a kvrt gateway", "node");
    return caf::actor_cast<gateway_actor>(std::move(remote));
  }

  std::string host_;
  uint16_t port_;
  std::string address_;  // for errors
  std::shared_ptr<ConnectAnswer> answer_;
};

// Threads that destroy what a caller gave up on. What they share lives as
// long as the last of them: one left to the process's end may finish after
// the static Retirement is gone.
class Retirement {
 public:
  // At exit, the retired systems get a grace period to finish; one whose
  // middleman is still in the kernel's connect() after it (a listener that
  // drops every SYN keeps it there for about two minutes) is left to the
  // process's end, which takes its thread down with it.
  ~Retirement() {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    shared_->changed.wait_for(lock, kRetirementGrace, [&] { return shared_->running == 0; });
    for (Retiree& r : retirees_) {
      if (*r.done)
        r.thread.join();
      else
        r.thread.detach();
    }
  }
  void add(std::shared_ptr<void> owner) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    // A finished thread keeps its stack until it is joined.
    for (auto it = retirees_.begin(); it != retirees_.end();) {
      if (*it->done) {
        it->thread.join();
        it = retirees_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<bool>(false);
    ++shared_->running;
    std::thread thread([shared = shared_, owner = std::move(owner), done]() mutable {
      owner.reset();
      std::lock_guard<std::mutex> lock(shared->mutex);
      *done = true;
      --shared->running;
      shared->changed.notify_all();
    });
    retirees_.push_back(Retiree{std::move(thread), std::move(done)});
  }

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    size_t running = 0;  // threads not yet done
  };
  struct Retiree {
    std::thread thread;
    std::shared_ptr<bool> done;  // under Shared::mutex
  };
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::list<Retiree> retirees_;  // under Shared::mutex
};

}  // namespace

GatewayConnection connect_gateway(caf::actor_system& system, const NodeDescriptor& node,
                                  std::chrono::milliseconds timeout) {
  auto answer = std::make_shared<ConnectAnswer>();
  std::future<Result<gateway_actor>> connected = answer->get_future();
  system.spawn<GatewayConnector>(node, std::move(answer));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (connected.wait_for(kLivenessPoll) == std::future_status::ready)
      return GatewayConnection{connected.get(), false};
    if (node_has_exited(node))
      return GatewayConnection{
          make_error(ErrorCode::node_unreachable,
                     "the node at " + node.address_and_pid() + " exited while this client was connecting to it",
                     "node"),
          true};
    if (std::chrono::steady_clock::now() >= deadline)
      return GatewayConnection{make_error(ErrorCode::node_unreachable,
                                          "the node at " + node.address() + " did not accept a connection in " +
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
