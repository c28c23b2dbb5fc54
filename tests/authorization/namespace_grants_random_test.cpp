// Seeded randomised test of NamespaceGrants, the index owners' view of each
// session's grants (0x0CE): random grants, generation advances, session ends,
// lookups (current) and publications (for_publication, with the generation
// the rows were computed under), against a reference model kept in plain
// maps. current() must answer the grant exactly when the session holds one
// at the namespace's newest generation; for_publication() must in addition
// refuse rows computed under any generation but that one (0 meaning "the
// session's current grant"), and both must refuse with the model's code.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>

#include "services/authorization/namespace_grants.hpp"

using namespace kvrt;

namespace {

struct GrantsModel {
  std::map<std::pair<uint64_t, std::string>, uint64_t> held;  // (session, namespace) -> generation
  std::map<std::string, uint64_t> newest;                     // namespace -> newest generation seen

  // The code current() must answer (ok when the grant holds).
  ErrorCode current(uint64_t session, const std::string& ns) const {
    const auto g = held.find({session, ns});
    if (g == held.end()) return ErrorCode::authorization_namespace_denied;
    const auto n = newest.find(ns);
    if (n != newest.end() && n->second != g->second) return ErrorCode::authorization_stale_generation;
    return ErrorCode::ok;
  }
  ErrorCode for_publication(uint64_t session, const std::string& ns, uint64_t computed) const {
    const ErrorCode c = current(session, ns);
    if (c != ErrorCode::ok || computed == 0) return c;
    return computed == held.at({session, ns}) ? ErrorCode::ok : ErrorCode::authorization_stale_generation;
  }
};

ErrorCode code_of(const Result<SessionNamespaceGrant>& r) { return r.ok() ? ErrorCode::ok : r.error().code; }

}  // namespace

TEST_CASE("namespace grants: random grants, advances and publications agree with a reference model",
          "[authorization][grants]") {
  const uint64_t seed = GENERATE(1ull, 7ull, 20261203ull);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  const std::vector<std::string> names{"a/x", "a/y", "b/z"};
  NamespaceGrants grants;
  GrantsModel model;
  uint64_t ok_publications = 0, stale_publications = 0;
  for (int step = 0; step < 5000; ++step) {
    INFO("step " << step);
    const uint64_t session = 1 + pick(5);
    const std::string& ns = names[pick(names.size())];
    switch (pick(5)) {
      case 0: {  // a grant at the namespace's newest generation, or an older one a slow owner relays
        const uint64_t newest = model.newest.contains(ns) ? model.newest[ns] : 1;
        const uint64_t g = pick(4) == 0 && newest > 1 ? newest - 1 : newest;
        grants.grant(SessionId{session}, SessionNamespaceGrant{ns, NamespaceGeneration{g}, "salt", {}, {}});
        model.held[{session, ns}] = g;
        model.newest[ns] = std::max(model.newest.contains(ns) ? model.newest[ns] : 0, g);
        break;
      }
      case 1: {  // an invalidation or a purge: the namespace moves on
        const uint64_t next = (model.newest.contains(ns) ? model.newest[ns] : 1) + 1;
        grants.advance_generation(ns, NamespaceGeneration{next});
        model.newest[ns] = next;
        break;
      }
      case 2:
        if (pick(8) == 0) {
          grants.end_session(SessionId{session});
          for (auto it = model.held.begin(); it != model.held.end();)
            it = it->first.first == session ? model.held.erase(it) : std::next(it);
        }
        break;
      case 3:
        CHECK(code_of(grants.current(SessionId{session}, ns)) == model.current(session, ns));
        break;
      default: {
        // Rows computed under the held generation, another one, or unnamed.
        const auto held = model.held.find({session, ns});
        const uint64_t base = held == model.held.end() ? 1 : held->second;
        const uint64_t computed = pick(3) == 0 ? 0 : pick(3) == 0 ? base + 1 + pick(3) : base - pick(2) * (base > 1);
        const ErrorCode want = model.for_publication(session, ns, computed);
        const Result<SessionNamespaceGrant> got =
            grants.for_publication(SessionId{session}, ns, NamespaceGeneration{computed});
        CHECK(code_of(got) == want);
        if (got.ok()) {
          CHECK(got->generation.value == model.held.at({session, ns}));
          ++ok_publications;
        } else if (want == ErrorCode::authorization_stale_generation) {
          ++stale_publications;
        }
        break;
      }
    }
  }
  // Both outcomes were exercised.
  CHECK(ok_publications > 50);
  CHECK(stale_publications > 50);
}
