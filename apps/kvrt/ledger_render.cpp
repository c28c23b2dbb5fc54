#include "apps/kvrt/ledger_render.hpp"

#include <iomanip>
#include <sstream>
#include <string>
#include <utility>

#include "services/common/units.hpp"

namespace kvrt::app {
namespace {

std::string mib(uint64_t bytes) { return format_mib(bytes) + " MiB"; }
std::string mib_signed(int64_t bytes) {
  if (bytes >= 0) return mib(static_cast<uint64_t>(bytes));
  std::string out(1, '-');  // built by append: GCC 12 misreports "-" + std::string (-Wrestrict)
  return out.append(mib(static_cast<uint64_t>(-(bytes + 1)) + 1));
}
std::string kib(uint64_t bytes) { return format_kib(bytes) + " KiB"; }

// A fractional byte count in KiB when it is whole, "n/d bytes" otherwise.
std::string fraction_bytes(const ExactFraction& f) {
  if (f.is_integer()) return kib(f.numerator);
  return f.to_string() + " bytes";
}

// Right-aligned column.
std::string col(const std::string& s, int width) {
  std::ostringstream o;
  o << std::setw(width) << s;
  return o.str();
}
std::string col(uint64_t v, int width) { return col(std::to_string(v), width); }

// What the two right-hand terms of each 0x0D identity are called when printed.
std::pair<const char*, const char*> identity_terms(LedgerIdentity id) {
  switch (id) {
    case LedgerIdentity::reserved_is_logical_plus_slack:
      return {"logical references", "rectangular slack"};
    case LedgerIdentity::request_view_is_logical_plus_tail:
      return {"logical references", "request-view tail"};
    case LedgerIdentity::unique_capacity_is_materialized_plus_tail:
      return {"unique materialized", "unique tail"};
    case LedgerIdentity::request_view_is_unique_capacity_plus_avoided:
      return {"unique capacity", "reference capacity avoided by sharing"};
    case LedgerIdentity::logical_is_materialized_plus_deduplicated:
      return {"unique materialized", "deduplicated payload"};
    case LedgerIdentity::pool_is_live_plus_idle:
      return {"live unique", "idle reusable"};
    default:
      return {"first term", "second term"};
  }
}

// Block ids in table order; a run of four or more consecutive ids prints as
// "first..last" so that long tables stay one readable line.
std::string block_list(const std::vector<PhysicalBlockId>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1].value == ids[j].value + 1) ++j;
    if (!s.empty()) s.push_back(' ');
    if (j - i >= 3) {
      s += std::to_string(ids[i].value);
      s += "..";
      s += std::to_string(ids[j].value);
      i = j + 1;
    } else {
      s += std::to_string(ids[i].value);
      ++i;
    }
  }
  return s;
}

void print_rows_and_requests(std::ostream& out, const LedgerReport& r) {
  const RowLedger& row = r.ledgers.row;
  out << "Row bytes (0x02A)\n";
  for (const GroupRowLedger& g : row.groups)
    out << "  group " << g.group_id.value << "   " << g.layers << " layers x " << g.kv_heads_local << " heads x "
        << g.head_dim << " lanes: K " << kib(g.k_row_bytes) << " + V " << kib(g.v_row_bytes) << " = "
        << kib(g.row_bytes) << "/token\n";
  out << "  B_row     " << kib(row.row_bytes) << "/token (" << row.row_bytes << " bytes) on this rank\n"
      << "  block     P = " << row.block_rows << " rows -> " << mib(row.block_bytes) << " per block\n\n";
  out << "Requests ("
      << (r.scenario.shared_prefix ? "nested exact prefix: shorter requests share the longest's blocks"
                                   : "private blocks: no sharing")
      << ")\n  req       T_r  T_max  blocks\n";
  for (const RequestView& v : r.input.requests)
    out << "  " << std::left << std::setw(5) << v.label << std::right << col(v.committed_rows, 8)
        << col(v.reserved_rows, 7) << "  " << block_list(v.blocks) << "\n";
  out << "\n";
}

void print_payload_ledgers(std::ostream& out, const ByteLedgers& l) {
  const auto& rect = l.rectangular;
  const auto& view = l.request_view;
  const auto& uniq = l.unique;
  const auto& save = l.savings;
  out << "Rectangular reference ledger (0x02B)\n"
      << "  logical      " << col(rect.logical_rows, 6) << " rows  " << mib(rect.logical_bytes) << "\n"
      << "  reserved     " << col(rect.reserved_rows, 6) << " rows  " << mib(rect.reserved_bytes) << "\n"
      << "  slack        " << col(rect.slack_rows, 6) << " rows  " << mib(rect.slack_bytes) << "\n"
      << "Paged request view (0x02C)\n"
      << "  capacity     " << col(view.slot_rows, 6) << " slots " << mib(view.capacity_bytes) << " ("
      << view.reference_blocks << " block-table references)\n"
      << "  logical      " << col(view.logical_rows, 6) << " rows  " << mib(view.logical_bytes) << "\n"
      << "  tail         " << col(view.tail_rows, 6) << " rows  " << mib(view.tail_bytes) << "\n"
      << "Unique physical (0x02D)\n"
      << "  capacity     " << col(uniq.slot_rows, 6) << " slots " << mib(uniq.capacity_bytes) << " ("
      << uniq.unique_blocks << " unique blocks {" << block_list(uniq.block_ids) << "})\n"
      << "  materialized " << col(uniq.materialized_rows, 6) << " rows  " << mib(uniq.materialized_bytes) << "\n"
      << "  tail         " << col(uniq.tail_rows, 6) << " rows  " << mib(uniq.tail_bytes) << "\n"
      << "Sharing savings (0x02D; the two need not be equal)\n"
      << "  logical payload deduplicated       " << col(std::to_string(save.deduplicated_rows), 6) << " rows  "
      << mib_signed(save.deduplicated_bytes) << "\n"
      << "  reference capacity avoided         " << col(save.avoided_rows, 6) << " slots " << mib(save.avoided_bytes)
      << " (" << save.avoided_blocks << " blocks)\n\n";
}

void print_identities_and_pool(std::ostream& out, const LedgerReport& r) {
  out << "Identities (0x0D)\n";
  for (const IdentityCheck& c : r.identities) {
    const auto [first, second] = identity_terms(c.identity);
    out << "  " << (c.holds() ? "ok    " : "BROKEN") << " " << mib_signed(c.total_bytes) << " = "
        << mib_signed(c.first_bytes) << " " << first << " + " << mib_signed(c.second_bytes) << " " << second << "\n";
  }
  out << "  every ledger identity reconciles (rows and bytes)\n\n";
  const PoolLedger& p = r.ledgers.pool;
  out << "Pool (0x02C; idle blocks are provisioned capacity, not fragmentation)\n"
      << "  provisioned  " << col(p.provisioned_blocks, 6) << " blocks " << mib(p.provisioned_bytes) << "\n"
      << "  live unique  " << col(p.live_blocks, 6) << " blocks " << mib(p.live_bytes) << "\n"
      << "  idle         " << col(p.idle_blocks, 6) << " blocks " << mib(p.idle_bytes) << "\n\n";
}

void print_metadata(std::ostream& out, const MetadataLedger& m) {
  auto line = [&](const char* what, uint64_t count, uint64_t size, uint64_t bytes) {
    out << "  " << std::left << std::setw(26) << what << std::right << col(count, 6) << " x " << col(size, 4)
        << " B = " << col(bytes, 8) << " B\n";
  };
  out << "Metadata (0x02E; declared synthetic record sizes, placement unspecified)\n";
  line("request-map entries", m.counts.request_block_refs, m.record_sizes.request_map_entry, m.request_map_bytes);
  line("block descriptors", m.counts.pool_blocks, m.record_sizes.block_descriptor, m.descriptor_bytes);
  line("cached full-block hashes", m.counts.cached_hashes, m.record_sizes.cached_hash_entry, m.cached_hash_bytes);
  line("valid-tail records", m.counts.live_requests, m.record_sizes.valid_tail_record, m.valid_tail_bytes);
  line("free-queue entries", m.counts.free_queue_entries, m.record_sizes.free_queue_entry, m.free_queue_bytes);
  out << "  " << std::left << std::setw(43) << "fixed" << std::right << col(m.fixed_bytes, 8) << " B\n"
      << "  " << std::left << std::setw(43) << "M_meta" << std::right << col(m.total_bytes, 8) << " B\n\n";
}

void print_arena_and_tail(std::ostream& out, const LedgerReport& r) {
  const ArenaReport& a = r.arena;
  out << "External fragmentation (0x02F; a ratio, never added to slack)\n"
      << "  arena " << mib(a.arena.arena_bytes()) << ", allocated " << mib(a.arena.allocated_bytes()) << " in "
      << a.arena.allocated().size() << " extents\n  free extents ";
  if (a.arena.free_extents().empty()) out << "none";
  for (size_t i = 0; i < a.arena.free_extents().size(); ++i) {
    const Extent& e = a.arena.free_extents()[i];
    out << (i ? ", " : "") << mib(e.bytes) << " @ " << mib(e.offset);
  }
  out << " (total " << mib(a.fragmentation.total_free_bytes) << ", largest " << mib(a.fragmentation.largest_free_bytes)
      << ")\n";
  if (a.fragmentation.state == FragmentationState::applicable)
    out << "  F_ext = 1 - " << mib(a.fragmentation.largest_free_bytes) << " / " << mib(a.fragmentation.total_free_bytes)
        << " = " << a.fragmentation.ratio->to_string() << " (" << std::setprecision(6)
        << a.fragmentation.ratio->to_double() << ")\n";
  else
    out << "  F_ext not_applicable: nothing is free\n";
  out << "  candidate " << mib(a.contiguous.candidate_bytes) << " contiguous: "
      << (a.contiguous.accepted() ? "accepted at " + mib(a.contiguous.placement->offset)
                                  : "rejected (largest free extent " + mib(a.contiguous.largest_free_bytes) + ")")
      << "\n  candidate " << mib(a.block_pool.candidate_bytes)
      << " in the block pool: " << (a.block_pool.accepted() ? "accepted" : "rejected") << " ("
      << a.block_pool.blocks_needed << " blocks of " << mib(a.block_pool.block_bytes) << " needed, "
      << a.block_pool.free_blocks << " idle)\n\n";
  out << "Expected tail waste (0x02G; terminal occupancy uniform on 1..P)\n"
      << "  (P-1)/2 = " << r.expected_tail_rows.to_string() << " slots x " << kib(r.ledgers.row.row_bytes) << " = "
      << fraction_bytes(r.expected_tail_bytes) << " per independent terminal block\n"
      << "  observed unique tail here: " << r.ledgers.unique.tail_rows
      << " slots (an expectation is not a prediction for one trace)\n";
}

void print_pressure(std::ostream& out, const CapacityPressure& c) {
  out << "\nCapacity pressure (0x0D model-wide illustration)\n"
      << "  prompt      " << c.prompt_tokens << " tokens = " << c.prompt_blocks << " blocks of " << mib(c.block_bytes)
      << ", " << mib(c.prompt_bytes) << "\n"
      << "  prefix hit  " << c.hit_blocks << " full blocks: " << c.prefill_tokens_skipped << " prefill tokens skipped, "
      << c.new_prompt_tokens << " to compute\n"
      << "  decode      " << c.generated_tokens << " generated tokens grow the cache by " << c.decode_rows_ordinary
      << " rows = " << mib(c.decode_bytes_ordinary) << " (ordinary stop), at most " << c.decode_rows_repair
      << " rows = " << mib(c.decode_bytes_repair) << " (repair append)\n";
}

nlohmann::json requests_json(const LedgerInput& input) {
  nlohmann::json out = nlohmann::json::array();
  for (const RequestView& v : input.requests) {
    nlohmann::json blocks = nlohmann::json::array();
    for (PhysicalBlockId p : v.blocks) blocks.push_back(p.value);
    out.push_back({{"label", v.label},
                   {"committed_rows", v.committed_rows},
                   {"reserved_rows", v.reserved_rows},
                   {"blocks", blocks}});
  }
  return out;
}

nlohmann::json fraction_json(const ExactFraction& f) {
  return {{"numerator", f.numerator}, {"denominator", f.denominator}, {"value", f.to_double()}};
}

}  // namespace

void print_ledger_report(std::ostream& out, const LedgerReport& r, const std::optional<CapacityPressure>& pressure) {
  out << "kvrt ledger: spec 0x02 byte ledgers, reconciled as in 0x0D\n"
      << "  scenario  " << r.scenario.origin << "\n"
      << "  layout    " << r.scenario.layout << " (" << r.manifest_id << ")\n\n";
  print_rows_and_requests(out, r);
  print_payload_ledgers(out, r.ledgers);
  print_identities_and_pool(out, r);
  print_metadata(out, r.ledgers.metadata);
  print_arena_and_tail(out, r);
  if (pressure) print_pressure(out, *pressure);
}

nlohmann::json ledger_report_json(const LedgerReport& r, const std::optional<CapacityPressure>& pressure) {
  const ByteLedgers& l = r.ledgers;
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupRowLedger& g : l.row.groups)
    groups.push_back({{"id", g.group_id.value},
                      {"layers", g.layers},
                      {"kv_heads_local", g.kv_heads_local},
                      {"head_dim", g.head_dim},
                      {"k_scalar_bytes", g.k_scalar_bytes},
                      {"v_scalar_bytes", g.v_scalar_bytes},
                      {"k_row_bytes", g.k_row_bytes},
                      {"v_row_bytes", g.v_row_bytes},
                      {"row_bytes", g.row_bytes},
                      {"block_bytes", g.block_bytes}});
  nlohmann::json unique_ids = nlohmann::json::array();
  for (PhysicalBlockId p : l.unique.block_ids) unique_ids.push_back(p.value);
  nlohmann::json identities = nlohmann::json::array();
  for (const IdentityCheck& c : r.identities)
    identities.push_back({{"identity", std::string(to_string(c.identity))},
                          {"total_bytes", c.total_bytes},
                          {"first_bytes", c.first_bytes},
                          {"second_bytes", c.second_bytes},
                          {"holds", c.holds()}});
  nlohmann::json free_extents = nlohmann::json::array();
  for (const Extent& e : r.arena.arena.free_extents())
    free_extents.push_back({{"offset", e.offset}, {"bytes", e.bytes}});
  const ExternalFragmentation& f = r.arena.fragmentation;
  nlohmann::json fragmentation{{"state", f.state == FragmentationState::applicable ? "applicable" : "not_applicable"},
                               {"total_free_bytes", f.total_free_bytes},
                               {"largest_free_bytes", f.largest_free_bytes},
                               {"ratio", f.ratio ? fraction_json(*f.ratio) : nlohmann::json(nullptr)}};
  const MetadataLedger& m = l.metadata;
  nlohmann::json out{
      {"scenario", r.scenario.origin},
      {"layout", r.scenario.layout},
      {"manifest_id", r.manifest_id},
      {"shared_prefix", r.scenario.shared_prefix},
      {"requests", requests_json(r.input)},
      {"row",
       {{"row_bytes", l.row.row_bytes},
        {"block_rows", l.row.block_rows},
        {"block_bytes", l.row.block_bytes},
        {"groups", groups}}},
      {"rectangular",
       {{"logical_rows", l.rectangular.logical_rows},
        {"reserved_rows", l.rectangular.reserved_rows},
        {"slack_rows", l.rectangular.slack_rows},
        {"logical_bytes", l.rectangular.logical_bytes},
        {"reserved_bytes", l.rectangular.reserved_bytes},
        {"slack_bytes", l.rectangular.slack_bytes}}},
      {"request_view",
       {{"reference_blocks", l.request_view.reference_blocks},
        {"slot_rows", l.request_view.slot_rows},
        {"logical_rows", l.request_view.logical_rows},
        {"tail_rows", l.request_view.tail_rows},
        {"capacity_bytes", l.request_view.capacity_bytes},
        {"logical_bytes", l.request_view.logical_bytes},
        {"tail_bytes", l.request_view.tail_bytes}}},
      {"unique_physical",
       {{"block_ids", unique_ids},
        {"unique_blocks", l.unique.unique_blocks},
        {"full_blocks", l.unique.full_blocks},
        {"slot_rows", l.unique.slot_rows},
        {"materialized_rows", l.unique.materialized_rows},
        {"tail_rows", l.unique.tail_rows},
        {"capacity_bytes", l.unique.capacity_bytes},
        {"materialized_bytes", l.unique.materialized_bytes},
        {"tail_bytes", l.unique.tail_bytes}}},
      {"sharing_savings",
       {{"deduplicated_rows", l.savings.deduplicated_rows},
        {"deduplicated_bytes", l.savings.deduplicated_bytes},
        {"avoided_blocks", l.savings.avoided_blocks},
        {"avoided_rows", l.savings.avoided_rows},
        {"avoided_bytes", l.savings.avoided_bytes}}},
      {"pool",
       {{"provisioned_blocks", l.pool.provisioned_blocks},
        {"live_blocks", l.pool.live_blocks},
        {"idle_blocks", l.pool.idle_blocks},
        {"provisioned_bytes", l.pool.provisioned_bytes},
        {"live_bytes", l.pool.live_bytes},
        {"idle_bytes", l.pool.idle_bytes}}},
      {"metadata",
       {{"record_bytes",
         {{"request_map_entry", m.record_sizes.request_map_entry},
          {"block_descriptor", m.record_sizes.block_descriptor},
          {"cached_hash_entry", m.record_sizes.cached_hash_entry},
          {"valid_tail_record", m.record_sizes.valid_tail_record},
          {"free_queue_entry", m.record_sizes.free_queue_entry},
          {"fixed", m.record_sizes.fixed}}},
        {"counts",
         {{"request_block_refs", m.counts.request_block_refs},
          {"pool_blocks", m.counts.pool_blocks},
          {"cached_hashes", m.counts.cached_hashes},
          {"live_requests", m.counts.live_requests},
          {"free_queue_entries", m.counts.free_queue_entries}}},
        {"request_map_bytes", m.request_map_bytes},
        {"descriptor_bytes", m.descriptor_bytes},
        {"cached_hash_bytes", m.cached_hash_bytes},
        {"valid_tail_bytes", m.valid_tail_bytes},
        {"free_queue_bytes", m.free_queue_bytes},
        {"fixed_bytes", m.fixed_bytes},
        {"total_bytes", m.total_bytes}}},
      {"identities", identities},
      {"arena",
       {{"arena_bytes", r.arena.arena.arena_bytes()},
        {"allocated_bytes", r.arena.arena.allocated_bytes()},
        {"free_extents", free_extents},
        {"external_fragmentation", fragmentation},
        {"candidate_bytes", r.arena.contiguous.candidate_bytes},
        {"contiguous_accepted", r.arena.contiguous.accepted()},
        {"block_pool",
         {{"block_bytes", r.arena.block_pool.block_bytes},
          {"blocks_needed", r.arena.block_pool.blocks_needed},
          {"free_blocks", r.arena.block_pool.free_blocks},
          {"accepted", r.arena.block_pool.accepted()}}}}},
      {"expected_tail_waste",
       {{"rows", fraction_json(r.expected_tail_rows)}, {"bytes", fraction_json(r.expected_tail_bytes)}}},
  };
  if (pressure)
    out["capacity_pressure"] = {{"prompt_tokens", pressure->prompt_tokens},
                                {"prompt_blocks", pressure->prompt_blocks},
                                {"prompt_bytes", pressure->prompt_bytes},
                                {"block_bytes", pressure->block_bytes},
                                {"hit_blocks", pressure->hit_blocks},
                                {"prefill_tokens_skipped", pressure->prefill_tokens_skipped},
                                {"new_prompt_tokens", pressure->new_prompt_tokens},
                                {"generated_tokens", pressure->generated_tokens},
                                {"decode_rows_ordinary", pressure->decode_rows_ordinary},
                                {"decode_bytes_ordinary", pressure->decode_bytes_ordinary},
                                {"decode_rows_repair", pressure->decode_rows_repair},
                                {"decode_bytes_repair", pressure->decode_bytes_repair}};
  return out;
}

}  // namespace kvrt::app
