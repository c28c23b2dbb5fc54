// libkvrt: the session tier (0x0CC) of api/kvrt.h: a conversation's
// history saved from an admitted request's rows, and resumed into another's.
#include "api/kvrt_c_session.hpp"

using namespace kvrt;

extern "C" {

// ---- The session tier (0x0CC) ---------------------------------------------

int32_t kvrt_save_session(kvrt_session* s, const char* namespace_name, const char* label, const int32_t* tokens,
                          size_t token_count, uint64_t request, const char* position_contract, kvrt_error* error) try {
  if (s == nullptr || namespace_name == nullptr || *namespace_name == '\0' || label == nullptr || *label == '\0')
    return bad(error, "session, namespace_name and label are required", "label");
  if (token_count == 0 || tokens == nullptr) return bad(error, "a history of at least one token is required", "tokens");
  Result<kvrt_session::Live*> live = live_request(s, request, "request");
  if (!live.ok()) return fail(error, live.error());
  if (Status held = table_holds_rows(*s, **live, token_count, "tokens"); !held.ok()) return fail(error, held.error());
  const uint32_t P = s->pools->block_tokens(), groups = s->pools->group_count();
  const std::vector<std::vector<uint32_t>>& table = (*live)->table;
  SessionSaveRequest save;
  save.trace = next_trace(s);
  save.namespace_name = namespace_name;
  save.session_label = label;
  save.tokens.assign(tokens, tokens + token_count);
  save.identity = (*live)->identity;
  save.position_contract = position_contract != nullptr ? position_contract : "";
  // The history's canonical rows, group by group, as the pools hold them.
  for (uint32_t g = 0; g < groups; ++g) {
    const uint64_t row_bytes = s->pools->row_bytes(g);
    std::vector<uint8_t>& rows = save.group_rows.emplace_back(token_count * row_bytes);
    for (size_t t = 0; t < token_count; ++t)
      s->pools->read_rows(g, table[g][t / P], static_cast<uint32_t>(t % P), 1,
                          std::span<uint8_t>(rows.data() + t * row_bytes, row_bytes));
  }
  Result<SessionSaveReceipt> r = s->engine->save_session(save);
  if (!r.ok()) return fail(error, r.error());
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "save_session", e);
}

int32_t kvrt_resume_session(kvrt_session* s, const char* namespace_name, const char* label, const int32_t* prompt,
                            size_t prompt_count, uint64_t request, const char* position_contract,
                            uint32_t* resumed_rows, int32_t* refusal, kvrt_error* error) try {
  if (s == nullptr || namespace_name == nullptr || *namespace_name == '\0' || label == nullptr || *label == '\0' ||
      resumed_rows == nullptr)
    return bad(error, "session, namespace_name, label and resumed_rows are required", "label");
  if (prompt_count == 0 || prompt == nullptr) return bad(error, "a prompt of at least one token is required", "prompt");
  Result<kvrt_session::Live*> live = live_request(s, request, "request");
  if (!live.ok()) return fail(error, live.error());
  *resumed_rows = 0;
  if (refusal != nullptr) *refusal = -1;
  SessionResumeRequest ask{next_trace(s),
                           namespace_name,
                           label,
                           std::vector<TokenId>(prompt, prompt + prompt_count),
                           (*live)->identity,
                           position_contract != nullptr ? position_contract : ""};
  Result<SessionResumeReceipt> r = s->engine->resume_session(ask);
  if (!r.ok()) return fail(error, r.error());
  if (const auto* no = std::get_if<SessionResumeRefusal>(&r->outcome)) {
    if (refusal != nullptr) *refusal = static_cast<int32_t>(no->refusal);
    return ok(error);
  }
  const SessionResumed& got = std::get<SessionResumed>(r->outcome);
  const uint32_t H = got.receipt.covered_interval.end;
  const uint32_t P = s->pools->block_tokens(), groups = s->pools->group_count();
  const std::vector<std::vector<uint32_t>>& table = (*live)->table;
  bool shaped = got.group_rows.size() == groups && H > 0 && H <= prompt_count;
  for (uint32_t g = 0; shaped && g < groups; ++g)
    shaped = got.group_rows[g].size() == uint64_t{H} * s->pools->row_bytes(g);
  if (!shaped)
    return fail(error, make_error(ErrorCode::invariant_violated, "a resumed history of another shape", "request"));
  if (Status held = table_holds_rows(*s, **live, H, "request"); !held.ok()) return fail(error, held.error());
  for (uint32_t g = 0; g < groups; ++g) {
    const uint64_t row_bytes = s->pools->row_bytes(g);
    for (uint32_t t = 0; t < H; ++t)
      s->pools->write_rows(g, table[g][t / P], t % P, 1,
                           std::span<const uint8_t>(got.group_rows[g].data() + uint64_t{t} * row_bytes, row_bytes));
  }
  *resumed_rows = H;
  return ok(error);
} catch (const std::exception& e) {
  return caught(error, "resume_session", e);
}

}  // extern "C"
