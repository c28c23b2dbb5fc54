// The node's configuration (node/node_config.hpp, `kvrt node --config`),
// with its [[namespace]] and [[principal]] tables
// (services/authorization/authorization_config.hpp). A config that loads
// keeps the promises the loader makes about it.
#include "node/node_config.hpp"

#include "fuzz/fuzz_target.hpp"

int kvrt_fuzz_node_config(const uint8_t* data, size_t size) {
  kvrt::Result<kvrt::NodeConfig> c = kvrt::parse_node_config(kvrt::fuzz::as_text(data, size), "/fuzz/node.toml");
  if (!c.ok()) {
    KVRT_FUZZ_TYPED_ERROR(c.error());
    return 0;
  }
  KVRT_FUZZ_REQUIRE(c->blocks_per_group >= 1, "");
  KVRT_FUZZ_REQUIRE(c->connection_timeout_ms > c->heartbeat_interval_ms, "");
  KVRT_FUZZ_REQUIRE(c->radix_budget_blocks >= 1 && c->radix_budget_blocks <= c->blocks_per_group, "");
  KVRT_FUZZ_REQUIRE(!c->layout_path.empty(), "");
  return 0;
}
