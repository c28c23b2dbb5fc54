// The readers and writers the generator only declares ($Kvrt.handwritten in
// schema/*.capnp): vocabulary types whose wire form is not member by member.
#include "schema/common_wire.hpp"

namespace kvrt::codec::detail {

void write(wire::TypedError::Builder b, const Error& v) {
  b.setCode(static_cast<uint16_t>(v.code));
  b.setReason(text(v.reason));
  b.setField(text(v.field));
}

Status read(ReadContext& ctx, wire::TypedError::Reader r, Error& out) {
  // Only codes this build knows are accepted: a client must be able to
  // switch on the code (error.cpp's to_string names every known code).
  const auto code = static_cast<ErrorCode>(r.getCode());
  if (kvrt::to_string(code) == "unknown_error_code")
    return make_error(ErrorCode::unknown_enum,
                      ctx.field_path("code") + ": " + std::to_string(r.getCode()) + " is not a kvrt::ErrorCode",
                      ctx.field_path("code"));
  out.code = code;
  ctx.at("reason");
  out.reason = to_string(r.getReason());
  ctx.at("field");
  out.field = to_string(r.getField());
  return Status::success();
}

}  // namespace kvrt::codec::detail
