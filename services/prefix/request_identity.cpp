#include "services/prefix/request_identity.hpp"

namespace kvrt {
namespace {

void put(std::string& out, const std::string& field) {
  const uint64_t n = field.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(field);
}

}  // namespace

Status validate_identity(const RequestIdentity& id) {
  if (id.adapter_id.empty() && !id.adapter_version.empty())
    return make_error(ErrorCode::invalid_argument, "an adapter version needs an adapter id",
                      "identity.adapter_version");
  for (size_t i = 0; i < id.multimodal.size(); ++i) {
    const MultimodalItem& m = id.multimodal[i];
    const std::string field = "identity.multimodal[" + std::to_string(i) + "]";
    if (m.identifier.empty())
      return make_error(ErrorCode::invalid_argument, "a multimodal input needs an identifier", field);
    if (m.length == 0)
      return make_error(ErrorCode::invalid_argument, "a multimodal input occupies at least one position", field);
    if (uint64_t{m.offset} + m.length > UINT32_MAX)
      return make_error(ErrorCode::invalid_argument, "a multimodal input ends past the last position", field);
  }
  for (size_t i = 0; i < id.prompt_embedding_sha256.size(); ++i) {
    Sha256Digest d;
    const std::string& hex = id.prompt_embedding_sha256[i];
    bool lower = true;
    for (char c : hex) lower = lower && !(c >= 'A' && c <= 'F');
    if (hex.size() != 64 || !lower || !Sha256Digest::from_hex(hex, d))
      return make_error(ErrorCode::invalid_argument, "a prompt-embedding digest is 64 lowercase hex digits",
                        "identity.prompt_embedding_sha256[" + std::to_string(i) + "]");
  }
  return Status::success();
}

Result<RequestExtras> identity_extras(const RequestIdentity& id, const std::string& namespace_salt) {
  KVRT_TRY(validate_identity(id));
  RequestExtras extras;
  if (!id.adapter_id.empty()) extras.lora_name = id.adapter_id + "\x1fv" + id.adapter_version;
  extras.cache_salt = namespace_salt;
  if (!id.cache_salt.empty()) extras.cache_salt.append("\x1fr").append(id.cache_salt);
  for (const MultimodalItem& m : id.multimodal)
    extras.mm_features.push_back(MultimodalFeatureRef{m.identifier, m.offset, m.length});
  for (const std::string& hex : id.prompt_embedding_sha256) {
    Sha256Digest d;
    (void)Sha256Digest::from_hex(hex, d);
    extras.prompt_embedding_digests.push_back(d);
  }
  KVRT_TRY(extras.validate());
  return extras;
}

Result<std::string> identity_material(const RequestIdentity& id) {
  KVRT_TRY(validate_identity(id));
  std::string out;
  if (id.adapter_id.empty() && id.multimodal.empty() && id.prompt_embedding_sha256.empty() && id.cache_salt.empty())
    return out;
  put(out, id.adapter_id);
  put(out, id.adapter_version);
  put(out, std::to_string(id.multimodal.size()));
  for (const MultimodalItem& m : id.multimodal) {
    put(out, m.identifier);
    put(out, std::to_string(m.offset) + ":" + std::to_string(m.length));
  }
  put(out, std::to_string(id.prompt_embedding_sha256.size()));
  for (const std::string& hex : id.prompt_embedding_sha256) put(out, hex);
  put(out, id.cache_salt);
  return out;
}

}  // namespace kvrt
