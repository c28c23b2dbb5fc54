#include "services/reuse/reuse_candidates.hpp"

namespace kvrt {

void PublishedReuseDigests::record(const SessionNamespaceGrant& grant) {
  digests_.insert_or_assign(std::pair{grant.namespace_name, grant.generation.value},
                            std::pair{grant.semantic_digest, grant.layout_digest});
}

Result<std::pair<Sha256Digest, Sha256Digest>> PublishedReuseDigests::find(const std::string& namespace_name,
                                                                          NamespaceGeneration generation) const {
  const auto it = digests_.find(std::pair{namespace_name, generation.value});
  if (it == digests_.end())
    return make_error(ErrorCode::invariant_violated, "a hit in a namespace generation nothing was published under",
                      "namespace_generation");
  return it->second;
}

Result<ReuseCandidate> candidate_of_hit(ReuseSource source, const PrefixMatchOp& op, const PrefixMatchReceipt& m,
                                        const PublishedReuseDigests& digests, bool witnessed) {
  std::pair<Sha256Digest, Sha256Digest> d;
  KVRT_TRY_ASSIGN(d, digests.find(op.namespace_name, m.namespace_generation));
  ReuseCandidate c;
  c.source = source;
  c.namespace_name = op.namespace_name;
  c.namespace_generation = m.namespace_generation;
  c.semantic_digest = d.first;
  c.layout_digest = d.second;
  c.covered_interval = TokenInterval{0, m.runtime_hit_tokens};
  for (const MatchedBlockBundle& b : m.matched_group_handles)
    c.physical_handles.insert(c.physical_handles.end(), b.handles.begin(), b.handles.end());
  if (witnessed) {
    const std::vector<uint32_t> covered(op.tokens.begin(), op.tokens.begin() + m.runtime_hit_tokens);
    c.token_witness = covered_tokens_digest(covered);
  }
  return c;
}

}  // namespace kvrt
