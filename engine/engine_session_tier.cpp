// The session tier in the engine loop (EngineOptions::session_tier; spec
// 0x0CC): a chat conversation's history goes to the node's tier when a turn
// ends with turns still to come, and comes back when the next turn is
// admitted. The rows the next turn's prefix hit already covers stay the
// index's; the saved rows past the hit are written into the turn's own
// blocks, so its prefill starts after them. The verification replay then
// checks them bitwise like every other row the turn did not compute.
#include <chrono>

#include "engine/engine_loop.hpp"

namespace kvrt::engine {

namespace {
uint64_t micros_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace

std::string EngineLoop::session_label(const LiveRequest& r) {
  std::string label = "job-";  // job ids are unique across the run's workers
  label += std::to_string(r.job->id);
  return label;
}

Status EngineLoop::resume_sessions(std::vector<LiveRequest>& admitted) {
  const CacheLayoutManifest& layout = shared_->layout();
  for (LiveRequest& r : admitted) {
    if (r.job->kind != workload::JobKind::chat || r.turn == 0) continue;
    const auto started = std::chrono::steady_clock::now();
    SessionResumeRequest ask{next_trace(),
                             r.job->namespace_name,
                             session_label(r),
                             std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + r.prompt_tokens),
                             identity_of(r.admitted.adapter),
                             ""};
    Result<SessionResumeReceipt> answered = session_->resume_session(ask);
    if (!answered.ok()) return answered.error();
    if (std::holds_alternative<SessionResumeRefusal>(answered->outcome)) {
      ++result_.tier_resume_refusals;  // the turn computes what its hit does not cover
      result_.tier_load_us += micros_since(started);
      continue;
    }
    const SessionResumed& got = std::get<SessionResumed>(answered->outcome);
    const uint32_t H = got.receipt.covered_interval.end;
    if (got.group_rows.size() != layout.cache_groups.size() || H > r.prompt_tokens)
      return make_error(ErrorCode::invariant_violated, "a resumed history of another shape than the request's",
                        "session_resume");
    if (H > r.hit_tokens) {
      for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
        const uint64_t row_bytes = layout.cache_groups[g].row_bytes();
        if (got.group_rows[g].size() != uint64_t{H} * row_bytes)
          return make_error(ErrorCode::invariant_violated,
                            "resumed rows of group " + std::to_string(g) + " are not H rows of B_row,g bytes",
                            "session_resume");
        for (uint32_t t = r.hit_tokens; t < H; ++t)
          KVRT_TRY(model::write_canonical_row(*shared_, g, r.blocks.slots[g][t / P_], t % P_,
                                              std::span(got.group_rows[g]).subspan(t * row_bytes, row_bytes)));
      }
      r.resumed_rows = H - r.hit_tokens;
      ++result_.tier_turns_resumed;
      result_.tier_rows_loaded += r.resumed_rows;
    }
    result_.tier_load_us += micros_since(started);
  }
  return Status::success();
}

Status EngineLoop::save_sessions(const std::vector<LiveRequest>& done) {
  const CacheLayoutManifest& layout = shared_->layout();
  for (const LiveRequest& r : done) {
    if (r.failed || r.branch != 0 || r.job->kind != workload::JobKind::chat || r.turn + 1 >= r.job->turns.size() ||
        r.cached_rows == 0)
      continue;
    const auto started = std::chrono::steady_clock::now();
    const uint32_t H = r.cached_rows;  // committed: the last generated token has no row yet
    SessionSaveRequest save{next_trace(),
                            r.job->namespace_name,
                            session_label(r),
                            std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + H),
                            {},
                            identity_of(r.admitted.adapter),
                            ""};
    for (uint32_t g = 0; g < layout.cache_groups.size(); ++g) {
      const uint64_t row_bytes = layout.cache_groups[g].row_bytes();
      std::vector<uint8_t>& rows = save.group_rows.emplace_back(uint64_t{H} * row_bytes);
      for (uint32_t t = 0; t < H; ++t)
        KVRT_TRY(shared_->read_canonical_row(g, r.blocks.slots[g][t / P_], t % P_,
                                             std::span(rows).subspan(t * row_bytes, row_bytes)));
      result_.tier_saved_bytes += rows.size();
    }
    Result<SessionSaveReceipt> saved = session_->save_session(save);
    if (!saved.ok()) {
      // A save the tier refuses (a history larger than its budget) loses
      // only the next turn's resume.
      note_error(saved.error());
      continue;
    }
    ++result_.tier_saves;
    result_.tier_save_us += micros_since(started);
  }
  return Status::success();
}

}  // namespace kvrt::engine
