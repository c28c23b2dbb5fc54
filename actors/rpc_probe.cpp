#include "actors/rpc_probe.hpp"

#include <chrono>
#include <future>

#include "actors/actor_settings.hpp"
#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"

namespace kvrt {

namespace {
Error rpc_error(const caf::error& e) { return make_error(ErrorCode::rpc_failed, caf::to_string(e), "allocator"); }
}  // namespace

struct InProcessAllocatorProbe::Impl {
  Impl() : system(configure(cfg)), self(system) {}
  static caf::actor_system_config& configure(caf::actor_system_config& c) {
    // The in-process deployment: caller and owner in one actor system.
    actors::apply_runtime_settings(c, actors::RuntimeSettings{2, 250, 2000, actors::SchedulerPolicy::stealing});
    return c;
  }
  caf::actor_system_config cfg;
  caf::actor_system system;
  caf::scoped_actor self;
  actors::allocator_actor allocator;
};

InProcessAllocatorProbe::InProcessAllocatorProbe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

InProcessAllocatorProbe::~InProcessAllocatorProbe() {
  if (impl_) caf::anon_send_exit(impl_->allocator, caf::exit_reason::user_shutdown);
}

Result<std::unique_ptr<InProcessAllocatorProbe>> InProcessAllocatorProbe::create(BlockAllocator allocator) {
  auto impl = std::make_unique<Impl>();
  impl->allocator = actors::spawn_allocator_actor(
      impl->system, std::make_shared<AllocatorService>(std::move(allocator)), actors::Observability{});
  return std::unique_ptr<InProcessAllocatorProbe>(new InProcessAllocatorProbe(std::move(impl)));
}

Result<std::vector<uint8_t>> InProcessAllocatorProbe::call(const std::vector<uint8_t>& batch) {
  Result<std::vector<uint8_t>> out = make_error(ErrorCode::rpc_failed, "no reply", "allocator");
  impl_->self
      ->request(impl_->allocator, caf::infinite, actors::route_atom::value, AllocatorRoute::id.value, uint64_t{1},
                actors::to_wire(batch))
      .receive([&](actors::wire_bytes& reply) { out = std::vector<uint8_t>(reply.begin(), reply.end()); },
               [&](caf::error& e) { out = rpc_error(e); });
  return out;
}

namespace {

double since_us(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}

// The driver's loop: one timed round trip, then the untimed follow-up batch
// decode asked for, then the next round trip, until `total` are done.
struct DriverLoop : std::enable_shared_from_this<DriverLoop> {
  caf::event_based_actor* self = nullptr;
  actors::allocator_actor allocator;
  InProcessAllocatorProbe::Encode encode;
  InProcessAllocatorProbe::Decode decode;
  int warmup = 0, total = 0, done = 0;
  std::vector<double> us;
  std::promise<Result<std::vector<double>>> finished;

  void fail(Error e) {
    finished.set_value(std::move(e));
    self->quit();
  }
  void next() {
    if (done == total) {
      finished.set_value(std::move(us));
      self->quit();
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto loop = shared_from_this();
    self->request(allocator, caf::infinite, actors::route_atom::value, AllocatorRoute::id.value, uint64_t{1},
                  actors::to_wire(encode()))
        .then(
            [loop, t0](actors::wire_bytes& reply) {
              Result<std::optional<std::vector<uint8_t>>> follow =
                  loop->decode(std::vector<uint8_t>(reply.begin(), reply.end()));
              const double rtt = since_us(t0);
              if (!follow.ok()) return loop->fail(follow.error());
              if (loop->done++ >= loop->warmup) loop->us.push_back(rtt);
              if (!follow->has_value()) return loop->next();
              loop->self
                  ->request(loop->allocator, caf::infinite, actors::route_atom::value, AllocatorRoute::id.value,
                            uint64_t{1}, actors::to_wire(**follow))
                  .then([loop](actors::wire_bytes&) { loop->next(); },
                        [loop](caf::error& e) { loop->fail(rpc_error(e)); });
            },
            [loop](caf::error& e) { loop->fail(rpc_error(e)); });
  }
};

}  // namespace

Result<std::vector<double>> InProcessAllocatorProbe::actor_driven_rtts(int warmup, int timed, Encode encode,
                                                                       Decode decode) {
  auto loop = std::make_shared<DriverLoop>();
  loop->allocator = impl_->allocator;
  loop->encode = std::move(encode);
  loop->decode = std::move(decode);
  loop->warmup = warmup;
  loop->total = warmup + timed;
  std::future<Result<std::vector<double>>> result = loop->finished.get_future();
  // The loop travels as a spawn argument, not a capture: CAF 0.17 applies a
  // function actor's arguments through `*args_`, a null pointer when there
  // are none (undefined behaviour that UBSan reports).
  impl_->system.spawn(
      [](caf::event_based_actor* self, std::shared_ptr<DriverLoop> driver) -> caf::behavior {
        driver->self = self;
        driver->next();
        return {[](caf::unit_t) {}};
      },
      loop);
  return result.get();
}

}  // namespace kvrt
