#pragma once
// The route table: every call a worker's session can make on its node, each
// declared once, here. A route names the owner that answers it, the request
// it carries and the receipt it is answered with (both declared in
// schema/<owner>.capnp). Everything that moves a call reads this table: the
// client (Client::call deduces the route from the request's type), the
// session channel's framing (which route ids exist), the node's session
// actor (which owner a route goes to), the owners' actors (which requests
// they decode) and the gateway (which owners report statistics and hear of
// a session's end, in Owner order). docs/architecture.md has the checklist
// for adding a route or an owner.
//
// No CAF and no Cap'n Proto here: the types are the generated plain C++ ones.
#include <array>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "schema/allocator_types.hpp"
#include "schema/authorization_types.hpp"
#include "schema/executor_types.hpp"
#include "schema/mapper_types.hpp"
#include "schema/prefix_types.hpp"
#include "schema/reuse_types.hpp"
#include "services/common/ids.hpp"

namespace kvrt {

// The owners a node runs, in the order a session's end reaches them: the
// reuse coordinator first (a batch of the session still in flight sees the
// end before any owner answer that could follow it, and returns what it
// took), then the index (no new lookups for the session), the allocator
// (requests and leases), the grants, the mapper's slots. The executor holds
// nothing of a session.
enum class Owner : uint8_t { reuse = 0, prefix_index = 1, allocator = 2, authorization = 3, mapper = 4, executor = 5 };
inline constexpr size_t kOwnerCount = 6;
inline constexpr std::array<Owner, kOwnerCount> kOwners{Owner::reuse,         Owner::prefix_index, Owner::allocator,
                                                        Owner::authorization, Owner::mapper,       Owner::executor};

// The owner's name in statistics, logs and errors ("prefix_index" is served
// by the hash-chain or the radix index, [node] prefix_index).
constexpr std::string_view owner_name(Owner o) {
  constexpr std::array<std::string_view, kOwnerCount> names{"reuse",         "prefix_index", "allocator",
                                                            "authorization", "mapper",       "executor"};
  return names[static_cast<size_t>(o)];
}

// A route's number on the session channel. Numbers travel in frames: never
// renumber a route, and give a new one the next free number.
using RouteId = StrongId<struct RouteIdTag, uint16_t>;

// The session channel's own routes: a connection's first frame binds it to
// its session (attach); ping is the session actor's echo (the transport
// floor `kvrt bench rpc` measures).
inline constexpr RouteId kAttachRoute{0};
inline constexpr RouteId kPingRoute{7};
// A connection's first frame may instead open the session itself (a
// HelloRequest, answered with the SessionReceipt or an ErrorMessage): a
// client that never connects through the middleman. That connection is
// the session's lifeline: the session ends when it closes, or when none of
// the session's connections carried a frame for the node's
// connection_timeout_ms (a client keeps one pinging).
inline constexpr RouteId kHelloRoute{13};

// Who may call a route: a session of a worker principal (the K/V routes) or
// of an admin principal (fault points, invalidation). Never both: an admin
// holds no namespace and so no K/V, and a worker can never arm a fault or
// purge (the session actor refuses the other kind with
// authorization_route_denied). The role is the principal's, from the node's
// [[principal]] role.
enum class RouteAccess : uint8_t { worker = 0, admin = 1 };

template <uint16_t Id, Owner O, class Req, class Rec, RouteAccess A = RouteAccess::worker>
struct Route {
  static constexpr RouteId id{Id};
  static constexpr Owner owner = O;
  static constexpr RouteAccess access = A;
  using Request = Req;
  using Receipt = Rec;
};

// ---- the table ----------------------------------------------------------------

struct AllocatorRoute : Route<1, Owner::allocator, AllocatorBatch, AllocatorBatchReceipt> {
  static constexpr std::string_view name = "allocator";
};
struct PrefixRoute : Route<2, Owner::prefix_index, PrefixBatch, PrefixBatchReceipt> {
  static constexpr std::string_view name = "prefix";
};
struct AuthorizeRoute : Route<3, Owner::authorization, AuthorizeRequest, NamespaceGrantReceipt> {
  static constexpr std::string_view name = "authorize";
};
struct MapperRoute : Route<4, Owner::mapper, MapperBatch, MapperBatchReceipt> {
  static constexpr std::string_view name = "mapper";
};
struct ExecutorRoute : Route<5, Owner::executor, ExecuteBatch, ExecuteBatchReceipt> {
  static constexpr std::string_view name = "executor";
};
struct ReuseRoute : Route<6, Owner::reuse, ReuseBatch, ReuseBatchReceipt> {
  static constexpr std::string_view name = "reuse";
};

// Fault-injection runs only: the node refuses it unless [node] fault_injection,
// and only an admin session may call it.
struct FaultArmRoute : Route<8, Owner::allocator, FaultArmRequest, FaultArmReceipt, RouteAccess::admin> {
  static constexpr std::string_view name = "fault_arm";
};

// A live node's namespace lifecycle (0x01A, 0x0CE), for operators: make a
// namespace's successor generation current, and read where each namespace
// stands.
struct InvalidateRoute
    : Route<9, Owner::authorization, NamespaceInvalidateRequest, NamespaceInvalidationReceipt, RouteAccess::admin> {
  static constexpr std::string_view name = "invalidate";
};
struct NamespaceStatusRoute
    : Route<10, Owner::authorization, NamespaceStatusRequest, NamespaceStatusReceipt, RouteAccess::admin> {
  static constexpr std::string_view name = "namespace_status";
};

// The seven steps of 0x0CE on a live node: the receipt comes when the purge
// completed (or a step was refused), so the caller's timeout must cover the
// request's deadline.
struct PurgeRoute : Route<11, Owner::authorization, NamespacePurgeRequest, NamespacePurgeReceipt, RouteAccess::admin> {
  static constexpr std::string_view name = "purge";
};

// Unnamed pool segments ([node] pool_segments = "unnamed"): the descriptors
// of the pools the session's principal may use. Over the session channel
// only, whose writer attaches the receipt's descriptors to the reply frame
// (SCM_RIGHTS); through the middleman the receipt would come without them.
struct PoolDescriptorsRoute : Route<12, Owner::authorization, PoolDescriptorRequest, PoolDescriptorReceipt> {
  static constexpr std::string_view name = "pool_descriptors";
};
// Inactive sessions (0x0CC): save a history to the node's session tier, and
// resume it in the next turn. Served by the reuse owner, which holds the
// identity receipts (the tier holds the rows).
struct SessionSaveRoute : Route<14, Owner::reuse, SessionSaveRequest, SessionSaveReceipt> {
  static constexpr std::string_view name = "session_save";
};
struct SessionResumeRoute : Route<15, Owner::reuse, SessionResumeRequest, SessionResumeReceipt> {
  static constexpr std::string_view name = "session_resume";
};
// Prompt Cache (0x0CB): register a namespace's prompt schema, assemble a
// prompt written against it (each declared module reused at its declared
// positions or computed), and publish a computed module's blocks to the
// module store. Served by the reuse owner, which keeps the store.
struct PromptSchemaRoute : Route<16, Owner::reuse, PromptSchemaRequest, PromptSchemaReceipt> {
  static constexpr std::string_view name = "prompt_schema";
};
struct PromptAssembleRoute : Route<17, Owner::reuse, PromptAssembleRequest, PromptAssemblyReceipt> {
  static constexpr std::string_view name = "prompt_assemble";
};
struct PromptPublishRoute : Route<18, Owner::reuse, PromptModulePublishRequest, PromptModulePublishReceipt> {
  static constexpr std::string_view name = "prompt_module_publish";
};
using Routes =
    std::tuple<AllocatorRoute, PrefixRoute, AuthorizeRoute, MapperRoute, ExecutorRoute, ReuseRoute, FaultArmRoute,
               InvalidateRoute, NamespaceStatusRoute, PurgeRoute, PoolDescriptorsRoute, SessionSaveRoute,
               SessionResumeRoute, PromptSchemaRoute, PromptAssembleRoute, PromptPublishRoute>;

// ---- what follows from it -----------------------------------------------------

// Calls fn.template operator()<R>() for every route R, in table order.
template <class Fn>
constexpr void for_each_route(Fn&& fn) {
  [&]<class... R>(std::tuple<R...>*) { (fn.template operator()<R>(), ...); }(static_cast<Routes*>(nullptr));
}

// Calls fn.template operator()<R>() for the route whose id is `id`; false
// when no route has it.
template <class Fn>
constexpr bool with_route(RouteId id, Fn&& fn) {
  bool found = false;
  for_each_route([&]<class R>() {
    if (!found && R::id == id) {
      found = true;
      fn.template operator()<R>();
    }
  });
  return found;
}

// The route that carries a request type (each request travels on one route).
template <class Request, class Table>
struct find_route {};  // no route carries this request: a compile error where it is used
template <class Request, class R, class... Rest>
struct find_route<Request, std::tuple<R, Rest...>>
    : std::conditional_t<std::is_same_v<typename R::Request, Request>, std::type_identity<R>,
                         find_route<Request, std::tuple<Rest...>>> {};
template <class Request>
using route_of = typename find_route<Request, Routes>::type;
template <class Request>
using receipt_of = typename route_of<Request>::Receipt;

// Whether a frame may name this route (the table's and the channel's own).
constexpr bool is_known_route(RouteId id) {
  return id == kAttachRoute || id == kPingRoute || id == kHelloRoute || with_route(id, []<class>() {});
}

// The route's name, for logs and errors; "unknown" for an id nobody declared.
constexpr std::string_view route_name(RouteId id) {
  if (id == kAttachRoute) return "attach";
  if (id == kPingRoute) return "ping";
  if (id == kHelloRoute) return "hello";
  std::string_view name = "unknown";
  with_route(id, [&]<class R>() { name = R::name; });
  return name;
}

// The owner that answers a route (a table route only).
constexpr Owner route_owner(RouteId id) {
  Owner owner = Owner::reuse;
  with_route(id, [&]<class R>() { owner = R::owner; });
  return owner;
}

// Who may call a route (a table route only).
constexpr RouteAccess route_access(RouteId id) {
  RouteAccess access = RouteAccess::worker;
  with_route(id, [&]<class R>() { access = R::access; });
  return access;
}

// The table's own checks: ids unique and clear of the channel's own, one
// route per request type.
namespace detail {
constexpr bool route_ids_unique() {
  bool ok = true;
  for_each_route([&]<class A>() {
    if (A::id == kAttachRoute || A::id == kPingRoute || A::id == kHelloRoute) ok = false;
    int same = 0;
    for_each_route([&]<class B>() { same += A::id == B::id ? 1 : 0; });
    if (same != 1) ok = false;
  });
  return ok;
}
constexpr bool route_requests_unique() {
  bool ok = true;
  for_each_route([&]<class A>() {
    int same = 0;
    for_each_route([&]<class B>() { same += std::is_same_v<typename A::Request, typename B::Request> ? 1 : 0; });
    if (same != 1) ok = false;
  });
  return ok;
}
}  // namespace detail
static_assert(detail::route_ids_unique(), "every route needs its own id, clear of attach (0), ping (7) and hello (13)");
static_assert(detail::route_requests_unique(), "a request type travels on one route only");

}  // namespace kvrt
