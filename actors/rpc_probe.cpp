#include "actors/rpc_probe.hpp"

#include "actors/actor_settings.hpp"
#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"

namespace kvrt {

struct InProcessAllocatorProbe::Impl {
  Impl() : system(configure(cfg)), self(system) {}
  static caf::actor_system_config& configure(caf::actor_system_config& c) {
    actors::apply_runtime_settings(c, actors::RuntimeSettings{2, 250, 2000});
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
  impl->allocator = actors::spawn_allocator_actor(impl->system, std::make_shared<AllocatorService>(std::move(allocator)),
                                                  actors::Observability{});
  return std::unique_ptr<InProcessAllocatorProbe>(new InProcessAllocatorProbe(std::move(impl)));
}

Result<std::vector<uint8_t>> InProcessAllocatorProbe::call(const std::vector<uint8_t>& batch) {
  Result<std::vector<uint8_t>> out = make_error(ErrorCode::rpc_failed, "no reply", "allocator");
  impl_->self->request(impl_->allocator, caf::infinite, actors::batch_atom::value, uint64_t{1}, actors::to_wire(batch))
      .receive([&](actors::wire_bytes& reply) { out = std::vector<uint8_t>(reply.begin(), reply.end()); },
               [&](caf::error& e) { out = make_error(ErrorCode::rpc_failed, caf::to_string(e), "allocator"); });
  return out;
}

}  // namespace kvrt
