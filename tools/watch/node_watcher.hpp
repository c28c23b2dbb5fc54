#pragma once
// Reads a node again and again over one connection, for `kvrt top` and
// `kvrt stats --watch`: its statistics (counters only, never validate()),
// and its scrape when the descriptor names one (receipt latency per route).
#include <memory>
#include <string>

#include "actors/client.hpp"
#include "tools/watch/node_view.hpp"

namespace kvrt::watch {

class NodeWatcher {
 public:
  // Errors: the descriptor's, and node_unreachable.
  static Result<std::unique_ptr<NodeWatcher>> connect(const std::string& descriptor_path);
  // One read. Errors: the node stopped answering (node_unreachable,
  // rpc_failed); a scrape that fails only leaves the latency out.
  Result<NodeViewSample> read();
  const NodeDescriptor& descriptor() const { return descriptor_; }

 private:
  NodeWatcher() = default;
  NodeDescriptor descriptor_;
  std::unique_ptr<NodeStatsReader> reader_;
};

}  // namespace kvrt::watch
