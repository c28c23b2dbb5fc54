// summary_text: what `kvrt run` prints when it is done, about 30
// lines, verdict first; every figure carries its unit, every ratio follows
// report_facts.hpp (> 1 is better, "n/a" when undefined).
#include <string>
#include <vector>

#include "tools/report/report_facts.hpp"
#include "tools/report/report_format.hpp"
#include "tools/report/report_latency.hpp"

namespace kvrt::report {
namespace {

size_t display_chars(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}
std::string left(std::string s, size_t width) {
  const size_t n = display_chars(s);
  if (n < width) s.append(width - n, ' ');
  return s;
}
std::string right(const std::string& s, size_t width) {
  const size_t n = display_chars(s);
  return n < width ? std::string(width - n, ' ') + s : s;
}
std::string u(uint64_t v) { return std::to_string(v); }

// "a > b > c ..." wrapped at about 88 columns: a wrapped line ends with the
// separator (less its trailing space) so the reader sees the list goes on.
void append_wrapped(std::string& out, const std::vector<std::string>& parts, std::string_view separator) {
  std::string_view closing = separator;
  while (!closing.empty() && closing.back() == ' ') closing.remove_suffix(1);
  std::string line = "  ";
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t width = display_chars(line) + separator.size() + display_chars(parts[i]);
    if (i > 0 && width > 88) {
      out.append(line).append(closing).append("\n");
      line = "  " + parts[i];
    } else {
      if (i > 0) line += separator;
      line += parts[i];
    }
  }
  out += line + "\n";
}

void append_funnel(std::string& out, const RunReport& r) {
  out += "reuse funnel (0x0CF) [attempts]:";
  if (r.funnel_stages.empty()) {
    out += " no attempts recorded\n";
  } else {
    out += "\n";
    std::vector<std::string> stages;
    for (const auto& [name, count] : r.funnel_stages) stages.push_back(printable(name) + " " + u(count));
    append_wrapped(out, stages, " > ");
  }
  std::vector<std::string> rejections;
  for (const auto& [name, count] : r.rejection_buckets)
    if (count > 0) rejections.push_back(printable(name) + " " + u(count));
  if (rejections.empty()) rejections.push_back("none");
  out += "  rejections by bucket:\n";
  append_wrapped(out, rejections, ", ");
  out += "  node view: lookups " + u(r.node_reuse_requests) + ", candidates " + u(r.node_reuse_candidates) +
         ", leased " + u(r.node_reuse_leased) + ", not current " + u(r.node_reuse_not_current) +
         (r.quota_exceeded > 0 ? ", over quota " + u(r.node_reuse_quota_exceeded) + " (refused for quota in all " +
                                     u(r.quota_exceeded) + ")"
                               : std::string()) +
         "\n";
}

void append_memory(std::string& out, const RunReport& r) {
  const MemoryLedger& l = r.peak_ledger;
  const auto rect = static_cast<double>(l.rectangular_bytes);
  const auto saving = [&](uint64_t bytes) { return ratio_text(saving_ratio(rect, static_cast<double>(bytes))); };
  // The value column is wide enough for "0.00 MiB (482 bytes)".
  out += left("peak memory ledger (0x02)", 27) + right("[MiB]", 24) + "  saving vs rectangular\n";
  out += "  rectangular reservation  " + right(mib_text(l.rectangular_bytes), 24) + "  (the baseline)\n";
  out += "  request view             " + right(mib_text(l.request_view_bytes), 24) + "  " +
         saving(l.request_view_bytes) + "\n";
  out += "  unique physical          " + right(mib_text(l.unique_physical_bytes), 24) + "  " +
         saving(l.unique_physical_bytes) + "\n";
  out += "  provisioned pools        " + right(mib_text(l.pool_bytes), 24) + "\n";
  out += "  metadata                 " + right(mib_text(l.metadata_bytes), 24) + "\n";
  out += "pool utilisation: peak " + percent_text(r.pool_utilisation) + " of capacity";
  if (const UtilisationSample* peak = peak_sample(r))
    out += " (" + u(peak->used_blocks) + " of " + u(peak->capacity_blocks) + " blocks used, " +
           u(peak->evictable_blocks) + " evictable, at t = " + fixed(peak->t_s, 2) + " s; " + u(r.timeline.size()) +
           " samples)\n";
  if (const UtilisationSample* peak = peak_sample(r); peak && memory_efficiency(*peak))
    out += "K/V memory efficiency at peak: " + percent_text(*memory_efficiency(*peak)) +
           " (valid rows over the rows of referenced blocks)\n";
  else
    out += " (no timeline samples)\n";
}

void append_latency(std::string& out, const RunReport& r) {
  const auto owners = merge_owners(r.latencies);
  if (owners.empty()) {
    out += "receipt latency per owner: no samples\n";
    return;
  }
  out += left("receipt latency per owner", 28) + right("calls", 9) + right("p50 [us]", 12) + right("p99 [us]", 12) +
         right("max [us]", 12) + "\n";
  for (const auto& owner : owners) {
    const OwnerLatencySummary s = summarise(owner);
    out += "  " + left(printable(s.owner), 26) + right(u(s.calls), 9) + right(fixed(s.p50_us, 2), 12) +
           right(fixed(s.p99_us, 2), 12) + right(fixed(s.max_us, 2), 12) + "\n";
  }
}

void append_comparison(std::string& out, const RunReport& r) {
  if (r.comparison.empty()) return;
  out += "comparison (saving = baseline " + printable(r.comparison.front().mode) + " / mode, > 1 is better):\n";
  out += "  " + left("mode", 26) + right("rows computed", 14) + right("saving", 8) + right("KV read", 14) +
         right("saving", 8) + right("peak pool", 14) + right("saving", 8) + right("wall [s]", 10) + right("saving", 8) +
         right("all served", 11) + "\n";
  for (const auto& row : r.comparison) {
    const ComparisonRatios q = comparison_ratios(r.comparison.front(), row);
    out += "  " + left(printable(row.mode), 26) + right(u(row.prefill_rows_computed), 14) +
           right(ratio_text(q.prefill_rows_computed), 8) + right(mib_text(row.decode_kv_bytes_read), 14) +
           right(ratio_text(q.decode_kv_bytes_read), 8) + right(mib_text(row.peak_pool_bytes), 14) +
           right(ratio_text(q.peak_pool_bytes), 8) + right(fixed(row.wall_s, 2), 10) + right(ratio_text(q.wall_s), 8) +
           right(row.complete ? "yes" : "NO", 11) + "\n";
  }
}

}  // namespace

std::string summary_text(const RunReport& r) {
  std::string out = verdict_line(r) + "\n";
  out += "run: workload " + printable(r.workload_name) + " (" + printable(r.workload_origin) + "), layout " +
         printable(r.layout_id) + ", " + printable(r.prefix_index) + " index, " + printable(r.reuse_policy) +
         " reuse, " + u(r.workers) + " workers, " + fixed(r.wall_s, 2) + " s wall, started " + printable(r.started_at) +
         "\n";
  out += "work: " + u(r.requests) + " requests, " + u(r.tokens_requested) + " tokens requested (" + u(r.prompt_tokens) +
         " prompt + " + u(r.decode_tokens) + " generated)\n";
  out += "prefill: " + u(r.prefill_rows_computed) + " rows computed, " + u(r.prefill_rows_reused) + " rows reused (" +
         percent_text(reuse_ratio(r.prefill_rows_reused, r.prefill_rows_computed)) + " of prompt rows reused)" +
         (r.prefill_rows_forked > 0 ? ", " + u(r.prefill_rows_forked) + " rows shared by fork branches" : "") +
         (r.partial_tail_rows_copied > 0
              ? ", " + u(r.partial_tail_rows_copied) + " reused rows copied out of partial tails"
              : "") +
         "\n";
  out += "reused rows by index: hash chain " + u(r.reused_by_hash_chain) + " rows, radix " + u(r.reused_by_radix) +
         " rows";
  if (const uint64_t other = unattributed_reuse(r); other > 0) out += ", unattributed " + u(other) + " rows";
  out += "\n";
  if (r.shared_execution.site == "worker")
    out += "shared-prefix reads (0x0BC): " + u(r.shared_prefix_rows_read_once) + " rows read once per batch, " +
           u(r.shared_prefix_rows_per_request) + " rows had each request read them (" +
           ratio_text(saving_ratio(static_cast<double>(r.shared_prefix_rows_per_request),
                                   static_cast<double>(r.shared_prefix_rows_read_once))) +
           " fewer reads)\n";
  if (const auto& x = r.shared_execution; x.site == "node")
    out += "shared-prefix execution on the node's executor (design " + x.design + "): " + u(x.batches) + " batches, " +
           u(x.ops) + " ops (hydragen " + u(x.hydragen) + ", chunk_attention " + u(x.chunk_attention) +
           ", per request " + u(x.per_request) + "), trees of up to " + u(x.max_levels) + " shared levels (" +
           u(x.multi_level_ops) + " ops over more than one), " + u(x.rows_read) + " committed rows read vs " +
           u(x.rows_per_request) + " per request (" +
           ratio_text(saving_ratio(static_cast<double>(x.rows_per_request), static_cast<double>(x.rows_read))) +
           " fewer), " + u(x.refusals) + " refused\n";
  if (r.pools.staged)
    out += "pools (" + r.pools.backend + ") staged through host copies: " + u(r.pools.rows_loaded) + " rows loaded, " +
           u(r.pools.rows_stored) + " rows stored\n";
  if (const auto& t = r.session_tier; t.used)
    out += "session tier (0x0CC): " + u(t.saves) + " histories saved (" + u(t.saved_bytes) + " B), " +
           u(t.turns_resumed) + " turns resumed loading " + u(t.rows_loaded) + " rows past their hits, " +
           u(t.resume_refusals) + " resumes refused; loading took " + fixed(t.load_s, 3) + " s against about " +
           fixed(t.recompute_s, 3) + " s to compute those rows at this run's prefill rate" + " (saving took " +
           fixed(t.save_s, 3) + " s); loaded rows are checked like reused rows\n";
  if (const auto& p = r.prompt_cache; p.used) {
    std::string misses;
    for (const auto& [reason, n] : p.node_misses)
      if (n > 0) {
        misses += misses.empty() ? "" : ", ";
        misses += reason;
        misses += " ";
        misses += u(n);
      }
    out += "prompt cache (0x0CB): " + u(p.requests) + " templated prompts, " + u(p.modules_reused) +
           " modules reused (" + u(p.module_rows_reused) + " rows), " + u(p.modules_computed) +
           " computed alone at their declared positions (" + u(p.module_rows_computed) + " rows; " +
           u(p.misses_not_computed) + " never computed before, " + u(p.misses_incompatible) + " incompatible), " +
           u(p.modules_published) + " published, " + u(p.stale_schema) +
           " calls refused for an older schema generation; copying took " + fixed(p.copy_s, 3) + " s against about " +
           fixed(p.recompute_s, 3) +
           " s to compute those rows at this run's prefill rate; reused module rows are checked like reused rows\n";
    if (!misses.empty()) out += "  the node's module misses by reason: " + misses + "\n";
  }
  if (const auto& v = r.virtual_pages; v.used)
    out += "virtual reservations (0x06): " + u(v.steps) + " mapper steps (" + u(v.steps_infeasible) +
           " short of handles), " + u(v.pages_mapped) + " pages mapped, " + u(v.bundles_reclaimed) +
           " bundles reclaimed (node: " + u(v.node_bundle_maps) + " bundles mapped, " + u(v.node_bundle_unmaps) +
           " unmapped, " + u(v.node_map_ahead_hits) + " page maps done ahead, " + u(v.node_map_ahead_foreground_maps) +
           " in the step), " + u(v.retained_slot_reuses) + " slots bound with retained pages (" +
           u(v.retained_pages_reused) + " pages); M_VA " + u(v.reserved_bytes) + " B, M_phys,pool " + u(v.pool_bytes) +
           " B, peak M_mapped " + u(v.mapped_peak_bytes) + " B (" + u(v.active_valid_at_peak_bytes) +
           " B of valid rows); " + u(v.pages_mapped_ahead) + " pages mapped ahead of use, " +
           percent_text(v.hidden_fraction()) +
           " of the workers' view mapping hidden behind forwards; prefix hits copied in from the block pools, " +
           u(v.tier_refusals) + " prompts the pools refused\n";
  if (!r.physical_modes.empty()) {
    out += "physical modes (--compare-physical):\n";
    for (const auto& m : r.physical_modes) {
      out += "  " + printable(m.layout_id) + " (" + printable(m.physical_mode) +
             "): " + (m.exact ? "exact" : "NOT EXACT") + ", " + fixed(m.wall_s, 2) + " s, " +
             u(m.prefill_rows_computed) + " prompt rows computed, " + u(m.prefill_rows_reused) + " reused";
      if (m.virtual_pages.used)
        out += ", " + u(m.virtual_pages.pages_mapped) + " pages mapped, " + u(m.virtual_pages.bundles_reclaimed) +
               " bundles reclaimed, map step p50 " + fixed(m.virtual_pages.map_step_p50_us, 1) + " us / p99 " +
               fixed(m.virtual_pages.map_step_p99_us, 1) + " us, " + percent_text(m.virtual_pages.hidden_fraction()) +
               " of view mapping hidden, M_VA " + u(m.virtual_pages.reserved_bytes) + " B, M_phys,pool " +
               u(m.virtual_pages.pool_bytes) + " B, peak M_mapped " + u(m.virtual_pages.mapped_peak_bytes) + " B";
      else
        out += ", peak unique physical " + u(m.peak_unique_physical_bytes) + " B";
      out += "\n";
    }
  }
  append_funnel(out, r);
  append_memory(out, r);
  append_latency(out, r);
  out += "node after shutdown: " + std::to_string(r.leaked_blocks) + " leaked blocks, refcount delta " +
         std::to_string(r.refcount_delta) + ", validate " + (r.validate_ok ? "ok" : "FAILED") + ", " +
         u(r.operation_errors) + " operation errors\n";
  if (const auto rows = updates_rows(r.updates); !rows.empty()) {
    out += "updates on the live node (0x01A, 0x0CE):\n";
    for (const auto& [label, value] : rows) out += "  " + left(label, 38) + printable(value) + "\n";
  }
  append_comparison(out, r);
  if (!r.trace_path.empty()) out += "trace: " + printable(r.trace_path) + "\n";
  return out;
}

}  // namespace kvrt::report
