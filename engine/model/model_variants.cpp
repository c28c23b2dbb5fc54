#include "engine/model/model_variants.hpp"

#include "services/common/splitmix64.hpp"

namespace kvrt::model {

uint64_t variant_weights_seed(uint64_t base_seed, uint64_t base_model_generation, uint64_t model_generation,
                              std::string_view adapter_identity) {
  if (model_generation == base_model_generation && adapter_identity.empty()) return base_seed;
  uint64_t adapter = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (const char c : adapter_identity) adapter = (adapter ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  uint64_t z = splitmix64(base_seed);
  z = splitmix64(z ^ (model_generation - base_model_generation));
  return splitmix64(z ^ adapter);
}

ModelVariants::ModelVariants(const ReferenceModel& base, CacheLayoutManifest layout)
    : base_(base), layout_(std::move(layout)) {}

Result<const ReferenceModel*> ModelVariants::get(uint64_t model_generation, const std::string& adapter_identity) {
  if (model_generation == layout_.model_generation && adapter_identity.empty()) return &base_;
  const auto key = std::make_pair(model_generation, adapter_identity);
  if (const auto it = variants_.find(key); it != variants_.end()) return it->second.get();
  ModelConfig config = base_.config();
  config.seed = variant_weights_seed(config.seed, layout_.model_generation, model_generation, adapter_identity);
  Result<ReferenceModel> m = ReferenceModel::create(config, layout_);
  if (!m.ok()) return m.error();
  auto& slot = variants_[key];
  slot = std::make_unique<ReferenceModel>(std::move(m).value());
  ++drawn_;
  return slot.get();
}

size_t ModelVariants::retain(const std::set<const ReferenceModel*>& in_use) {
  size_t dropped = 0;
  for (auto it = variants_.begin(); it != variants_.end();) {
    if (in_use.contains(it->second.get())) {
      ++it;
    } else {
      it = variants_.erase(it);
      ++dropped;
    }
  }
  return dropped;
}

}  // namespace kvrt::model
