// An address-translation snapshot (services/address/snapshot_loader.hpp,
// config/snapshots/, `kvrt address`), read against the layout its fixture is
// written for. A snapshot that loads is valid, so a translator takes it; a
// few reads through it (the first and last visible token of each request, in
// the first and last layer) answer an address inside the tensor they name
// or a typed refusal of 0x03I.
#include <algorithm>

#include "fuzz/embedded_layouts.hpp"
#include "fuzz/fuzz_target.hpp"
#include "services/address/address_translator.hpp"
#include "services/address/snapshot_loader.hpp"
#include "services/identity/layout_loader.hpp"

int kvrt_fuzz_snapshot(const uint8_t* data, size_t size) {
  static const kvrt::CacheLayoutManifest layout =
      kvrt::parse_layout_manifest(kvrt::fuzz::kTwoGroupTp2Layout, "config/layouts/two-group-tp2.toml").value();
  kvrt::Result<kvrt::TranslationSnapshot> s =
      kvrt::parse_translation_snapshot(kvrt::fuzz::as_text(data, size), "/fuzz/snapshot.toml", layout);
  if (!s.ok()) {
    KVRT_FUZZ_TYPED_ERROR(s.error());
    return 0;
  }
  const std::vector<kvrt::RequestTables> requests = s->requests;
  kvrt::Result<kvrt::AddressTranslator> translator = kvrt::AddressTranslator::create(std::move(s).value());
  KVRT_FUZZ_REQUIRE(translator.ok(), translator.error().describe());
  uint32_t last_layer = 0;
  for (const kvrt::CacheGroupLayout& g : layout.cache_groups) last_layer = std::max(last_layer, g.layer_end - 1);
  for (size_t r = 0; r < std::min<size_t>(requests.size(), 8); ++r) {
    const uint64_t length = requests[r].context_length;
    for (uint64_t token : {uint64_t{0}, length == 0 ? 0 : length - 1})
      for (uint32_t layer : {0u, last_layer})
        for (kvrt::TensorKind kind : {kvrt::TensorKind::K, kvrt::TensorKind::V}) {
          const kvrt::AddressQuery q{requests[r].name, std::nullopt, token, layer, kind, 0, 0};
          kvrt::Result<kvrt::AddressReceipt> a = translator->translate(q);
          if (!a.ok()) {
            KVRT_FUZZ_TYPED_ERROR(a.error());
            continue;
          }
          KVRT_FUZZ_REQUIRE(a->byte_address >= a->tensor_base && a->byte_address < a->tensor_end, "");
        }
  }
  return 0;
}
