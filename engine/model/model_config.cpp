// [model] table of a TOML file (config/model.toml documents every key, its
// unit, default and range). Every key is optional; a key this reader does not
// know is an error, so a misspelt "mlp_dims = 512" cannot silently run the
// default model.
#include <cmath>
#include <optional>
#include <string>

#include "services/common/toml_reader.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/model/reference_model.hpp"

namespace kvrt::model {
namespace {

constexpr const char* kTable = "model";
constexpr const char* kKeys[] = {"seed", "vocab", "d_model", "q_heads_per_kv", "mlp_dim", "rope_theta", "threads"};

Result<uint32_t> size_field(const TomlReader& r, const toml::table& t, const char* key, uint32_t fallback) {
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, r.integer(t, kTable, key, int64_t{fallback}, 1, UINT32_MAX));
  return static_cast<uint32_t>(v);
}

// rope_theta may be written as an integer (10000) or a float (1e4).
Result<double> theta_field(const TomlReader& r, const toml::table& t, double fallback) {
  const toml::node* node = t.get("rope_theta");
  if (node == nullptr) return fallback;
  std::optional<double> v;
  if (node->is_floating_point()) v = node->value<double>();
  if (node->is_integer()) v = double(*node->value<int64_t>());
  if (!v) return r.field_error(node, kTable, "rope_theta", "must be a number");
  if (!std::isfinite(*v) || *v <= 1.0) return r.field_error(node, kTable, "rope_theta", "must be finite and above 1");
  return *v;
}

Result<ModelConfig> read_model_config(const TomlReader& r) {
  ModelConfig c;
  const toml::node* node = r.root().get(kTable);
  if (node == nullptr) return c;
  const toml::table* t = node->as_table();
  if (t == nullptr) return r.field_error(node, "", kTable, "must be a table");
  for (const auto& [key, value] : *t) {
    bool known = false;
    for (const char* k : kKeys) known = known || key.str() == k;
    if (!known) return r.field_error(&value, kTable, std::string(key.str()), "unknown key");
  }
  int64_t seed = 0;
  KVRT_TRY_ASSIGN(seed, r.integer(*t, kTable, "seed", int64_t(c.seed), 0));
  c.seed = static_cast<uint64_t>(seed);
  KVRT_TRY_ASSIGN(c.vocab, size_field(r, *t, "vocab", c.vocab));
  KVRT_TRY_ASSIGN(c.d_model, size_field(r, *t, "d_model", c.d_model));
  KVRT_TRY_ASSIGN(c.q_heads_per_kv, size_field(r, *t, "q_heads_per_kv", c.q_heads_per_kv));
  KVRT_TRY_ASSIGN(c.mlp_dim, size_field(r, *t, "mlp_dim", c.mlp_dim));
  KVRT_TRY_ASSIGN(c.rope_theta, theta_field(r, *t, c.rope_theta));
  KVRT_TRY_ASSIGN(c.threads, size_field(r, *t, "threads", c.threads));
  // The upper limits (check_model_config): reported at the key's line.
  const Status limits = check_model_config(c);
  if (!limits.ok()) {
    const std::string& field = limits.error().field;
    return r.field_error(t->get(field), kTable, field, limits.error().reason);
  }
  return c;
}

}  // namespace

Result<ModelConfig> load_model_config(const std::string& path) {
  auto reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return read_model_config(*reader);
}

Result<ModelConfig> parse_model_config(std::string_view text, const std::string& origin) {
  auto reader = TomlReader::parse(text, origin);
  if (!reader.ok()) return reader.error();
  return read_model_config(*reader);
}

}  // namespace kvrt::model
