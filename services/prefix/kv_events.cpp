#include "services/prefix/kv_events.hpp"

#include <nlohmann/json.hpp>

namespace kvrt {

namespace {

nlohmann::ordered_json hashes_json(const std::vector<BlockHash>& hashes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& h : hashes) out.push_back(h.hex());
  return out;
}

struct ToJson {
  nlohmann::ordered_json operator()(const KvBlockStored& e) const {
    nlohmann::ordered_json j;
    j["type"] = "BlockStored";
    j["block_hashes"] = hashes_json(e.block_hashes);
    j["parent_block_hash"] = e.parent_block_hash ? nlohmann::ordered_json(e.parent_block_hash->hex()) : nullptr;
    j["token_ids"] = e.token_ids;
    j["block_size"] = e.block_size;
    j["lora_name"] = e.lora_name ? nlohmann::ordered_json(*e.lora_name) : nullptr;
    j["medium"] = e.medium;
    j["group_idx"] = e.group_index;
    return j;
  }
  nlohmann::ordered_json operator()(const KvBlockRemoved& e) const {
    nlohmann::ordered_json j;
    j["type"] = "BlockRemoved";
    j["block_hashes"] = hashes_json(e.block_hashes);
    j["medium"] = e.medium;
    j["group_idx"] = e.group_index;
    return j;
  }
  nlohmann::ordered_json operator()(const KvAllBlocksCleared&) const {
    nlohmann::ordered_json j;
    j["type"] = "AllBlocksCleared";
    return j;
  }
};

}  // namespace

void KvEventRecorder::on_event(const KvEvent& event) { events_.push_back(event); }

std::string to_json(const KvEvent& event) { return std::visit(ToJson{}, event).dump(); }

}  // namespace kvrt
