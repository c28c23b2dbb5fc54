// kvrt._kvrt: the Python binding of libkvrt (api/kvrt.h), one class per C
// object. It adds nothing to the C ABI's semantics; what it adds is what a
// Python caller needs around it:
//   - arguments converted and checked before the node is asked (token ids
//     must fit int32, arrays must be one-dimensional, rows whole);
//   - the GIL released around every call that waits on the node or copies
//     rows, with a per-session lock instead (a session is used by one thread
//     at a time, kvrt.h);
//   - errors raised as kvrt.errors' exception classes (code, name, field,
//     reason), chosen by kvrt/errors.py;
//   - zero-copy NumPy views of the pools that keep the mapping alive: the
//     C session is closed when the Python session is closed and the last
//     view of its pools is gone, so a view never outlives its memory.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/kvrt.h"

namespace py = pybind11;

namespace {

// A kvrt_error on its way to Python (translated in the module's init).
struct KvrtFailure {
  kvrt_error error;
};

[[noreturn]] void raise(int32_t code, const char* name, const std::string& field, const std::string& reason) {
  KvrtFailure f{};
  f.error.code = code;
  std::snprintf(f.error.name, sizeof f.error.name, "%s", name);
  std::snprintf(f.error.field, sizeof f.error.field, "%s", field.c_str());
  std::snprintf(f.error.reason, sizeof f.error.reason, "%s", reason.c_str());
  throw f;
}

[[noreturn]] void invalid(const std::string& field, const std::string& reason) {
  raise(KVRT_E_INVALID_ARGUMENT, "invalid_argument", field, reason);
}

void check(int32_t rc, const kvrt_error& e) {
  if (rc != KVRT_OK) throw KvrtFailure{e};
}

py::object error_object(const kvrt_error& e) {
  return py::module_::import("kvrt.errors").attr("from_code")(e.code, e.name, e.field, e.reason);
}

// The C session and the lock its calls take. Shared by the Python session
// and every array view of its pools; the last owner closes it.
struct SessionHandle {
  kvrt_session* session = nullptr;
  std::mutex lock;
  ~SessionHandle() { kvrt_close(session); }
};

// One request of an admission or a lookup, converted once.
struct Request {
  std::string namespace_name;
  std::vector<int32_t> tokens;
  std::string adapter_id;
  std::string cache_salt;
};

// One item of a prompt written against a prompt schema (Prompt Cache,
// 0x0CB): a declared module with its parameters, or free text (module_id
// empty) from position gap_begin.
struct PromptItem {
  std::vector<int32_t> tokens;
  std::string module_id;
  std::map<std::string, std::string> parameters;
  uint32_t gap_begin = 0;
  bool use_cache = true;
};

// The C form of a parameter map (pointers into `source`, which must outlive it).
std::vector<kvrt_prompt_parameter> c_parameters(const std::map<std::string, std::string>& source) {
  std::vector<kvrt_prompt_parameter> out;
  for (const auto& [name, value] : source) out.push_back(kvrt_prompt_parameter{name.c_str(), value.c_str()});
  return out;
}

// Any one-dimensional sequence of integers as int64 (a list, a tuple, a
// NumPy array of an integer dtype); refused, naming `field`, when it is
// not one (floats are not silently truncated into token ids or counts).
py::array_t<int64_t> integer_array(const py::handle& values, const char* field) {
  py::array a = py::array::ensure(values);
  if (!a) invalid(field, "a one-dimensional sequence of integers is required");
  if (a.ndim() != 1) invalid(field, "a one-dimensional sequence is required, not " + std::to_string(a.ndim()) + "-d");
  if (a.size() == 0) return py::array_t<int64_t>(0);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u') invalid(field, "integers are required, not dtype " + std::string(py::str(a.dtype())));
  // An unsigned value past int64 wraps negative here and is refused below.
  return py::array_t<int64_t, py::array::forcecast>::ensure(a);
}

// Token ids, refused when one does not fit int32 (a silent wrap would look
// up another prompt).
std::vector<int32_t> token_ids(const py::handle& tokens, const char* field) {
  if (py::isinstance<py::array_t<int32_t>>(tokens)) {
    auto a = py::reinterpret_borrow<py::array_t<int32_t>>(tokens);
    if (a.ndim() == 1) {
      std::vector<int32_t> out(static_cast<size_t>(a.shape(0)));
      auto r = a.unchecked<1>();
      for (py::ssize_t i = 0; i < a.shape(0); ++i) out[static_cast<size_t>(i)] = r(i);
      return out;
    }
  }
  const py::array_t<int64_t> a = integer_array(tokens, field);
  std::vector<int32_t> out(static_cast<size_t>(a.size()));
  auto r = a.unchecked<1>();
  for (py::ssize_t i = 0; i < a.size(); ++i) {
    const int64_t t = r(i);
    if (t < std::numeric_limits<int32_t>::min() || t > std::numeric_limits<int32_t>::max())
      invalid(field, "token id " + std::to_string(t) + " at position " + std::to_string(i) + " does not fit int32");
    out[static_cast<size_t>(i)] = static_cast<int32_t>(t);
  }
  return out;
}

// Request ids or row counts: non-negative and within T.
template <class T>
std::vector<T> integers(const py::handle& values, const char* field) {
  const py::array_t<int64_t> a = integer_array(values, field);
  std::vector<T> out(static_cast<size_t>(a.size()));
  auto r = a.unchecked<1>();
  for (py::ssize_t i = 0; i < a.size(); ++i) {
    if (r(i) < 0 || static_cast<uint64_t>(r(i)) > std::numeric_limits<T>::max())
      invalid(field, "value " + std::to_string(r(i)) + " at index " + std::to_string(i) + " is out of range");
    out[static_cast<size_t>(i)] = static_cast<T>(r(i));
  }
  return out;
}

std::vector<kvrt_admit_request> c_requests(const std::vector<const Request*>& requests) {
  std::vector<kvrt_admit_request> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = *requests[i];
    out[i].namespace_name = r.namespace_name.c_str();
    out[i].tokens = r.tokens.data();
    out[i].token_count = static_cast<uint32_t>(r.tokens.size());
    out[i].adapter_id = r.adapter_id.c_str();
    out[i].cache_salt = r.cache_salt.c_str();
  }
  return out;
}

struct Admission {
  int32_t status = 0;
  uint64_t request = 0;
  uint32_t hit_tokens = 0;
  uint64_t reuse_attempt = 0;
  int32_t reuse_rejection = -1;
  uint32_t blocks = 0;
  std::optional<kvrt_error> error;
};

py::dtype numpy_dtype(int32_t dtype) {
  switch (dtype) {
    case KVRT_FP32:
      return py::dtype("float32");
    case KVRT_FP16:
      return py::dtype("float16");
    case KVRT_BF16:
      return py::dtype("uint16");  // NumPy has no bfloat16: the bits, as torch views them
    case KVRT_FP8_E4M3:
      return py::dtype("uint8");
    case KVRT_INT8:
      return py::dtype("int8");
  }
  invalid("dtype", "unknown storage dtype " + std::to_string(dtype));
}

class Session {
 public:
  Session(const std::string& descriptor, const std::string& principal, const std::string& worker_name,
          uint32_t call_timeout_ms, bool middleman, const std::optional<std::string>& token) {
    kvrt_connect_options o{};
    o.struct_size = sizeof o;
    o.worker_name = worker_name.c_str();
    o.call_timeout_ms = call_timeout_ms;
    o.middleman = middleman ? 1 : 0;
    o.token_hex = token ? token->c_str() : nullptr;
    kvrt_error e{};
    kvrt_session* s = nullptr;
    int32_t rc = 0;
    {
      py::gil_scoped_release release;
      rc = kvrt_connect(descriptor.c_str(), principal.c_str(), &o, &s, &e);
    }
    check(rc, e);
    handle_ = std::make_shared<SessionHandle>();
    handle_->session = s;
    check(kvrt_get_geometry(s, &geometry_, &e), e);
    principal_ = kvrt_session_principal(s);
    id_ = kvrt_session_id(s);
  }

  void close() { handle_.reset(); }
  bool closed() const { return !handle_; }
  uint64_t id() const { return id_; }
  const std::string& principal() const { return principal_; }
  const kvrt_geometry& geometry() const { return geometry_; }

  uint64_t authorize(const std::string& namespace_name) {
    uint64_t generation = 0;
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_authorize(s, namespace_name.c_str(), &generation, e); });
    return generation;
  }

  py::tuple lookup(const std::vector<const Request*>& requests) {
    const std::vector<kvrt_admit_request> asks = c_requests(requests);
    py::array_t<uint32_t> hits(static_cast<py::ssize_t>(asks.size()));
    py::array_t<int32_t> statuses(static_cast<py::ssize_t>(asks.size()));
    uint32_t* h = hits.mutable_data();
    int32_t* st = statuses.mutable_data();
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_lookup(s, asks.data(), asks.size(), h, st, e); });
    return py::make_tuple(hits, statuses);
  }

  // The scheduler handoff (a radix node): one receipt per request, in order.
  std::vector<kvrt_handoff_receipt> handoff(const std::vector<const Request*>& requests, const py::handle& request_ids,
                                            const py::handle& free_tail_rows) {
    const std::vector<kvrt_admit_request> asks = c_requests(requests);
    const std::vector<uint64_t> ids = integers<uint64_t>(request_ids, "request_ids");
    if (ids.size() != asks.size())
      invalid("request_ids", std::to_string(ids.size()) + " ids for " + std::to_string(asks.size()) + " requests");
    std::vector<uint32_t> tails(asks.size(), 0);
    if (!free_tail_rows.is_none()) {
      tails = integers<uint32_t>(free_tail_rows, "free_tail_rows");
      if (tails.size() != asks.size())
        invalid("free_tail_rows",
                std::to_string(tails.size()) + " row counts for " + std::to_string(asks.size()) + " requests");
    }
    std::vector<kvrt_handoff_receipt> out(asks.size());
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_handoff(s, asks.data(), ids.data(), tails.data(), asks.size(), out.data(), e);
    });
    return out;
  }

  py::array_t<int32_t> dispose_handoffs(const py::handle& leases, const py::handle& dispositions) {
    const std::vector<uint64_t> ids = integers<uint64_t>(leases, "leases");
    const std::vector<int32_t> what = integers<int32_t>(dispositions, "dispositions");
    if (what.size() != ids.size())
      invalid("dispositions",
              std::to_string(what.size()) + " dispositions for " + std::to_string(ids.size()) + " leases");
    py::array_t<int32_t> statuses(static_cast<py::ssize_t>(ids.size()));
    int32_t* st = statuses.mutable_data();
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_dispose_handoffs(s, ids.data(), what.data(), ids.size(), st, e);
    });
    return statuses;
  }

  // The session tier (0x0CC): see kvrt.h.
  void save_session(const std::string& namespace_name, const std::string& label, const py::handle& tokens,
                    uint64_t request, const std::string& position_contract) {
    const std::vector<int32_t> t = token_ids(tokens, "tokens");
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_save_session(s, namespace_name.c_str(), label.c_str(), t.data(), t.size(), request,
                               position_contract.c_str(), e);
    });
  }

  py::tuple resume_session(const std::string& namespace_name, const std::string& label, const py::handle& prompt,
                           uint64_t request, const std::string& position_contract) {
    const std::vector<int32_t> t = token_ids(prompt, "prompt");
    uint32_t rows = 0;
    int32_t refusal = -1;
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_resume_session(s, namespace_name.c_str(), label.c_str(), t.data(), t.size(), request,
                                 position_contract.c_str(), &rows, &refusal, e);
    });
    return py::make_tuple(rows, refusal);
  }

  // Prompt Cache (0x0CB): see kvrt.h.
  uint64_t register_prompt_schema(const std::string& namespace_name, const std::string& schema_toml) {
    uint64_t generation = 0;
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_register_prompt_schema(s, namespace_name.c_str(), schema_toml.c_str(), &generation, e);
    });
    return generation;
  }

  std::vector<kvrt_prompt_segment> assemble_prompt(const std::string& namespace_name, const std::string& schema_id,
                                                   uint64_t schema_generation,
                                                   const std::vector<const PromptItem*>& items) {
    if (items.empty()) invalid("items", "a prompt of at least one item is required");
    std::vector<std::vector<kvrt_prompt_parameter>> parameters;
    std::vector<kvrt_prompt_item> c_items;
    for (const PromptItem* item : items) parameters.push_back(c_parameters(item->parameters));
    for (size_t i = 0; i < items.size(); ++i) {
      const PromptItem& item = *items[i];
      c_items.push_back(kvrt_prompt_item{item.module_id.c_str(), parameters[i].data(), parameters[i].size(),
                                         item.tokens.data(), item.tokens.size(), item.gap_begin,
                                         item.use_cache ? 1 : 0});
    }
    std::vector<kvrt_prompt_segment> out(c_items.size());
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_assemble_prompt(s, namespace_name.c_str(), schema_id.c_str(), schema_generation, c_items.data(),
                                  c_items.size(), out.data(), e);
    });
    return out;
  }

  void copy_prompt_module(uint64_t module, uint64_t request, uint32_t row_begin) {
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_copy_prompt_module(s, module, request, row_begin, e); });
  }

  void release_prompt_module(uint64_t module) {
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_release_prompt_module(s, module, e); });
  }

  void publish_prompt_module(const std::string& namespace_name, const std::string& schema_id,
                             uint64_t schema_generation, const std::string& module_id, const py::handle& tokens,
                             uint64_t request, const std::map<std::string, std::string>& parameters) {
    const std::vector<int32_t> t = token_ids(tokens, "tokens");
    const std::vector<kvrt_prompt_parameter> p = c_parameters(parameters);
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_publish_prompt_module(s, namespace_name.c_str(), schema_id.c_str(), schema_generation,
                                        module_id.c_str(), p.data(), p.size(), t.data(), t.size(), request, e);
    });
  }

  std::vector<Admission> admit(const std::vector<const Request*>& requests, bool reuse) {
    const std::vector<kvrt_admit_request> asks = c_requests(requests);
    std::vector<kvrt_admission> out(asks.size());
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_admit(s, asks.data(), asks.size(), reuse ? 1 : 0, out.data(), e);
    });
    std::vector<Admission> admissions(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const kvrt_admission& a = out[i];
      admissions[i] = Admission{a.status, a.request, a.hit_tokens, a.reuse_attempt, a.reuse_rejection, a.blocks, {}};
      if (a.status == KVRT_FAILED || a.status == KVRT_HIT_WITHDRAWN) admissions[i].error = a.error;
    }
    return admissions;
  }

  py::array_t<uint32_t> block_table(uint64_t request, uint32_t group) {
    std::vector<uint32_t> blocks(64);
    size_t count = 0;
    for (;;) {
      call([&](kvrt_session* s, kvrt_error* e) {
        return kvrt_block_table(s, request, group, blocks.data(), blocks.size(), &count, e);
      });
      if (count <= blocks.size()) break;
      blocks.resize(count);
    }
    py::array_t<uint32_t> out(static_cast<py::ssize_t>(count));
    std::memcpy(out.mutable_data(), blocks.data(), count * sizeof(uint32_t));
    return out;
  }

  py::array_t<int32_t> commit_rows(const py::handle& requests, const py::handle& valid_rows) {
    const std::vector<uint64_t> ids = integers<uint64_t>(requests, "requests");
    const std::vector<uint32_t> rows = integers<uint32_t>(valid_rows, "valid_rows");
    if (rows.size() != ids.size())
      invalid("valid_rows",
              std::to_string(rows.size()) + " row counts for " + std::to_string(ids.size()) + " requests");
    py::array_t<int32_t> statuses(static_cast<py::ssize_t>(ids.size()));
    int32_t* st = statuses.mutable_data();
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_commit_rows(s, ids.data(), rows.data(), ids.size(), st, e);
    });
    return statuses;
  }

  py::tuple append(const py::handle& requests) {
    const std::vector<uint64_t> ids = integers<uint64_t>(requests, "requests");
    py::array_t<uint32_t> positions(static_cast<py::ssize_t>(ids.size()));
    py::array_t<int32_t> statuses(static_cast<py::ssize_t>(ids.size()));
    uint32_t* p = positions.mutable_data();
    int32_t* st = statuses.mutable_data();
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_append(s, ids.data(), ids.size(), p, st, e); });
    return py::make_tuple(positions, statuses);
  }

  py::tuple fork(const py::handle& parents) {
    const std::vector<uint64_t> ids = integers<uint64_t>(parents, "parents");
    py::array_t<uint64_t> children(static_cast<py::ssize_t>(ids.size()));
    py::array_t<int32_t> statuses(static_cast<py::ssize_t>(ids.size()));
    uint64_t* c = children.mutable_data();
    int32_t* st = statuses.mutable_data();
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_fork(s, ids.data(), ids.size(), c, st, e); });
    return py::make_tuple(children, statuses);
  }

  // The node's statistics as JSON text. A buffer too small is refused with
  // the length it needs; the figures are read again into one that large
  // (with room for their growth since).
  std::string stats_json(bool validate) {
    std::string text(64 * 1024, '\0');
    size_t length = 0;
    for (;;) {
      bool short_buffer = false;
      call([&](kvrt_session* s, kvrt_error* e) {
        const int32_t rc = kvrt_stats_json(s, validate ? 1 : 0, text.data(), text.size(), &length, e);
        short_buffer = rc == KVRT_E_INVALID_ARGUMENT && length + 1 > text.size();
        return short_buffer ? KVRT_OK : rc;
      });
      if (!short_buffer) break;
      text.assign(length + 4096, '\0');
    }
    text.resize(length);
    return text;
  }

  py::array_t<int32_t> release(const py::handle& requests, int32_t reason) {
    const std::vector<uint64_t> ids = integers<uint64_t>(requests, "requests");
    py::array_t<int32_t> statuses(static_cast<py::ssize_t>(ids.size()));
    int32_t* st = statuses.mutable_data();
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_release(s, ids.data(), ids.size(), reason, st, e); });
    return statuses;
  }

  void publish(uint64_t request, const std::string& namespace_name, const py::handle& tokens, uint32_t first_block,
               uint32_t end_block) {
    const std::vector<int32_t> t = token_ids(tokens, "tokens");
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_publish(s, request, namespace_name.c_str(), t.data(), static_cast<uint32_t>(t.size()), first_block,
                          end_block, e);
    });
  }

  void end_reuse(uint64_t attempt, bool executed, uint64_t request, const py::handle& tokens,
                 uint32_t successor_end_block) {
    std::vector<int32_t> t;
    if (!tokens.is_none()) t = token_ids(tokens, "tokens");
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_end_reuse(s, attempt, executed ? 1 : 0, request, t.empty() ? nullptr : t.data(),
                            static_cast<uint32_t>(t.size()), successor_end_block, e);
    });
  }

  void flush_reuse_ends() {
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_flush_reuse_ends(s, e); });
  }

  kvrt_pool_view pool_view(uint32_t group) {
    kvrt_pool_view v{};
    call([&](kvrt_session* s, kvrt_error* e) { return kvrt_get_pool_view(s, group, &v, e); });
    return v;
  }

  // Rows [first_row, first_row + rows) of a pool block, copied out in
  // canonical order: an array of shape (rows, row_bytes), uint8.
  py::array_t<uint8_t> read_rows(uint32_t group, uint32_t block, uint32_t first_row, uint32_t rows) {
    const kvrt_pool_view v = pool_view(group);
    py::array_t<uint8_t> out({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(v.row_bytes)});
    uint8_t* dst = out.mutable_data();
    const size_t size = static_cast<size_t>(rows) * v.row_bytes;
    call(
        [&](kvrt_session* s, kvrt_error* e) { return kvrt_read_rows(s, group, block, first_row, rows, dst, size, e); });
    return out;
  }

  // Rows from `data` (any C-contiguous array whose bytes are whole rows).
  void write_rows(uint32_t group, uint32_t block, uint32_t first_row, const py::buffer& data) {
    const py::buffer_info info = data.request();
    if (!is_c_contiguous(info)) invalid("data", "rows must be a C-contiguous buffer");
    const kvrt_pool_view v = pool_view(group);
    const size_t size = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
    if (v.row_bytes == 0 || size % v.row_bytes != 0)
      invalid("data", std::to_string(size) + " bytes are not whole rows of " + std::to_string(v.row_bytes) + " bytes");
    const auto rows = static_cast<uint32_t>(size / v.row_bytes);
    const void* src = info.ptr;
    call([&](kvrt_session* s, kvrt_error* e) {
      return kvrt_write_rows(s, group, block, first_row, rows, src, size, e);
    });
  }

  // Tensor `kind` (0 = K, 1 = V) of a pool, zero-copy: shape (blocks,
  // block_tokens, layers, kv_heads, head_dim) with the pool's own strides.
  // The array keeps the mapping (and so the C session) alive.
  py::array kv_array(uint32_t group, int kind) {
    const kvrt_pool_view v = tensor_view(group, kind);
    if (v.memory != KVRT_MEMORY_HOST)
      raise(201, "incompatible", "group",
            "pool " + std::to_string(group) + " is GPU memory: kv_tensor gives it as a CUDA tensor");
    const py::dtype dtype = numpy_dtype(v.dtype[kind]);
    auto* keep = new std::shared_ptr<SessionHandle>(handle_);
    py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<SessionHandle>*>(p); });
    return py::array(dtype, shape_of(v), strides_of(v, kind, dtype.itemsize()), v.base + v.origin[kind], owner);
  }

  // Tensor `kind` of a GPU pool as a __cuda_array_interface__ (version 3)
  // dict, whose "owner" keeps the imported pools (and so the C session)
  // alive; kvrt.Session.kv_tensor hands it to torch. Elements are the
  // NumPy type of kv_array (bf16 as uint16 bits).
  py::dict cuda_array_interface(uint32_t group, int kind) {
    const kvrt_pool_view v = tensor_view(group, kind);
    if (v.memory != KVRT_MEMORY_CUDA)
      raise(201, "incompatible", "group", "pool " + std::to_string(group) + " is host memory: use kv_array");
    const py::dtype dtype = numpy_dtype(v.dtype[kind]);
    auto* keep = new std::shared_ptr<SessionHandle>(handle_);
    py::dict out;
    out["shape"] = py::tuple(py::cast(shape_of(v)));
    out["strides"] = py::tuple(py::cast(strides_of(v, kind, dtype.itemsize())));
    out["typestr"] = py::str(dtype.attr("str"));
    out["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(v.base + v.origin[kind]), false);
    out["version"] = 3;
    out["device"] = v.device;
    out["owner"] = py::capsule(keep, [](void* p) { delete static_cast<std::shared_ptr<SessionHandle>*>(p); });
    return out;
  }

 private:
  kvrt_pool_view tensor_view(uint32_t group, int kind) {
    if (kind != 0 && kind != 1) invalid("kind", "0 (K) or 1 (V), not " + std::to_string(kind));
    return pool_view(group);
  }

  // (blocks, block_tokens, layers, kv_heads, head_dim) of a pool tensor.
  std::vector<py::ssize_t> shape_of(const kvrt_pool_view& v) const {
    return {geometry_.capacity_blocks, geometry_.block_tokens, v.layers, v.kv_heads, v.head_dim};
  }

  std::vector<py::ssize_t> strides_of(const kvrt_pool_view& v, int kind, py::ssize_t itemsize) const {
    const std::vector<py::ssize_t> shape = shape_of(v);
    std::vector<py::ssize_t> strides{v.block_stride[kind], v.row_stride[kind], v.layer_stride[kind],
                                     v.head_stride[kind], v.lane_stride[kind]};
    for (size_t axis = 0; axis < shape.size(); ++axis)
      if (shape[axis] == 1) strides[axis] = itemsize;  // extent 1: the C ABI reports no step
    return strides;
  }

  static bool is_c_contiguous(const py::buffer_info& info) {
    py::ssize_t expected = info.itemsize;
    for (py::ssize_t axis = info.ndim - 1; axis >= 0; --axis) {
      if (info.shape[static_cast<size_t>(axis)] != 1 && info.strides[static_cast<size_t>(axis)] != expected)
        return false;
      expected *= info.shape[static_cast<size_t>(axis)];
    }
    return true;
  }

  // Runs a C call with the GIL released and the session's lock held;
  // raises its error.
  template <class Call>
  void call(Call&& c) {
    if (!handle_) raise(KVRT_E_SESSION_ENDED, "session_ended", "session", "the session was closed");
    std::shared_ptr<SessionHandle> h = handle_;
    kvrt_error e{};
    int32_t rc = 0;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> guard(h->lock);
      rc = c(h->session, &e);
    }
    check(rc, e);
  }

  std::shared_ptr<SessionHandle> handle_;
  kvrt_geometry geometry_{};
  std::string principal_;
  uint64_t id_ = 0;
};

// Bytes of one block of an array whose first axis is the block, when each
// block is one contiguous run (its trailing axes C-ordered); 0 otherwise.
py::ssize_t block_run_bytes(const py::buffer_info& info) {
  if (info.ndim < 1) return 0;
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t axis = info.ndim - 1; axis >= 1; --axis) {
    if (info.shape[static_cast<size_t>(axis)] != 1 && info.strides[static_cast<size_t>(axis)] != expected) return 0;
    expected *= info.shape[static_cast<size_t>(axis)];
  }
  return expected;
}

// dst[dst_blocks[i]] = src[src_blocks[i]] for every i: one memmove per
// block with the GIL released, after checking every index and that each
// block of both arrays is one contiguous run of the same length. The
// engine integrations move K/V between an engine's paged cache and a pool
// with it: a block of one layer is a single run in both (slot-major pools,
// vLLM's and SGLang's paged caches), and per-block Python calls would cost
// more than the copies.
void copy_blocks(py::array dst, const std::vector<int64_t>& dst_blocks, py::array src,
                 const std::vector<int64_t>& src_blocks) {
  py::buffer_info d = dst.request(true);
  py::buffer_info s = src.request();
  if (dst_blocks.size() != src_blocks.size())
    invalid("src_blocks", std::to_string(dst_blocks.size()) + " destination blocks need as many sources, got " +
                              std::to_string(src_blocks.size()));
  const py::ssize_t run = block_run_bytes(d);
  if (run == 0) invalid("dst", "each block of the destination must be one contiguous run of bytes");
  if (block_run_bytes(s) != run)
    invalid("src", "each block of the source must be one contiguous run of " + std::to_string(run) + " bytes");
  for (size_t i = 0; i < dst_blocks.size(); ++i) {
    if (dst_blocks[i] < 0 || dst_blocks[i] >= d.shape[0])
      invalid("dst_blocks",
              "block " + std::to_string(dst_blocks[i]) + " is outside the destination's " + std::to_string(d.shape[0]));
    if (src_blocks[i] < 0 || src_blocks[i] >= s.shape[0])
      invalid("src_blocks",
              "block " + std::to_string(src_blocks[i]) + " is outside the source's " + std::to_string(s.shape[0]));
  }
  auto* to = static_cast<char*>(d.ptr);
  const auto* from = static_cast<const char*>(s.ptr);
  py::gil_scoped_release release;
  for (size_t i = 0; i < dst_blocks.size(); ++i)
    std::memmove(to + dst_blocks[i] * d.strides[0], from + src_blocks[i] * s.strides[0], static_cast<size_t>(run));
}

}  // namespace

PYBIND11_MODULE(_kvrt, m) {
  m.doc() = "libkvrt's engine-facing session (api/kvrt.h); use the kvrt package, not this module.";
  m.attr("ABI_VERSION") = KVRT_ABI_VERSION;
  m.def("abi_version", &kvrt_abi_version, "The ABI version of the loaded libkvrt.");
  m.def("error_name", [](int32_t code) { return std::string(kvrt_error_name(code)); });
  m.def("copy_blocks", &copy_blocks, py::arg("dst"), py::arg("dst_blocks"), py::arg("src"), py::arg("src_blocks"),
        "dst[dst_blocks[i]] = src[src_blocks[i]] for every i, one memmove per block (the GIL released); each block "
        "of both arrays must be one contiguous run of the same bytes [blocks index the first axis].");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const KvrtFailure& f) {
      py::object error = error_object(f.error);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    }
  });

  py::class_<Request>(m, "Request")
      .def(py::init([](std::string namespace_name, const py::handle& tokens, std::string adapter_id,
                       std::string cache_salt) {
             if (namespace_name.empty()) invalid("namespace_name", "a namespace name is required");
             Request r{std::move(namespace_name), token_ids(tokens, "tokens"), std::move(adapter_id),
                       std::move(cache_salt)};
             if (r.tokens.empty()) invalid("tokens", "a prompt of at least one token is required");
             return r;
           }),
           py::arg("namespace_name"), py::arg("tokens"), py::arg("adapter_id") = "", py::arg("cache_salt") = "")
      .def_readonly("namespace_name", &Request::namespace_name)
      .def_property_readonly("tokens",
                             [](const Request& r) { return py::array_t<int32_t>(r.tokens.size(), r.tokens.data()); })
      .def_readonly("adapter_id", &Request::adapter_id)
      .def_readonly("cache_salt", &Request::cache_salt)
      .def("__len__", [](const Request& r) { return r.tokens.size(); });

  py::class_<PromptItem>(m, "PromptItem")
      .def(py::init([](const py::handle& tokens, std::string module_id, std::map<std::string, std::string> parameters,
                       uint32_t gap_begin, bool use_cache) {
             PromptItem item{token_ids(tokens, "tokens"), std::move(module_id), std::move(parameters), gap_begin,
                             use_cache};
             if (item.tokens.empty()) invalid("tokens", "an item of at least one token is required");
             return item;
           }),
           py::arg("tokens"), py::arg("module_id") = "", py::arg("parameters") = std::map<std::string, std::string>{},
           py::arg("gap_begin") = 0, py::arg("use_cache") = true)
      .def_readonly("tokens", &PromptItem::tokens)
      .def_readonly("module_id", &PromptItem::module_id)
      .def_readonly("parameters", &PromptItem::parameters)
      .def_readonly("gap_begin", &PromptItem::gap_begin)
      .def_readonly("use_cache", &PromptItem::use_cache);

  py::class_<kvrt_prompt_segment>(m, "PromptSegment")
      .def_readonly("item", &kvrt_prompt_segment::item)
      .def_readonly("position_begin", &kvrt_prompt_segment::position_begin)
      .def_readonly("tokens", &kvrt_prompt_segment::tokens)
      .def_readonly("outcome", &kvrt_prompt_segment::outcome)
      .def_readonly("miss_reason", &kvrt_prompt_segment::miss_reason)
      .def_readonly("module", &kvrt_prompt_segment::module)
      .def("__repr__", [](const kvrt_prompt_segment& s) {
        return "PromptSegment(item=" + std::to_string(s.item) + ", position_begin=" + std::to_string(s.position_begin) +
               ", tokens=" + std::to_string(s.tokens) + ", outcome=" + std::to_string(s.outcome) +
               ", miss_reason=" + std::to_string(s.miss_reason) + ", module=" + std::to_string(s.module) + ")";
      });
  m.attr("PROMPT_COMPUTED") = static_cast<int>(KVRT_PROMPT_COMPUTED);
  m.attr("PROMPT_REUSED") = static_cast<int>(KVRT_PROMPT_REUSED);
  m.attr("PROMPT_MISSED") = static_cast<int>(KVRT_PROMPT_MISSED);

  py::class_<kvrt_handoff_receipt>(m, "HandoffReceipt")
      .def_readonly("status", &kvrt_handoff_receipt::status)
      .def_readonly("lease", &kvrt_handoff_receipt::lease)
      .def_readonly("hit_tokens", &kvrt_handoff_receipt::hit_tokens)
      .def_property_readonly("suffix",
                             [](const kvrt_handoff_receipt& h) { return py::make_tuple(h.suffix_begin, h.suffix_end); })
      .def_readonly("new_physical_blocks", &kvrt_handoff_receipt::new_physical_blocks)
      .def_readonly("new_useful_kv_bytes", &kvrt_handoff_receipt::new_useful_kv_bytes)
      .def_readonly("new_physical_capacity_bytes", &kvrt_handoff_receipt::new_physical_capacity_bytes)
      .def_readonly("tree_version", &kvrt_handoff_receipt::tree_version)
      .def("__repr__", [](const kvrt_handoff_receipt& h) {
        return "HandoffReceipt(status=" + std::to_string(h.status) + ", lease=" + std::to_string(h.lease) +
               ", hit_tokens=" + std::to_string(h.hit_tokens) + ", suffix=(" + std::to_string(h.suffix_begin) + ", " +
               std::to_string(h.suffix_end) + "), new_physical_blocks=" + std::to_string(h.new_physical_blocks) + ")";
      });
  m.attr("HANDOFF_ADMIT") = static_cast<int>(KVRT_HANDOFF_ADMIT);
  m.attr("HANDOFF_RELEASE") = static_cast<int>(KVRT_HANDOFF_RELEASE);

  py::class_<Admission>(m, "Admission")
      .def_readonly("status", &Admission::status)
      .def_readonly("request", &Admission::request)
      .def_readonly("hit_tokens", &Admission::hit_tokens)
      .def_readonly("reuse_attempt", &Admission::reuse_attempt)
      .def_readonly("reuse_rejection", &Admission::reuse_rejection)
      .def_readonly("blocks", &Admission::blocks)
      .def_property_readonly("admitted", [](const Admission& a) { return a.status == KVRT_ADMITTED; })
      .def_property_readonly(
          "error", [](const Admission& a) { return a.error ? error_object(*a.error) : py::object(py::none()); })
      .def("__repr__", [](const Admission& a) {
        return "Admission(status=" + std::to_string(a.status) + ", request=" + std::to_string(a.request) +
               ", hit_tokens=" + std::to_string(a.hit_tokens) + ", blocks=" + std::to_string(a.blocks) + ")";
      });

  py::class_<kvrt_geometry>(m, "Geometry")
      .def_readonly("groups", &kvrt_geometry::groups)
      .def_readonly("block_tokens", &kvrt_geometry::block_tokens)
      .def_readonly("capacity_blocks", &kvrt_geometry::capacity_blocks);

  py::class_<kvrt_pool_view>(m, "PoolView")
      .def_readonly("cache_group", &kvrt_pool_view::cache_group)
      .def_readonly("memory", &kvrt_pool_view::memory)
      .def_readonly("device", &kvrt_pool_view::device)
      .def_readonly("bytes", &kvrt_pool_view::bytes)
      .def_readonly("row_bytes", &kvrt_pool_view::row_bytes)
      .def_readonly("k_row_bytes", &kvrt_pool_view::k_row_bytes)
      .def_readonly("layers", &kvrt_pool_view::layers)
      .def_readonly("first_layer", &kvrt_pool_view::first_layer)
      .def_readonly("kv_heads", &kvrt_pool_view::kv_heads)
      .def_readonly("head_dim", &kvrt_pool_view::head_dim)
      .def_readonly("element_bytes", &kvrt_pool_view::element_bytes)
      .def_property_readonly("dtype", [](const kvrt_pool_view& v) { return py::make_tuple(v.dtype[0], v.dtype[1]); });

  py::class_<Session>(m, "Session")
      .def(py::init<const std::string&, const std::string&, const std::string&, uint32_t, bool,
                    const std::optional<std::string>&>(),
           py::arg("descriptor"), py::arg("principal"), py::arg("worker_name") = "engine",
           py::arg("call_timeout_ms") = 0, py::arg("middleman") = false, py::arg("token") = py::none())
      .def("close", &Session::close)
      .def_property_readonly("closed", &Session::closed)
      .def_property_readonly("id", &Session::id)
      .def_property_readonly("principal", &Session::principal)
      .def_property_readonly("geometry", &Session::geometry)
      .def("authorize", &Session::authorize, py::arg("namespace_name"))
      .def("lookup", &Session::lookup, py::arg("requests"))
      .def("handoff", &Session::handoff, py::arg("requests"), py::arg("request_ids"),
           py::arg("free_tail_rows") = py::none())
      .def("dispose_handoffs", &Session::dispose_handoffs, py::arg("leases"), py::arg("dispositions"))
      .def("admit", &Session::admit, py::arg("requests"), py::arg("reuse") = true)
      .def("save_session", &Session::save_session, py::arg("namespace_name"), py::arg("label"), py::arg("tokens"),
           py::arg("request"), py::arg("position_contract") = "")
      .def("resume_session", &Session::resume_session, py::arg("namespace_name"), py::arg("label"), py::arg("prompt"),
           py::arg("request"), py::arg("position_contract") = "")
      .def("register_prompt_schema", &Session::register_prompt_schema, py::arg("namespace_name"),
           py::arg("schema_toml"))
      .def("assemble_prompt", &Session::assemble_prompt, py::arg("namespace_name"), py::arg("schema_id"),
           py::arg("schema_generation"), py::arg("items"))
      .def("copy_prompt_module", &Session::copy_prompt_module, py::arg("module"), py::arg("request"),
           py::arg("row_begin"))
      .def("release_prompt_module", &Session::release_prompt_module, py::arg("module"))
      .def("publish_prompt_module", &Session::publish_prompt_module, py::arg("namespace_name"), py::arg("schema_id"),
           py::arg("schema_generation"), py::arg("module_id"), py::arg("tokens"), py::arg("request"),
           py::arg("parameters") = std::map<std::string, std::string>{})
      .def("block_table", &Session::block_table, py::arg("request"), py::arg("group") = 0)
      .def("commit_rows", &Session::commit_rows, py::arg("requests"), py::arg("valid_rows"))
      .def("append", &Session::append, py::arg("requests"))
      .def("fork", &Session::fork, py::arg("parents"))
      .def("stats_json", &Session::stats_json, py::arg("validate") = false)
      .def("release", &Session::release, py::arg("requests"), py::arg("reason") = 0)
      .def("publish", &Session::publish, py::arg("request"), py::arg("namespace_name"), py::arg("tokens"),
           py::arg("first_block"), py::arg("end_block"))
      .def("end_reuse", &Session::end_reuse, py::arg("attempt"), py::arg("executed"), py::arg("request") = 0,
           py::arg("tokens") = py::none(), py::arg("successor_end_block") = 0)
      .def("flush_reuse_ends", &Session::flush_reuse_ends)
      .def("pool_view", &Session::pool_view, py::arg("group") = 0)
      .def("read_rows", &Session::read_rows, py::arg("group"), py::arg("block"), py::arg("first_row"), py::arg("rows"))
      .def("write_rows", &Session::write_rows, py::arg("group"), py::arg("block"), py::arg("first_row"),
           py::arg("data"))
      .def("kv_array", &Session::kv_array, py::arg("group"), py::arg("kind"))
      .def("cuda_array_interface", &Session::cuda_array_interface, py::arg("group"), py::arg("kind"));
}
