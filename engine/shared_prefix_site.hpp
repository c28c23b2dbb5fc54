#pragma once
// Where and how `kvrt run`'s workers run shared-prefix decode (0x0BA-0x0BD),
// with the names the run config and the command line spell them in.
// Header-only, so the run config's loader reads them without the engine.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "schema/executor_types.hpp"
#include "services/common/result.hpp"

namespace kvrt {

enum class SharedPrefixSite : uint8_t {
  // In the worker: Hydragen over the one level every member shares
  // (ReferenceModel::forward_shared_prefix).
  worker = 0,
  // On the node's executor owner (ExecuteBatch.shared): the node builds the
  // members' whole prefix tree from their block tables (several levels:
  // system prompt, then document, then question) and runs the design asked
  // for over their committed rows; the worker merges each new row itself
  // (ReferenceModel::forward_decode_merged).
  node = 1,
};

inline constexpr std::array<std::pair<std::string_view, SharedPrefixSite>, 2> kSharedPrefixSiteNames{{
    {"worker", SharedPrefixSite::worker},
    {"node", SharedPrefixSite::node},
}};
inline constexpr std::array<std::pair<std::string_view, SharedPrefixDesign>, 4> kSharedPrefixDesignNames{{
    {"auto", SharedPrefixDesign::auto_},
    {"hydragen", SharedPrefixDesign::hydragen},
    {"chunk_attention", SharedPrefixDesign::chunk_attention},
    {"per_request", SharedPrefixDesign::per_request},
}};

namespace detail {
template <class Value, size_t N>
std::string_view name_of(const std::array<std::pair<std::string_view, Value>, N>& names, Value value) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "unknown";
}
template <class Value, size_t N>
Result<Value> parse_name(const std::array<std::pair<std::string_view, Value>, N>& names, std::string_view text,
                         const std::string& field) {
  std::string choices;
  for (const auto& [name, v] : names) {
    if (name == text) return v;
    choices += (choices.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  }
  return make_error(ErrorCode::invalid_argument,
                    field + " must be one of " + choices + ", not \"" + std::string(text) + "\"", field);
}
}  // namespace detail

inline std::string_view to_string(SharedPrefixSite site) { return detail::name_of(kSharedPrefixSiteNames, site); }
inline std::string_view to_string(SharedPrefixDesign design) {
  return detail::name_of(kSharedPrefixDesignNames, design);
}
// invalid_argument naming `field` and every accepted word for any other word.
inline Result<SharedPrefixSite> parse_shared_prefix_site(std::string_view text, const std::string& field) {
  return detail::parse_name(kSharedPrefixSiteNames, text, field);
}
inline Result<SharedPrefixDesign> parse_shared_prefix_design(std::string_view text, const std::string& field) {
  return detail::parse_name(kSharedPrefixDesignNames, text, field);
}

}  // namespace kvrt
