#include "services/prefix/prefix_match_receipt.hpp"

namespace kvrt {

Sha256Digest canonical_digest(const PrefixMatchReceipt& r) {
  // Every field except receipt_sha256, in declaration order, each tagged so
  // that a moved or omitted field changes the digest (digest.hpp).
  CanonicalWriter w("kvrt.PrefixMatchReceipt.v1");
  w.u64("request_id", r.request_id.value)
      .u32("request_generation", r.request_generation.value)
      .u64("index_snapshot_id", r.index_snapshot_id.value)
      .u64("index_publication_generation", r.index_publication_generation)
      .digest("compatibility_manifest_sha256", r.compatibility_manifest_sha256)
      .str("namespace_id", r.namespace_id)
      .u64("namespace_generation", r.namespace_generation.value)
      .str("policy_id", r.policy_id)
      .u32("alignment_tokens", r.alignment_tokens)
      .u8("logits_path", static_cast<uint8_t>(r.logits_path))
      .u32("prompt_tokens", r.prompt_tokens)
      .u32("semantic_match_tokens", r.semantic_match_tokens)
      .u32("indexed_match_tokens", r.indexed_match_tokens)
      .u32("reuse_cap_tokens", r.reuse_cap_tokens)
      .u32("runtime_hit_tokens", r.runtime_hit_tokens)
      .u32("prompt_rows_recomputed", r.prompt_rows_recomputed);
  w.begin_list("matched_group_handles", r.matched_group_handles.size());
  for (const auto& bundle : r.matched_group_handles) {
    w.u32("logical_block", bundle.logical_block);
    w.begin_list("handles", bundle.handles.size());
    for (const auto& h : bundle.handles)
      w.u32("pool", h.pool.value)
          .u32("group", h.group.value)
          .u32("block", h.block.value)
          .u32("generation", h.generation.value);
  }
  w.u32("new_block_bundles", r.new_block_bundles)
      .u32("copy_valid_partial_rows", r.copy_valid_partial_rows)
      .u64("lease_id", r.lease_id.value);
  return w.finish();
}

}  // namespace kvrt
