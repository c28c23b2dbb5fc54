// See owner_call_timing.hpp.
#include "engine/owner_call_timing.hpp"

namespace kvrt::engine {

void observe_owner_calls(EngineSession& session, EngineResult& result) {
  session.set_call_observer([&result](Owner owner, double micros) {
    switch (owner) {
      case Owner::allocator:
        result.allocator_us.push_back(micros);
        break;
      case Owner::prefix_index:
        result.prefix_us.push_back(micros);
        break;
      case Owner::reuse:
        result.reuse_us.push_back(micros);
        break;
      case Owner::authorization:
        result.authorize_us.push_back(micros);
        break;
      case Owner::executor:
        result.executor_us.push_back(micros);
        break;
      default:
        break;
    }
  });
}

}  // namespace kvrt::engine
