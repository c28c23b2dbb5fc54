#include "tools/blocksize/block_size_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/report/svg_plot.hpp"

namespace kvrt {

std::vector<SweepRequest> sweep_requests(const workload::Workload& w) {
  std::vector<SweepRequest> out;
  const uint32_t vocab = std::max<uint32_t>(w.vocab, 1);
  auto generated = [&](const workload::Job& job, size_t turn, uint32_t n) {
    std::vector<TokenId> t(n);
    for (uint32_t i = 0; i < n; ++i)
      t[i] = static_cast<TokenId>((job.id * 7919 + turn * 104729 + uint64_t{i} * 31 + 17) % vocab);
    return t;
  };
  for (const workload::Job& job : w.jobs) {
    std::vector<TokenId> history = job.prefix;
    for (size_t k = 0; k < job.turns.size(); ++k) {
      const workload::Turn& turn = job.turns[k];
      SweepRequest r;
      r.salt = job.namespace_name;
      r.prompt = job.kind == workload::JobKind::chat ? history : job.prefix;
      r.prompt.insert(r.prompt.end(), turn.user_tokens.begin(), turn.user_tokens.end());
      r.decode = generated(job, k, turn.decode_tokens);
      r.branches = job.kind == workload::JobKind::fork ? std::max<uint32_t>(job.branches, 1) : 1;
      if (job.kind == workload::JobKind::chat) {
        history = r.prompt;
        history.insert(history.end(), r.decode.begin(), r.decode.end());
      }
      if (!r.prompt.empty()) out.push_back(std::move(r));
    }
  }
  return out;
}

const std::vector<std::string>& weighable_components() {
  static const std::vector<std::string> names{
      "request_view_tail_bytes", "runtime_tail_bytes", "metadata_bytes",     "recomputed_tokens",
      "partial_tail_copy_rows",  "blocks_allocated",   "cow_traffic_bytes",  "cow_capacity_bytes",
      "padded_cells",            "decode_step_seconds"};
  return names;
}

Result<std::pair<std::string, double>> parse_weight(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string name = text.substr(0, eq);
  const auto& names = weighable_components();
  if (eq == std::string::npos || std::find(names.begin(), names.end(), name) == names.end()) {
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::invalid_argument, "'" + text + "' is not NAME=WEIGHT with NAME one of " + known,
                      "weight");
  }
  try {
    size_t used = 0;
    const double w = std::stod(text.substr(eq + 1), &used);
    if (used != text.size() - eq - 1 || !std::isfinite(w)) throw std::invalid_argument("trailing");
    return std::pair{name, w};
  } catch (const std::exception&) {
    return make_error(ErrorCode::invalid_argument, "'" + text.substr(eq + 1) + "' is not a finite number", "weight");
  }
}

namespace {

const KernelTableCost* kernel_at(const BlockSizeCost& c, uint32_t pk) {
  for (const KernelTableCost& k : c.kernels)
    if (k.kernel_block == pk) return &k;
  return nullptr;
}

}  // namespace

double component_value(const BlockSizeCost& c, const std::string& name, uint64_t row_bytes) {
  const KernelTableCost* own = kernel_at(c, c.allocator_block);
  if (name == "request_view_tail_bytes") return static_cast<double>(c.request_view_tail_rows * row_bytes);
  if (name == "runtime_tail_bytes") return static_cast<double>(c.runtime_unique_tail_rows * row_bytes);
  if (name == "metadata_bytes") return static_cast<double>(c.metadata.total_bytes);
  if (name == "recomputed_tokens") return static_cast<double>(c.recomputed_tokens);
  if (name == "partial_tail_copy_rows") return static_cast<double>(c.partial_tail_copy_rows);
  if (name == "blocks_allocated") return static_cast<double>(c.blocks_allocated);
  if (name == "cow_traffic_bytes") return static_cast<double>(c.cow_traffic_bytes);
  if (name == "cow_capacity_bytes") return static_cast<double>(c.cow_capacity_bytes);
  if (name == "padded_cells") return own ? static_cast<double>(own->table.padding_cells) : 0;
  if (name == "decode_step_seconds") return own ? own->step_seconds : 0;
  return 0;
}

nlohmann::ordered_json block_size_json(const BlockSizeSweep& s, const CostWeights& weights) {
  nlohmann::ordered_json out;
  out["requests"] = s.requests;
  out["row_bytes"] = s.config.row_bytes;
  out["pool_tokens"] = s.config.pool_tokens;
  const MetadataRecordSizes& r = s.config.record_sizes;
  out["record_sizes"] = {{"request_map_entry", r.request_map_entry}, {"block_descriptor", r.block_descriptor},
                         {"cached_hash_entry", r.cached_hash_entry}, {"valid_tail_record", r.valid_tail_record},
                         {"free_queue_entry", r.free_queue_entry},   {"fixed", r.fixed}};
  nlohmann::ordered_json sizes = nlohmann::ordered_json::array();
  for (const BlockSizeCost& c : s.costs) {
    nlohmann::ordered_json j;
    j["allocator_block"] = c.allocator_block;
    j["storage"] = {{"request_block_refs", c.request_block_refs},
                    {"request_view_tail_rows", c.request_view_tail_rows},
                    {"request_view_tail_bytes", c.request_view_tail_rows * s.config.row_bytes},
                    {"runtime_unique_blocks", c.runtime_unique_blocks},
                    {"runtime_unique_tail_rows", c.runtime_unique_tail_rows},
                    {"runtime_unique_tail_bytes", c.runtime_unique_tail_rows * s.config.row_bytes},
                    {"ideal_unique_blocks", c.ideal_unique_blocks},
                    {"ideal_unique_tail_rows", c.ideal_unique_tail_rows},
                    {"ideal_unique_tail_bytes", c.ideal_unique_tail_rows * s.config.row_bytes}};
    j["metadata"] = {{"request_block_refs", c.metadata.counts.request_block_refs},
                     {"pool_blocks", c.metadata.counts.pool_blocks},
                     {"cached_hashes", c.metadata.counts.cached_hashes},
                     {"live_requests", c.metadata.counts.live_requests},
                     {"free_queue_entries", c.metadata.counts.free_queue_entries},
                     {"total_bytes", c.metadata.total_bytes}};
    j["hits"] = {
        {"prompt_tokens", c.prompt_tokens}, {"hit_tokens", c.hit_tokens}, {"recomputed_tokens", c.recomputed_tokens}};
    j["transitions"] = {{"blocks_allocated", c.blocks_allocated}};
    j["copy_on_write"] = {{"copies", c.cow_copies},
                          {"rows", c.cow_rows},
                          {"traffic_bytes", c.cow_traffic_bytes},
                          {"capacity_bytes", c.cow_capacity_bytes}};
    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
    for (const KernelTableCost& k : c.kernels) {
      nlohmann::ordered_json kj{{"kernel_block", k.kernel_block},
                                {"dense_cells", k.table.dense_cells},
                                {"used_cells", k.table.used_cells},
                                {"padded_cells", k.table.padding_cells}};
      if (k.timed_requests > 0) {
        kj["timed_requests"] = k.timed_requests;
        kj["kernel_blocks"] = k.kernel_blocks;
        kj["kv_bytes"] = k.kv_bytes;
        kj["step_seconds"] = k.step_seconds;
        kj["read_floor_seconds"] = k.read_floor_seconds;
      }
      kernels.push_back(std::move(kj));
    }
    j["kernels"] = std::move(kernels);
    nlohmann::ordered_json chunks = nlohmann::ordered_json::array();
    for (const ChunkCost& ch : c.chunks) {
      nlohmann::ordered_json cj{{"chunk_tokens", ch.chunk_tokens},
                                {"sequences", ch.sequences},
                                {"chunks", ch.chunks},
                                {"ordinary_visits", ch.ordinary_visits},
                                {"materialised_chunks", ch.materialised_chunks},
                                {"partial_rows", ch.partial_rows},
                                {"partial_bytes", ch.partial_bytes},
                                {"saved_reads", ch.saved_reads}};
      if (ch.step_seconds > 0) {
        cj["step_seconds"] = ch.step_seconds;
        cj["paged_step_seconds"] = ch.paged_step_seconds;
      }
      chunks.push_back(std::move(cj));
    }
    j["shared_prefix_chunks"] = std::move(chunks);
    if (!weights.empty()) {
      double score = 0;
      for (const auto& [name, w] : weights) score += w * component_value(c, name, s.config.row_bytes);
      j["weighted_score"] = score;
    }
    sizes.push_back(std::move(j));
  }
  out["allocator_block_sizes"] = std::move(sizes);
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const PageGroupCost& g : s.page_groups)
    groups.push_back({{"tokens_per_page", g.tokens_per_page},
                      {"map_calls", g.map_calls},
                      {"mapped_pages", g.mapped_pages},
                      {"tail_rows", g.tail_rows},
                      {"steps", g.steps},
                      {"map_seconds", g.map_seconds}});
  out["page_groups"] = std::move(groups);
  if (!weights.empty()) {
    nlohmann::ordered_json w;
    for (const auto& [name, weight] : weights) w[name] = weight;
    out["weights"] = std::move(w);
  }
  return out;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt("%.2f GiB", static_cast<double>(b) / (1 << 30));
  if (b >= (uint64_t{1} << 20)) return fmt("%.2f MiB", static_cast<double>(b) / (1 << 20));
  if (b >= (uint64_t{1} << 10)) return fmt("%.1f KiB", static_cast<double>(b) / (1 << 10));
  return std::to_string(b) + " B";
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string block_size_text(const BlockSizeSweep& s, const CostWeights& weights) {
  std::ostringstream o;
  o << "block-size cost vector (0x09): " << s.requests << " requests, B_row " << bytes(s.config.row_bytes) << ", pool "
    << s.config.pool_tokens << " token slots; each component measured on its own, no single best\n\n";
  o << "storage and metadata, every request running (0x09B)\n"
    << pad("P_a", 6) << pad("map refs", 10) << pad("view tail", 12) << pad("blocks", 8) << pad("tail", 12)
    << pad("ideal blk", 10) << pad("ideal tail", 12) << pad("descriptors", 12) << pad("hashes", 8)
    << pad("metadata", 12) << "\n";
  for (const BlockSizeCost& c : s.costs)
    o << pad(std::to_string(c.allocator_block), 6) << pad(std::to_string(c.request_block_refs), 10)
      << pad(bytes(c.request_view_tail_rows * s.config.row_bytes), 12)
      << pad(std::to_string(c.runtime_unique_blocks), 8)
      << pad(bytes(c.runtime_unique_tail_rows * s.config.row_bytes), 12)
      << pad(std::to_string(c.ideal_unique_blocks), 10) << pad(bytes(c.ideal_unique_tail_rows * s.config.row_bytes), 12)
      << pad(std::to_string(c.metadata.counts.pool_blocks), 12)
      << pad(std::to_string(c.metadata.counts.cached_hashes), 8) << pad(bytes(c.metadata.total_bytes), 12) << "\n";
  o << "\nprefix hits (full blocks, logits cap 0x07A; tail: the immutable partial-tail policy, 0x07D), transitions, "
       "copy-on-write (0x09C)\n"
    << pad("P_a", 6) << pad("prompt", 10) << pad("hit", 10) << pad("recomputed", 12) << pad("tail hit", 10)
    << pad("tail copy", 11) << pad("allocated", 11) << pad("COW copies", 12) << pad("COW rows", 10)
    << pad("COW traffic", 13) << pad("COW capacity", 14) << "\n";
  for (const BlockSizeCost& c : s.costs)
    o << pad(std::to_string(c.allocator_block), 6) << pad(std::to_string(c.prompt_tokens), 10)
      << pad(std::to_string(c.hit_tokens), 10) << pad(std::to_string(c.recomputed_tokens), 12)
      << pad(std::to_string(c.partial_tail_hit_tokens), 10) << pad(std::to_string(c.partial_tail_copy_rows), 11)
      << pad(std::to_string(c.blocks_allocated), 11) << pad(std::to_string(c.cow_copies), 12)
      << pad(std::to_string(c.cow_rows), 10) << pad(bytes(c.cow_traffic_bytes), 13)
      << pad(bytes(c.cow_capacity_bytes), 14) << "\n";
  o << "\nblock table and decode kernel per (P_a, P_k) (0x0AB, 0x0BL)\n"
    << pad("P_a", 6) << pad("P_k", 6) << pad("dense", 10) << pad("used", 10) << pad("padded", 10)
    << pad("timed req", 10) << pad("step", 12) << pad("read floor", 12) << pad("x floor", 9) << "\n";
  for (const BlockSizeCost& c : s.costs)
    for (const KernelTableCost& k : c.kernels) {
      o << pad(std::to_string(c.allocator_block), 6) << pad(std::to_string(k.kernel_block), 6)
        << pad(std::to_string(k.table.dense_cells), 10) << pad(std::to_string(k.table.used_cells), 10)
        << pad(std::to_string(k.table.padding_cells), 10);
      if (k.timed_requests > 0)
        o << pad(std::to_string(k.timed_requests), 10) << pad(fmt("%.1f us", k.step_seconds * 1e6), 12)
          << pad(fmt("%.1f us", k.read_floor_seconds * 1e6), 12)
          << pad(fmt("%.2f", k.read_floor_seconds > 0 ? k.step_seconds / k.read_floor_seconds : 0), 9);
      o << "\n";
    }
  bool any_chunks = false;
  for (const BlockSizeCost& c : s.costs) any_chunks = any_chunks || !c.chunks.empty();
  if (any_chunks) {
    o << "\nshared-prefix execution per (P_a, P_c) over the decode batch (ChunkAttention, 0x0BD, 0x0BI)\n"
      << pad("P_a", 6) << pad("P_c", 6) << pad("seqs", 6) << pad("chunks", 8) << pad("ordinary", 10)
      << pad("shared>1", 10) << pad("partial rows", 14) << pad("partial", 12) << pad("saved reads", 13)
      << pad("step", 12) << pad("paged step", 12) << "\n";
    for (const BlockSizeCost& c : s.costs)
      for (const ChunkCost& ch : c.chunks) {
        o << pad(std::to_string(c.allocator_block), 6) << pad(std::to_string(ch.chunk_tokens), 6)
          << pad(std::to_string(ch.sequences), 6) << pad(std::to_string(ch.chunks), 8)
          << pad(std::to_string(ch.ordinary_visits), 10) << pad(std::to_string(ch.materialised_chunks), 10)
          << pad(std::to_string(ch.partial_rows), 14) << pad(bytes(ch.partial_bytes), 12)
          << pad(std::to_string(ch.saved_reads), 13);
        if (ch.step_seconds > 0)
          o << pad(fmt("%.1f us", ch.step_seconds * 1e6), 12) << pad(fmt("%.1f us", ch.paged_step_seconds * 1e6), 12);
        o << "\n";
      }
  }
  if (!s.page_groups.empty()) {
    o << "\nvirtual reservations: page groups of G rows, real mappings over a memfd (0x06D)\n"
      << pad("G", 6) << pad("map calls", 11) << pad("pages", 9) << pad("tail rows", 11) << pad("steps", 9)
      << pad("time", 11) << "\n";
    for (const PageGroupCost& g : s.page_groups)
      o << pad(std::to_string(g.tokens_per_page), 6) << pad(std::to_string(g.map_calls), 11)
        << pad(std::to_string(g.mapped_pages), 9) << pad(std::to_string(g.tail_rows), 11)
        << pad(std::to_string(g.steps), 9) << pad(fmt("%.2f ms", g.map_seconds * 1e3), 11) << "\n";
  }
  if (!weights.empty()) {
    o << "\nweighted score (your weights:";
    for (const auto& [name, w] : weights) o << " " << name << "=" << w;
    o << "; lower is better)\n";
    std::vector<std::pair<double, uint32_t>> ranked;
    for (const BlockSizeCost& c : s.costs) {
      double score = 0;
      for (const auto& [name, w] : weights) score += w * component_value(c, name, s.config.row_bytes);
      ranked.emplace_back(score, c.allocator_block);
    }
    std::sort(ranked.begin(), ranked.end());
    for (const auto& [score, P] : ranked) o << pad(std::to_string(P), 6) << "  " << fmt("%.6g", score) << "\n";
  }
  return o.str();
}

Status write_block_size_report(const BlockSizeSweep& s, const CostWeights& weights, const std::string& dir) {
  namespace fs = std::filesystem;
  namespace svg = report::svg;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create " + dir + ": " + ec.message(), "report_dir");
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    const fs::path path = fs::path(dir) / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return make_error(ErrorCode::io, "cannot write " + path.string(), "report_dir");
    return Status::success();
  };
  KVRT_TRY(write("blocksize.json", block_size_json(s, weights).dump(2) + "\n"));
  KVRT_TRY(write("blocksize.txt", block_size_text(s, weights)));
  auto series = [&](const std::string& name, auto value) {
    svg::Series out{name, {}};
    for (const BlockSizeCost& c : s.costs) out.points.emplace_back(c.allocator_block, value(c));
    std::sort(out.points.begin(), out.points.end());
    return out;
  };
  const double kib = 1024.0, B = static_cast<double>(s.config.row_bytes);
  svg::LineChart storage{
      "Storage and metadata against the allocator block size (0x09B)",
      {"allocator block size P_a", "tokens"},
      {"bytes", "KiB"},
      {series("request-view tail", [&](const BlockSizeCost& c) { return c.request_view_tail_rows * B / kib; }),
       series("runtime tail", [&](const BlockSizeCost& c) { return c.runtime_unique_tail_rows * B / kib; }),
       series("ideal tail", [&](const BlockSizeCost& c) { return c.ideal_unique_tail_rows * B / kib; }),
       series("metadata", [&](const BlockSizeCost& c) { return c.metadata.total_bytes / kib; })},
      true};
  KVRT_TRY(write("blocksize-storage.svg", svg::render_line_chart(storage)));
  svg::LineChart hits{
      "Prefix hits and recomputation (full blocks, logits cap)",
      {"allocator block size P_a", "tokens"},
      {"prompt tokens", "tokens"},
      {series("hit", [](const BlockSizeCost& c) { return static_cast<double>(c.hit_tokens); }),
       series("recomputed", [](const BlockSizeCost& c) { return static_cast<double>(c.recomputed_tokens); })},
      true};
  KVRT_TRY(write("blocksize-hits.svg", svg::render_line_chart(hits)));
  svg::LineChart cow{
      "Copy-on-write of forked branches (0x09C)",
      {"allocator block size P_a", "tokens"},
      {"bytes", "KiB"},
      {series("traffic (read + write)", [&](const BlockSizeCost& c) { return c.cow_traffic_bytes / kib; }),
       series("destination capacity", [&](const BlockSizeCost& c) { return c.cow_capacity_bytes / kib; })},
      true};
  KVRT_TRY(write("blocksize-cow.svg", svg::render_line_chart(cow)));
  svg::LineChart kernel{"One decode step against the kernel block size",
                        {"kernel block size P_k", "tokens"},
                        {"step time", "us"},
                        {},
                        true};
  for (const BlockSizeCost& c : s.costs) {
    svg::Series line{"P_a = " + std::to_string(c.allocator_block), {}};
    for (const KernelTableCost& k : c.kernels)
      if (k.timed_requests > 0) line.points.emplace_back(k.kernel_block, k.step_seconds * 1e6);
    if (!line.points.empty()) kernel.series.push_back(std::move(line));
  }
  KVRT_TRY(write("blocksize-kernel.svg", svg::render_line_chart(kernel)));
  svg::LineChart chunks{"Shared-prefix chunk visits against the chunk size (0x0BI)",
                        {"chunk size P_c", "rows"},
                        {"chunk visits", ""},
                        {},
                        true};
  if (!s.costs.empty()) {
    // The visits do not depend on P_a: the first allocator block size's batch.
    svg::Series shared{"shared schedule", {}}, ordinary{"per-sequence schedule", {}};
    for (const ChunkCost& ch : s.costs.front().chunks) {
      shared.points.emplace_back(ch.chunk_tokens, static_cast<double>(ch.chunks));
      ordinary.points.emplace_back(ch.chunk_tokens, static_cast<double>(ch.ordinary_visits));
    }
    chunks.series = {shared, ordinary};
  }
  KVRT_TRY(write("blocksize-chunks.svg", svg::render_line_chart(chunks)));
  svg::LineChart mapping{"Virtual reservations: mapping calls against the page group (0x06D)",
                         {"page group G", "rows"},
                         {"calls", ""},
                         {svg::Series{"map calls", {}}},
                         true};
  for (const PageGroupCost& g : s.page_groups)
    mapping.series[0].points.emplace_back(g.tokens_per_page, static_cast<double>(g.map_calls));
  return write("blocksize-mapping.svg", svg::render_line_chart(mapping));
}

}  // namespace kvrt
