#pragma once
// The node process composition (`kvrt node`): creates the pools,
// spawns the owners, publishes the gateway on the middleman, writes the
// descriptor and the token files, serves until SIGINT/SIGTERM, then stops
// the actors and removes its shared-memory segments. CAF-free interface.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "services/common/result.hpp"

namespace kvrt {

struct NodeRunOptions {
  std::string config_path;
  std::string descriptor_path;
  std::string trace_path;  // empty: tracing off
  int port_override = -1;  // >= 0 replaces [node] port
  // Called once the node serves (descriptor written); tests use it.
  std::function<void()> on_ready;
};

// A started node: pools created, owners spawned, gateway listening,
// descriptor and token files written. Destroying it stops the actors and
// removes the descriptor, the token files and the shared-memory segments.
// Tests and `kvrt bench rpc` run one inside their own process.
class NodeInstance {
 public:
  static Result<std::unique_ptr<NodeInstance>> start(const NodeRunOptions& options);
  ~NodeInstance();
  NodeInstance(const NodeInstance&) = delete;
  NodeInstance& operator=(const NodeInstance&) = delete;

  uint16_t port() const;
  const std::string& descriptor_path() const;

  // What a started node holds; complete only in node_runtime.cpp, whose
  // start-up steps fill it one owner at a time.
  struct Impl;

 private:
  explicit NodeInstance(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Blocks SIGINT/SIGTERM, starts a NodeInstance, serves until one arrives.
Status run_node(const NodeRunOptions& options);

}  // namespace kvrt
