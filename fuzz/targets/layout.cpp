// A layout manifest (services/identity/layout_loader.hpp, config/layouts/):
// what the node, `kvrt run` and `kvrt manifest` read. A manifest that loads
// travels on the wire unchanged (it is a codec type), so its digest, which
// receipts compare, means the same on both ends.
#include "fuzz/fuzz_target.hpp"
#include "schema/identity_codec.hpp"
#include "services/identity/layout_loader.hpp"

int kvrt_fuzz_layout(const uint8_t* data, size_t size) {
  kvrt::Result<kvrt::CacheLayoutManifest> m =
      kvrt::parse_layout_manifest(kvrt::fuzz::as_text(data, size), "/fuzz/layout.toml");
  if (!m.ok()) {
    KVRT_FUZZ_TYPED_ERROR(m.error());
    return 0;
  }
  KVRT_FUZZ_REQUIRE(m->validate().ok(), "a loaded manifest is valid: " + m->validate().error().describe());
  kvrt::Result<kvrt::CacheLayoutManifest> again =
      kvrt::codec::decode<kvrt::CacheLayoutManifest>(kvrt::codec::encode(*m));
  KVRT_FUZZ_REQUIRE(again.ok(), again.error().describe());
  KVRT_FUZZ_REQUIRE(*again == *m && again->digest() == m->digest(), "");
  return 0;
}
