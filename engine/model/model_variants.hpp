#pragma once
// The weights a request computes with, by the generation it was admitted
// under. A live node's weights and adapter updates (0x01A causes `weights`
// and `adapter`) move a namespace to a successor generation whose facts name
// a new model generation or a new active adapter set; an engine serving that
// namespace must compute the successor's requests with the new weights and
// finish the requests it admitted earlier with the old ones. The reference
// model stands in for both: a weights variant is the same architecture with
// weights drawn from another seed, derived from the base seed, the model
// generation's distance from the layout's, and the adapter identity. The base
// variant (the layout's model generation, no adapter) is the configured seed
// itself, so a run without updates computes exactly what it always did.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "engine/model/reference_model.hpp"

namespace kvrt::model {

// The weights seed of (model generation, adapter identity) given the base
// seed and the layout's model generation: `base_seed` for the base variant,
// otherwise a splitmix64 mix of all three (FNV-1a over the adapter's bytes),
// so distinct variants draw distinct weights with overwhelming probability.
uint64_t variant_weights_seed(uint64_t base_seed, uint64_t base_model_generation, uint64_t model_generation,
                              std::string_view adapter_identity);

class ModelVariants {
 public:
  // `base` is the configured model; its layout's model_generation is the
  // base generation.
  ModelVariants(const ReferenceModel& base, CacheLayoutManifest layout);
  // The model of (model generation, adapter identity), drawn on first use
  // and kept until retain() drops it (the pointer stays valid until then;
  // drawn again, the same variant has the same weights). Errors: those of
  // ReferenceModel::create (none for a base that was created).
  Result<const ReferenceModel*> get(uint64_t model_generation, const std::string& adapter_identity);
  // Drops every variant not in `in_use` (the base is never dropped): a long
  // run with frequent updates keeps only the weights some request or
  // namespace view still points at. Returns how many were dropped.
  size_t retain(const std::set<const ReferenceModel*>& in_use);
  size_t held() const { return variants_.size(); }  // variants other than the base, held now
  size_t drawn() const { return drawn_; }           // variants other than the base, ever drawn

 private:
  const ReferenceModel& base_;
  CacheLayoutManifest layout_;
  std::map<std::pair<uint64_t, std::string>, std::unique_ptr<ReferenceModel>> variants_;
  size_t drawn_ = 0;
};

}  // namespace kvrt::model
