// A worker's EngineResult as JSON: the child process writes it, `kvrt run`
// reads it back. Every field round-trips; a malformed file is a
// typed error naming the file and the field, never a crash.
#include <nlohmann/json.hpp>

#include "engine/engine_worker.hpp"

namespace kvrt {

namespace {

#define KVRT_ENGINE_COUNTERS(X)                                                                                        \
  X(requests)                                                                                                          \
  X(requests_total)                                                                                                    \
  X(prompt_tokens)                                                                                                     \
  X(decode_tokens)                                                                                                     \
  X(prefill_rows_computed)                                                                                             \
  X(prefill_rows_reused)                                                                                               \
  X(prefill_rows_forked)                                                                                               \
  X(prompt_requests)                                                                                                   \
  X(prompt_modules_reused)                                                                                             \
  X(prompt_module_rows_reused)                                                                                         \
  X(prompt_modules_computed)                                                                                           \
  X(prompt_module_rows_computed)                                                                                       \
  X(prompt_modules_published)                                                                                          \
  X(prompt_misses_not_computed)                                                                                        \
  X(prompt_misses_incompatible)                                                                                        \
  X(prompt_copy_us)                                                                                                    \
  X(prompt_stale_schema)                                                                                               \
  X(tier_saves)                                                                                                        \
  X(tier_saved_bytes)                                                                                                  \
  X(tier_turns_resumed)                                                                                                \
  X(tier_rows_loaded)                                                                                                  \
  X(tier_resume_refusals)                                                                                              \
  X(tier_load_us)                                                                                                      \
  X(tier_save_us)                                                                                                      \
  X(prefill_compute_us)                                                                                                \
  X(staged_rows_loaded)                                                                                                \
  X(staged_rows_stored)                                                                                                \
  X(decode_rows_computed)                                                                                              \
  X(decode_kv_bytes_read)                                                                                              \
  X(forked_requests)                                                                                                   \
  X(copy_on_write_rows)                                                                                                \
  X(shared_prefix_batches)                                                                                             \
  X(shared_prefix_rows_read_once)                                                                                      \
  X(shared_prefix_rows_per_request)                                                                                    \
  X(bounded_rows_checked)                                                                                              \
  X(requests_verified)                                                                                                 \
  X(token_mismatches) X(rows_checked) X(reused_rows_checked) X(row_mismatches) X(reused_row_mismatches)                \
      X(out_of_capacity_retries) X(operation_errors) X(requests_served_privately) X(sessions_lost) X(reconnects)       \
          X(faults_absorbed) X(stale_generation_refusals) X(reauthorizations) X(namespace_closed_refusals)             \
              X(receipts_revoked) X(requests_on_successor_weights) X(weight_variants) X(foreign_generation_hits)       \
                  X(hits_withdrawn) X(quota_exceeded_retries) X(requests_preempted) X(node_shared_ops)                 \
                      X(node_shared_hydragen) X(node_shared_chunk_attention) X(node_shared_per_request)                \
                          X(node_shared_max_levels) X(node_shared_multi_level) X(node_shared_refusals)                 \
                              X(node_shared_rows_read) X(node_shared_rows_per_request) X(virtual_steps)                \
                                  X(virtual_steps_infeasible) X(virtual_pages_mapped) X(virtual_bundles_reclaimed)     \
                                      X(virtual_retained_slot_reuses) X(virtual_retained_pages_reused)                 \
                                          X(virtual_reserved_bytes) X(virtual_pool_bytes) X(virtual_mapped_peak_bytes) \
                                              X(virtual_active_valid_at_peak_bytes) X(virtual_pages_mapped_ahead)      \
                                                  X(virtual_tier_refusals)

}  // namespace

std::string engine_result_to_json(const EngineResult& r) {
  nlohmann::ordered_json j;
  j["worker"] = r.worker;
#define KVRT_PUT(name) j[#name] = r.name;
  KVRT_ENGINE_COUNTERS(KVRT_PUT)
#undef KVRT_PUT
  j["first_mismatch"] = r.first_mismatch;
  j["first_error"] = r.first_error;
  j["session_lost"] = r.session_lost;
  j["funnel"] = r.funnel.stage;
  j["rejections"] = r.rejections;
  j["allocator_us"] = r.allocator_us;
  j["prefix_us"] = r.prefix_us;
  j["authorize_us"] = r.authorize_us;
  j["reuse_us"] = r.reuse_us;
  j["executor_us"] = r.executor_us;
  j["mapper_step_us"] = r.mapper_step_us;
  j["mapper_us"] = r.mapper_us;
  j["view_map_us"] = r.view_map_us;
  j["view_map_ahead_us_total"] = r.view_map_ahead_us_total;
  j["view_map_wait_us_total"] = r.view_map_wait_us_total;
  j["bounded_row_max_difference"] = r.bounded_row_max_difference;
  j["wall_s"] = r.wall_s;
  return j.dump();
}

Result<EngineResult> engine_result_from_json(const std::string& text, const std::string& origin) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::config_parse, origin + ": not a JSON object", origin);
  EngineResult r;
  std::string missing;
  auto read = [&](const char* name, auto& out) {
    const auto it = j.find(name);
    if (it == j.end()) {
      if (missing.empty()) missing = name;
      return;
    }
    try {
      it->get_to(out);
    } catch (const nlohmann::json::exception&) {
      if (missing.empty()) missing = name;
    }
  };
  read("worker", r.worker);
#define KVRT_GET(name) read(#name, r.name);
  KVRT_ENGINE_COUNTERS(KVRT_GET)
#undef KVRT_GET
  read("first_mismatch", r.first_mismatch);
  read("first_error", r.first_error);
  read("session_lost", r.session_lost);
  read("funnel", r.funnel.stage);
  read("rejections", r.rejections);
  read("allocator_us", r.allocator_us);
  read("prefix_us", r.prefix_us);
  read("authorize_us", r.authorize_us);
  read("reuse_us", r.reuse_us);
  read("executor_us", r.executor_us);
  read("mapper_step_us", r.mapper_step_us);
  read("mapper_us", r.mapper_us);
  read("view_map_us", r.view_map_us);
  read("view_map_ahead_us_total", r.view_map_ahead_us_total);
  read("view_map_wait_us_total", r.view_map_wait_us_total);
  read("bounded_row_max_difference", r.bounded_row_max_difference);
  read("wall_s", r.wall_s);
  if (!missing.empty())
    return make_error(ErrorCode::config_field, origin + ": missing or mistyped field " + missing, missing);
  return r;
}

}  // namespace kvrt
