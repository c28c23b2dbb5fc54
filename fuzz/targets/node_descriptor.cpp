// The node descriptor (services/session/node_descriptor.hpp): the JSON file
// a node writes and every worker reads before it connects. A descriptor
// that parses is written back as the node writes it, and that text parses
// to the same descriptor (compared through its text: one canonical form).
#include "services/session/node_descriptor.hpp"

#include "fuzz/fuzz_target.hpp"

int kvrt_fuzz_node_descriptor(const uint8_t* data, size_t size) {
  kvrt::Result<kvrt::NodeDescriptor> d = kvrt::parse_node_descriptor(kvrt::fuzz::as_text(data, size), "node.json");
  if (!d.ok()) {
    KVRT_FUZZ_TYPED_ERROR(d.error());
    KVRT_FUZZ_REQUIRE(d.error().code == kvrt::ErrorCode::descriptor_invalid, d.error().describe());
    return 0;
  }
  const std::string text = kvrt::node_descriptor_json(*d);
  kvrt::Result<kvrt::NodeDescriptor> again = kvrt::parse_node_descriptor(text, "node.json");
  KVRT_FUZZ_REQUIRE(again.ok(), again.error().describe() + "\n" + text);
  KVRT_FUZZ_REQUIRE(kvrt::node_descriptor_json(*again) == text, text);
  return 0;
}
