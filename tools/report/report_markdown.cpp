// report.md: the run report a person reads, as plain Markdown that
// also renders well: run facts, the verdict, then one section per concern
// (work, reuse, funnel, memory, latency, workers, comparison, node), each
// with a one-line explanation citing the spec and a table with units. The
// three plots are embedded by file name; they sit next to report.md.
#include <cctype>
#include <string>
#include <vector>

#include "tools/report/report_facts.hpp"
#include "tools/report/report_format.hpp"
#include "tools/report/report_latency.hpp"
#include "tools/report/report_render.hpp"

namespace kvrt::report {
namespace {

// A printable string with Markdown's inline syntax characters escaped, so a
// workload named "a|b" or "*x*" neither breaks a table nor becomes emphasis.
// An underscore between two letters or digits cannot open emphasis
// (CommonMark intraword rule), so identifiers like index_miss stay readable.
std::string md(std::string_view text) {
  const std::string clean = printable(text);
  const auto word = [&](size_t i) { return i < clean.size() && std::isalnum(static_cast<unsigned char>(clean[i])); };
  std::string out;
  for (size_t i = 0; i < clean.size(); ++i) {
    const char c = clean[i];
    const bool intraword_underscore = c == '_' && i > 0 && word(i - 1) && word(i + 1);
    if (!intraword_underscore && std::string_view("\\`*_[]<>|#!&~").find(c) != std::string_view::npos)
      out.push_back('\\');
    out.push_back(c);
  }
  return out;
}
std::string u(uint64_t v) { return std::to_string(v); }

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // right-aligned columns

  std::string render() const {
    std::string out = "|";
    for (const auto& h : header) out += " " + h + " |";
    out += "\n|";
    for (size_t i = 0; i < header.size(); ++i) out += i < numeric.size() && numeric[i] ? " ---: |" : " --- |";
    out += "\n";
    for (const auto& row : rows) {
      out += "|";
      for (const auto& cell : row) out += " " + cell + " |";
      out += "\n";
    }
    return out + "\n";
  }
};

std::string share(uint64_t part, uint64_t whole) {
  return whole == 0 ? "n/a" : percent_text(static_cast<double>(part) / static_cast<double>(whole));
}

void run_facts(std::string& out, const RunReport& r) {
  out += "# kvrt run report: " + md(r.workload_name) + "\n\n";
  Table t{{"run", "value"}, {}, {}};
  t.rows = {{"workload", md(r.workload_name)},
            {"workload origin", md(r.workload_origin)},
            {"layout", md(r.layout_id)},
            {"prefix index, reuse policy (0x07D)", md(r.prefix_index) + ", " + md(r.reuse_policy)},
            {"started (UTC)", md(r.started_at)},
            {"workers", u(r.workers)},
            {"wall time (workers started .. last worker done)", fixed(r.wall_s, 3) + " s"},
            {"trace", r.trace_path.empty() ? "none (run with --trace)" : md(r.trace_path)}};
  out += t.render();
}

void verdict(std::string& out, const RunReport& r) {
  out += "## Verdict\n\n**" + md(verdict_line(r)) + "**\n\n";
  out +=
      "Exact means every request generated the tokens a run without reuse or sharing generated, and every "
      "reused K/V row is bitwise equal to the recomputed one: fallback may lose reuse, never exactness (0x00B).\n\n";
  Table t{{"check", "compared", "mismatches"}, {}, {false, true, true}};
  t.rows = {{"generated tokens, per request", u(r.requests_verified) + " requests", u(r.token_mismatches)},
            {"reused K/V rows, bitwise", u(r.reused_rows_checked) + " rows", u(r.reused_row_mismatches)},
            {"every cached K/V row (reused, prefilled, decoded)", u(r.rows_checked) + " rows", u(r.row_mismatches)},
            {"of which shared-prefix decode rows, within 2^-9 (max " + fixed(r.bounded_row_max_difference * 1024.0, 2) +
                 " x 2^-10)",
             u(r.bounded_rows_checked) + " rows", "-"}};
  out += t.render();
  out +=
      "Decode rows computed with shared-prefix execution (0x0BC) are compared within two fp16 ulps (2^-9) "
      "instead of bitwise: the LSE merge rounds differently from the monolithic kernel. Such rows are never "
      "published for reuse, so every reused row stays bitwise.\n\n";
  if (!r.first_mismatch.empty()) out += "First mismatch: " + md(r.first_mismatch) + "\n\n";
}

void work_and_reuse(std::string& out, const RunReport& r) {
  out += "## Work\n\n";
  Table work{{"figure", "value"}, {}, {false, true}};
  work.rows = {{"requests", u(r.requests) + " requests"},
               {"tokens requested (prompt + generated)", u(r.tokens_requested) + " tokens"},
               {"prompt tokens", u(r.prompt_tokens) + " tokens"},
               {"generated tokens", u(r.decode_tokens) + " tokens"}};
  out += work.render();

  out += "## Reuse\n\n";
  out +=
      "A prompt row is either computed by the model or read from the cache after an exact-prefix match, found by "
      "the full-block hash chain (0x07B) or the radix tree (0x08A); reuse = reused / (reused + computed).\n\n";
  const uint64_t prompt_rows = r.prefill_rows_computed + r.prefill_rows_reused;
  Table reuse{{"prompt rows", "rows", "share"}, {}, {false, true, true}};
  reuse.rows = {{"computed by the model", u(r.prefill_rows_computed), share(r.prefill_rows_computed, prompt_rows)},
                {"reused from the cache", u(r.prefill_rows_reused), share(r.prefill_rows_reused, prompt_rows)},
                {"reused, found by the hash chain", u(r.reused_by_hash_chain),
                 share(r.reused_by_hash_chain, r.prefill_rows_reused) + " of reused"},
                {"reused, found by the radix tree", u(r.reused_by_radix),
                 share(r.reused_by_radix, r.prefill_rows_reused) + " of reused"}};
  if (const uint64_t other = unattributed_reuse(r); other > 0)
    reuse.rows.push_back(
        {"reused, attributed to no index", u(other), share(other, r.prefill_rows_reused) + " of reused"});
  if (r.partial_tail_rows_copied > 0)
    reuse.rows.push_back({"reused, copied out of partial tails (0x07D)", u(r.partial_tail_rows_copied),
                          share(r.partial_tail_rows_copied, r.prefill_rows_reused) + " of reused"});
  out += reuse.render();
  if (r.prefill_rows_forked > 0)
    out += "Fork branches (parallel sampling) hold their parent's " + u(r.prefill_rows_forked) +
           " prompt rows by reference, neither computed nor looked up; the first divergent write copies a shared "
           "tail block (copy-on-write, 0x05C).\n\n";
  out +=
      "Shared-prefix execution reads a prefix's K/V rows once for the whole batch instead of once per request; "
      "the shared work is the same, the traversal is not (0x0BC, 0x0BI).\n\n";
  Table shared{{"shared-prefix reads", "rows"}, {}, {false, true}};
  shared.rows = {{"read once per batch", u(r.shared_prefix_rows_read_once)},
                 {"had each request read them", u(r.shared_prefix_rows_per_request)},
                 {"fewer reads (per request / once)",
                  ratio_text(saving_ratio(static_cast<double>(r.shared_prefix_rows_per_request),
                                          static_cast<double>(r.shared_prefix_rows_read_once)))}};
  out += shared.render();
  if (const auto& t = r.session_tier; t.used) {
    out +=
        "Chat conversations went through the node's session tier (CachedAttention, 0x0CC): a turn that ended "
        "saved the history, and the next turn loaded the rows its prefix hit missed into its own blocks instead "
        "of computing them; the no-reuse replay checked every loaded row.\n\n";
    Table st{{"session tier", "value"}, {}, {false, true}};
    st.rows = {{"histories saved", u(t.saves)},
               {"bytes saved", u(t.saved_bytes)},
               {"turns resumed", u(t.turns_resumed)},
               {"rows loaded past the hits", u(t.rows_loaded)},
               {"resumes refused", u(t.resume_refusals)},
               {"loading [s]", fixed(t.load_s, 3)},
               {"computing those rows at the run's prefill rate [s]", fixed(t.recompute_s, 3)},
               {"saving [s]", fixed(t.save_s, 3)}};
    out += st.render();
  }
  if (const auto& p = r.prompt_cache; p.used) {
    out +=
        "Templated prompts went through the node's module store (Prompt Cache, 0x0CB): each declared module was "
        "reused at its declared positions (its rows copied from the store's blocks) or computed alone there and "
        "published; free text attended to every earlier row. The replay recomputed each whole prompt under the same "
        "contract with nothing reused and checked every reused module row bitwise.\n\n";
    Table pt{{"prompt cache", "value"}, {}, {false, true}};
    pt.rows = {{"templated prompts", u(p.requests)},
               {"modules reused", u(p.modules_reused)},
               {"module rows reused", u(p.module_rows_reused)},
               {"modules computed alone", u(p.modules_computed)},
               {"module rows computed", u(p.module_rows_computed)},
               {"misses: never computed before", u(p.misses_not_computed)},
               {"misses: incompatible (tokens, positions, schema, model)", u(p.misses_incompatible)},
               {"modules published", u(p.modules_published)},
               {"calls refused for an older schema generation", u(p.stale_schema)},
               {"copying reused rows [s]", fixed(p.copy_s, 3)},
               {"computing those rows at the run's prefill rate [s]", fixed(p.recompute_s, 3)}};
    for (const auto& [reason, n] : p.node_misses)
      if (n > 0) pt.rows.push_back({"node misses: " + reason, u(n)});
    out += pt.render();
  }
  if (const auto& v = r.virtual_pages; v.used) {
    out +=
        "The pools were virtual reservations (vAttention, 0x06): each request was served from a request slot of "
        "the node's mapper owner, pages mapped before use and retained for the slot's next owner, which may be "
        "another worker (0x06E: capacity, not a prefix hit). Each step maps one row ahead, and a worker maps "
        "those pages into its view while the forward runs (0x06D). Prefix hits came from the node's block "
        "pools: the reuse transaction waited for the slot's published frontier to cover the hit (0x0CD step "
        "7), the hit's rows were copied into the slot, and computed prompts were copied back and published "
        "for other requests; prompts the pools had no room for were computed without reuse.\n\n";
    Table vt{{"virtual reservations", "value"}, {}, {false, true}};
    vt.rows = {{"mapper steps", u(v.steps)},
               {"steps short of page handles (retried)", u(v.steps_infeasible)},
               {"pages mapped (every K and V tensor)", u(v.pages_mapped)},
               {"inactive bundles reclaimed", u(v.bundles_reclaimed)},
               {"bundles mapped / unmapped by the node", u(v.node_bundle_maps) + " / " + u(v.node_bundle_unmaps)},
               {"node page maps done ahead / in the step (0x06D)",
                u(v.node_map_ahead_hits) + " / " + u(v.node_map_ahead_foreground_maps)},
               {"slots bound with a retained mapping", u(v.retained_slot_reuses)},
               {"retained pages reused [pages per tensor]", u(v.retained_pages_reused)},
               {"M_VA [bytes of address space]", u(v.reserved_bytes)},
               {"M_phys,pool [bytes]", u(v.pool_bytes)},
               {"peak M_mapped [bytes]", u(v.mapped_peak_bytes)},
               {"M_active,valid at that peak [bytes]", u(v.active_valid_at_peak_bytes)},
               {"pages mapped ahead of use", u(v.pages_mapped_ahead)},
               {"prompts the block pools refused (not reused, not published)", u(v.tier_refusals)},
               {"view mapping hidden behind forwards", percent_text(v.hidden_fraction())}};
    out += vt.render();
  }
  if (r.pools.staged)
    out += "The node's pools were `" + r.pools.backend +
           "` memory and the workers computed over host copies of them: " + u(r.pools.rows_loaded) +
           " token rows loaded from the pools before the model read them (hits, copy-on-write copies), " +
           u(r.pools.rows_stored) + " rows stored into the pools before they were committed.\n\n";
  if (const auto& x = r.shared_execution; x.site == "node") {
    out += "Shared-prefix decode ran on the node's executor owner (design `" + x.design +
           "`): per layer and batch, the node built the requests' prefix tree from their own block tables and "
           "attended their committed rows; each worker merged its new row with the exact LSE merge (0x0BA). "
           "These rows are checked within the stated bound and never published.\n\n";
    Table node{{"on the node", "value"}, {}, {false, true}};
    node.rows = {{"batches", u(x.batches)},
                 {"ops (one per layer and batch)", u(x.ops)},
                 {"run as Hydragen (0x0BC)", u(x.hydragen)},
                 {"run as ChunkAttention (0x0BD)", u(x.chunk_attention)},
                 {"run per request (not shareable)", u(x.per_request)},
                 {"deepest tree [shared levels]", u(x.max_levels)},
                 {"ops over more than one shared level", u(x.multi_level_ops)},
                 {"committed rows read, per batch", u(x.rows_read)},
                 {"had each request read its own", u(x.rows_per_request)},
                 {"refused, decoded in the worker", u(x.refusals)}};
    out += node.render();
  }
}

void funnel(std::string& out, const RunReport& r) {
  out += "## Reuse funnel\n\n";
  out +=
      "Each reuse attempt is counted at every stage it reached; every difference between consecutive stages is "
      "one rejection bucket, so a falling hit rate names the contract that failed (0x0CF).\n\n";
  Table stages{
      {"stage", "attempts", "lost since the previous stage", "rejection bucket"}, {}, {false, true, true, false}};
  for (const auto& [name, count] : r.funnel_stages) stages.rows.push_back({md(name), u(count), "", ""});
  Table loose{{"rejection bucket", "attempts"}, {}, {false, true}};
  for (size_t b = 0; b < r.rejection_buckets.size(); ++b) {
    const auto& [name, count] = r.rejection_buckets[b];
    if (auto stage = stage_after_bucket(r, b)) {
      stages.rows[*stage][2] = u(count);
      stages.rows[*stage][3] = md(name);
    } else {
      loose.rows.push_back({md(name), u(count)});
    }
  }
  if (stages.rows.empty())
    out += "No reuse attempt was recorded.\n\n";
  else
    out += stages.render();
  if (!loose.rows.empty()) out += loose.render();
  out +=
      "The node's own view of the same attempts: " + u(r.node_reuse_requests) + " lookups answered, " +
      u(r.node_reuse_candidates) + " with a candidate, " + u(r.node_reuse_leased) +
      " candidates leased to an allocation, " + u(r.node_reuse_not_current) + " refused as not current" +
      (r.quota_exceeded > 0 ? ", " + u(r.node_reuse_quota_exceeded) + " not taken for the namespace's block quota (" +
                                  u(r.quota_exceeded) + " allocations and appends refused for quota in all)"
                            : std::string()) +
      ". Leased candidates equal the engines' executed attempts.\n\n";
  out += "![Reuse funnel: attempts reaching each stage](" + std::string(kFunnelSvg) + ")\n\n";
}

void memory(std::string& out, const RunReport& r) {
  out += "## Memory\n\n";
  out +=
      "Reference views, unique physical objects and the provisioned pool answer different capacity questions; "
      "none replaces another (0x02). Figures are at the sample of peak used blocks.\n\n";
  const MemoryLedger& l = r.peak_ledger;
  const auto rect = static_cast<double>(l.rectangular_bytes);
  const auto saving = [&](uint64_t b) { return ratio_text(saving_ratio(rect, static_cast<double>(b))); };
  Table t{{"ledger", "bytes at peak", "saving vs rectangular", "what it counts"}, {}, {false, true, true, false}};
  t.rows = {{"rectangular reservation", mib_text(l.rectangular_bytes), "baseline",
             "every live request reserved at T_max (0x02B)"},
            {"request view", mib_text(l.request_view_bytes), saving(l.request_view_bytes),
             "each request's blocks x P_a x B_row; a shared block counts once per request (0x02C)"},
            {"unique physical", mib_text(l.unique_physical_bytes), saving(l.unique_physical_bytes),
             "distinct referenced blocks x P_a x B_row (0x02D)"},
            {"provisioned pools", mib_text(l.pool_bytes), "",
             "capacity for future allocations; idle pool bytes are not fragmentation (0x02C)"},
            {"metadata", mib_text(l.metadata_bytes), "",
             "block tables, descriptors, index entries, kept apart from K/V payload (0x02E)"}};
  out += t.render();
  out += "Pool utilisation (peak used / capacity blocks): " + percent_text(r.pool_utilisation);
  if (const UtilisationSample* peak = peak_sample(r))
    out += ", " + u(peak->used_blocks) + " of " + u(peak->capacity_blocks) + " blocks used and " +
           u(peak->evictable_blocks) + " evictable at t = " + fixed(peak->t_s, 3) + " s, over " + u(r.timeline.size()) +
           " samples.\n\n";
  else
    out += "; no timeline samples were taken.\n\n";
  if (const UtilisationSample* peak = peak_sample(r); peak && memory_efficiency(*peak))
    out +=
        "K/V memory efficiency at that peak (valid rows over the rows of referenced blocks, the utilisation "
        "PagedAttention reports): " +
        percent_text(*memory_efficiency(*peak)) + ".\n\n";
  out += "![Pool utilisation over time](" + std::string(kUtilisationSvg) + ")\n\n";
}

void latency(std::string& out, const RunReport& r) {
  out += "## Latency\n\n";
  out +=
      "Receipt latency per owner as the workers saw it, one sample per call (a receipt records physical fact, "
      "0x04D); percentiles by nearest rank, histogram bins on a log scale (1-2-5 edges).\n\n";
  Table t{
      {"owner", "calls", "p50 [µs]", "p90 [µs]", "p99 [µs]", "max [µs]"}, {}, {false, true, true, true, true, true}};
  for (const auto& owner : merge_owners(r.latencies)) {
    const OwnerLatencySummary s = summarise(owner);
    t.rows.push_back(
        {md(s.owner), u(s.calls), fixed(s.p50_us, 2), fixed(s.p90_us, 2), fixed(s.p99_us, 2), fixed(s.max_us, 2)});
  }
  if (t.rows.empty())
    out += "No latency samples were recorded.\n\n";
  else
    out += t.render();
  out += "![Receipt latency per owner](" + std::string(kLatencySvg) + ")\n\n";
}

void workers(std::string& out, const RunReport& r) {
  out += "## Workers\n\n";
  out +=
      "Each worker's share of the run: its requests, the prompt rows it computed or reused, the tokens it "
      "generated.\n\n";
  Table t{{"worker", "requests", "prompt rows computed", "prompt rows reused", "reuse", "generated tokens", "wall [s]"},
          {},
          {false, true, true, true, true, true, true}};
  for (const auto& w : r.worker_rows)
    t.rows.push_back({md(w.name), u(w.requests), u(w.prefill_rows_computed), u(w.prefill_rows_reused),
                      percent_text(reuse_ratio(w.prefill_rows_reused, w.prefill_rows_computed)), u(w.decode_tokens),
                      fixed(w.wall_s, 3)});
  if (t.rows.empty())
    out += "No worker reported.\n\n";
  else
    out += t.render();
}

void physical_modes(std::string& out, const RunReport& r) {
  if (r.physical_modes.empty()) return;
  out += "## Physical modes\n\n";
  out +=
      "The same workload served and verified under two layouts' physical modes (`kvrt run --compare-physical`): "
      "paged blocks with prefix reuse (0x05, 0x07) against virtual reservations with pages mapped on demand "
      "(0x06), whose retained mappings are capacity, not prefix hits.\n\n";
  Table t{{"layout", "mode", "exact", "wall [s]", "prompt rows computed", "reused", "pages mapped",
           "map step p50 / p99 [us]", "view mapping hidden", "M_VA", "M_phys,pool", "peak M_mapped / unique physical"},
          {},
          {false, false, false, true, true, true, true, true, true, true, true, true}};
  for (const auto& m : r.physical_modes) {
    const bool v = m.virtual_pages.used;
    t.rows.push_back(
        {md(m.layout_id), md(m.physical_mode), m.exact ? "yes" : "**no**", fixed(m.wall_s, 2),
         u(m.prefill_rows_computed), u(m.prefill_rows_reused), v ? u(m.virtual_pages.pages_mapped) : "—",
         v ? fixed(m.virtual_pages.map_step_p50_us, 1) + " / " + fixed(m.virtual_pages.map_step_p99_us, 1) : "—",
         v ? percent_text(m.virtual_pages.hidden_fraction()) : "—", v ? u(m.virtual_pages.reserved_bytes) : "—",
         v ? u(m.virtual_pages.pool_bytes) : "—",
         u(v ? m.virtual_pages.mapped_peak_bytes : m.peak_unique_physical_bytes)});
  }
  out += t.render();
}

void comparison(std::string& out, const RunReport& r) {
  out += "## Comparison\n\n";
  if (r.comparison.empty()) {
    out += "No comparison: `kvrt run --compare` runs the same workload under each reuse mode.\n\n";
    return;
  }
  out +=
      "The same workload trace under each reuse mode, one contract changed at a time (0x0BL); saving = "
      "baseline (" +
      md(r.comparison.front().mode) + ", the first row) / mode, > 1 is better.\n\n";
  Table t{{"mode", "prompt rows computed", "saving", "decode K/V read", "saving", "peak pool", "saving", "wall [s]",
           "saving", "all served"},
          {},
          {false, true, true, true, true, true, true, true, true, false}};
  for (const auto& row : r.comparison) {
    const ComparisonRatios q = comparison_ratios(r.comparison.front(), row);
    t.rows.push_back({md(row.mode), u(row.prefill_rows_computed), ratio_text(q.prefill_rows_computed),
                      mib_text(row.decode_kv_bytes_read), ratio_text(q.decode_kv_bytes_read),
                      mib_text(row.peak_pool_bytes), ratio_text(q.peak_pool_bytes), fixed(row.wall_s, 3),
                      ratio_text(q.wall_s), row.complete ? "yes" : "**NO**"});
  }
  out += t.render();
}

void updates(std::string& out, const RunReport& r) {
  const auto rows = updates_rows(r.updates);
  if (rows.empty()) return;
  out += "## Updates on the live node\n\n";
  out +=
      "Weights updates and adapter swaps (invalidations, 0x01A) and tenant purges (0x0CE) while the workers "
      "served; every request was replayed under the weights it was admitted with, so a reused row of another "
      "generation would count as a stale hit.\n\n";
  Table t{{"figure", "value"}, {}, {false, false}};
  for (const auto& [label, value] : rows) t.rows.push_back({md(label), md(value)});
  out += t.render();
}

void node(std::string& out, const RunReport& r) {
  out += "## Node after shutdown\n\n";
  out +=
      "After every worker finished, no block may stay referenced and recorded refcounts must equal those "
      "derived from reachability; a nonzero delta is an ownership-integrity alert, not a metric (0x0CF).\n\n";
  Table t{{"check", "value"}, {}, {false, true}};
  t.rows = {{"leaked blocks", std::to_string(r.leaked_blocks) + " blocks"},
            {"refcount delta (recorded - derived)", std::to_string(r.refcount_delta) + " references"},
            {"validate()", r.validate_ok ? "ok" : "**FAILED**"},
            {"operation errors", u(r.operation_errors) + " errors"}};
  out += t.render();
}

}  // namespace

std::string render_markdown(const RunReport& r) {
  std::string out;
  run_facts(out, r);
  verdict(out, r);
  work_and_reuse(out, r);
  funnel(out, r);
  memory(out, r);
  latency(out, r);
  workers(out, r);
  updates(out, r);
  comparison(out, r);
  physical_modes(out, r);
  node(out, r);
  return out;
}

}  // namespace kvrt::report
