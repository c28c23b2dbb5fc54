#include "tests/spec_lab/radix_mutation_receipt.hpp"

namespace kvrt {

std::string_view to_string(RadixMutationKind kind) {
  switch (kind) {
    case RadixMutationKind::probe:
      return "probe";
    case RadixMutationKind::acquire:
      return "acquire";
    case RadixMutationKind::handoff:
      return "handoff";
    case RadixMutationKind::admit_handoff:
      return "admit_handoff";
    case RadixMutationKind::publish_finished:
      return "publish_finished";
    case RadixMutationKind::publish_unfinished:
      return "publish_unfinished";
    case RadixMutationKind::release:
      return "release";
    case RadixMutationKind::reserve:
      return "reserve";
    case RadixMutationKind::release_private:
      return "release_private";
    case RadixMutationKind::evict:
      return "evict";
    case RadixMutationKind::evict_leaf:
      return "evict_leaf";
  }
  return "unknown";
}

}  // namespace kvrt
