#pragma once
// What both index owners of the node (the hash-chain PrefixService and the
// radix RadixBlockService) need to answer step 3 of the executable-reuse
// transaction (0x0CD): the reuse digests each namespace generation was
// published under, and one way to turn a match receipt into a candidate.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schema/prefix_types.hpp"
#include "services/authorization/namespace_grants.hpp"
#include "services/common/result.hpp"
#include "services/reuse/reuse_evidence.hpp"

namespace kvrt {

// (namespace, generation) -> the d_sem / d_layout of the grant its entries
// were published under: a candidate names its producer's digests.
class PublishedReuseDigests {
 public:
  void record(const SessionNamespaceGrant& grant);
  // invariant_violated when nothing was published under that generation
  // (a hit there would be an index that invented entries).
  Result<std::pair<Sha256Digest, Sha256Digest>> find(const std::string& namespace_name,
                                                     NamespaceGeneration generation) const;

 private:
  std::map<std::pair<std::string, uint64_t>, std::pair<Sha256Digest, Sha256Digest>> digests_;
};

// The candidate of a hit (m.runtime_hit_tokens > 0) of `op`: the covered
// interval [0, S_runtime), every matched handle bundle-major, the
// producer's digests, and the covered tokens' digest when the index
// compared the stored tokens during its walk (`witnessed`). Versions, path
// nodes and pool generations are the caller's.
Result<ReuseCandidate> candidate_of_hit(ReuseSource source, const PrefixMatchOp& op, const PrefixMatchReceipt& m,
                                        const PublishedReuseDigests& digests, bool witnessed);

}  // namespace kvrt
