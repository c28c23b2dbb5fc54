#include "services/identity/compatibility_manifest_builder.hpp"

#include <algorithm>
#include <tuple>

#include "services/identity/isolation_namespace.hpp"

namespace kvrt {
namespace {

bool is_lower_hex64(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

auto side_input_key(const SideInputIdentity& s) { return std::tie(s.token_offset, s.kind, s.token_count, s.identity); }

}  // namespace

bool side_input_before(const SideInputIdentity& a, const SideInputIdentity& b) {
  return side_input_key(a) < side_input_key(b);
}

Status validate_compatibility_manifest(const CacheCompatibilityManifest& m) {
  if (!is_lower_hex64(m.cache_abi_sha256))
    return make_error(ErrorCode::invalid_manifest, "cache_abi_sha256 must be 64 lowercase hex digits",
                      "cache_abi_sha256");
  if (!is_lower_hex64(m.position_contract_sha256))
    return make_error(ErrorCode::invalid_manifest, "position_contract_sha256 must be 64 lowercase hex digits",
                      "position_contract_sha256");
  if (m.covered_token_ids.empty())
    return make_error(ErrorCode::invalid_manifest, "the covered interval has no tokens", "covered_token_ids");
  if (m.cache_isolation_namespace.empty())
    return make_error(ErrorCode::invalid_manifest, "cache_isolation_namespace is empty", "cache_isolation_namespace");
  const uint64_t covered = m.covered_token_ids.size();  // [tokens]
  for (size_t i = 0; i < m.input_side_data.size(); ++i) {
    const auto& s = m.input_side_data[i];
    const std::string field = "input_side_data[" + std::to_string(i) + "]";
    if (static_cast<uint8_t>(s.kind) > static_cast<uint8_t>(SideInputKind::prompt_embedding))
      return make_error(ErrorCode::invalid_manifest, "unknown side input kind " + std::to_string(int(s.kind)),
                        field + ".kind");
    if (s.identity.empty())
      return make_error(ErrorCode::invalid_manifest, "side input identity is empty", field + ".identity");
    if (s.token_count == 0)
      return make_error(ErrorCode::invalid_manifest, "side input covers no tokens", field + ".token_count");
    if (uint64_t{s.token_offset} + s.token_count > covered)
      return make_error(ErrorCode::invalid_manifest,
                        "side input covers tokens [" + std::to_string(s.token_offset) + "," +
                            std::to_string(uint64_t{s.token_offset} + s.token_count) +
                            ") outside the covered interval [0," + std::to_string(covered) + ")",
                        field + ".token_offset");
    if (i > 0 && !side_input_before(m.input_side_data[i - 1], s))
      return make_error(ErrorCode::invalid_manifest,
                        "side inputs are not in canonical order (token_offset, kind, token_count, identity) "
                        "or repeat an entry",
                        field);
  }
  return Status::success();
}

Result<CacheCompatibilityManifest> build_compatibility_manifest(const CacheLayoutManifest& layout,
                                                                const ArtifactIdentity& artifact,
                                                                const CacheIsolationNamespace& ns,
                                                                const CoveredInput& input) {
  KVRT_TRY(layout.validate());
  KVRT_TRY(validate_isolation_namespace(ns));
  if (ns.model_cache_generation != layout.model_generation)
    return make_error(ErrorCode::invalid_argument,
                      "namespace model_cache_generation " + std::to_string(ns.model_cache_generation) +
                          " is not the layout's model_generation " + std::to_string(layout.model_generation),
                      "model_cache_generation");

  CacheCompatibilityManifest m;
  m.cache_abi_sha256 = layout.logical_cache_abi_sha256;
  m.cache_layout_sha256 = layout.digest();
  m.model_generation = layout.model_generation;
  m.adapter_identity = artifact.adapter_identity;
  m.weight_transform_identity = artifact.weight_transform_identity;
  m.position_contract_sha256 = artifact.position_contract_sha256;
  m.covered_token_ids = input.token_ids;
  m.input_side_data = input.side_inputs;
  std::sort(m.input_side_data.begin(), m.input_side_data.end(), side_input_before);
  m.cache_isolation_namespace = namespace_name(ns);
  m.namespace_generation = ns.generation;
  m.cache_salt = ns.cache_salt;
  m.publication_generation = input.publication_generation;
  m.tokenizer_revision = input.provenance.tokenizer_revision;
  m.chat_template_revision = input.provenance.chat_template_revision;
  m.request_id = input.provenance.request_id;
  m.sampling_policy = input.provenance.sampling_policy;
  KVRT_TRY(validate_compatibility_manifest(m));
  return m;
}

}  // namespace kvrt
