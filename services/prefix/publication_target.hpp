#pragma once
// PublicationTarget: the allocator facts a prefix publication reads and the
// one allocator mutation it makes (tagging a full block with its weak cache
// identity, 0x04B). The prefix index and the allocator are separate owners
// (docs/architecture.md): in one process the index publishes straight into a
// BlockAllocator (AllocatorPublicationTarget); behind actors it publishes into
// a snapshot of the request's tables read from the allocator owner, and the
// recorded tags travel to the allocator as one message afterwards
// (BlockTableSnapshotTarget). The index's own checks are the same
// either way.
#include <cstdint>
#include <vector>

#include "services/allocator/allocator_requests.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/common/result.hpp"

namespace kvrt {

class PublicationTarget {
 public:
  virtual ~PublicationTarget() = default;
  virtual uint32_t group_count() const = 0;
  virtual uint32_t block_size() const = 0;  // [tokens]
  virtual Result<std::vector<PhysicalBlockHandle>> table(RequestId request, uint32_t group_index) const = 0;
  virtual Result<BlockMeta> block(const PhysicalBlockHandle& handle) const = 0;
  // Attaches the weak identity; only called for blocks block() answered with
  // cache_key 0 and enough valid rows.
  virtual Status publish_cache_key(const PhysicalBlockHandle& handle, CacheKey cache_key) = 0;
  // The allocator itself when it is in this process (the index then fences
  // existing entries by generation); nullptr when only absorbed events say
  // which entries are current.
  virtual const BlockAllocator* currency() const = 0;
};

// Publication straight into an in-process allocator.
class AllocatorPublicationTarget final : public PublicationTarget {
 public:
  explicit AllocatorPublicationTarget(BlockAllocator& allocator) : allocator_(allocator) {}
  uint32_t group_count() const override { return allocator_.group_count(); }
  uint32_t block_size() const override { return allocator_.block_size(); }
  Result<std::vector<PhysicalBlockHandle>> table(RequestId request, uint32_t group_index) const override {
    return allocator_.table(request, group_index);
  }
  Result<BlockMeta> block(const PhysicalBlockHandle& handle) const override { return allocator_.block(handle); }
  Status publish_cache_key(const PhysicalBlockHandle& handle, CacheKey cache_key) override {
    Result<AllocationReceipt> receipt = allocator_.publish_cache_key(handle, cache_key);
    if (!receipt.ok()) return receipt.error();
    return Status::success();
  }
  const BlockAllocator* currency() const override { return &allocator_; }

 private:
  BlockAllocator& allocator_;
};

// One block of a request table as the allocator owner reported it.
struct SnapshotBlock {
  PhysicalBlockHandle handle;
  uint32_t valid_rows = 0;  // [rows]
  CacheKey cache_key;       // kNoCacheKey = no weak identity
};

// Publication into a snapshot of one request's tables (the allocator owner's
// BlockTableView). Tags are recorded, not applied: the caller sends them to
// the allocator and, for any the allocator refuses (the block changed since
// the snapshot), tells the index with PrefixIndex::absorb of a
// cache_key_evicted event, so the index never keeps an identity the
// allocator does not hold.
class BlockTableSnapshotTarget final : public PublicationTarget {
 public:
  BlockTableSnapshotTarget(RequestId request, uint32_t block_tokens, std::vector<std::vector<SnapshotBlock>> groups)
      : request_(request), block_tokens_(block_tokens), groups_(std::move(groups)) {}
  uint32_t group_count() const override { return static_cast<uint32_t>(groups_.size()); }
  uint32_t block_size() const override { return block_tokens_; }
  Result<std::vector<PhysicalBlockHandle>> table(RequestId request, uint32_t group_index) const override;
  Result<BlockMeta> block(const PhysicalBlockHandle& handle) const override;
  Status publish_cache_key(const PhysicalBlockHandle& handle, CacheKey cache_key) override;
  const BlockAllocator* currency() const override { return nullptr; }

  const std::vector<CacheKeyTag>& tags() const { return tags_; }

 private:
  const SnapshotBlock* find(const PhysicalBlockHandle& handle) const;
  RequestId request_;
  uint32_t block_tokens_ = 0;
  std::vector<std::vector<SnapshotBlock>> groups_;  // [group][logical block]
  std::vector<CacheKeyTag> tags_;
};

}  // namespace kvrt
