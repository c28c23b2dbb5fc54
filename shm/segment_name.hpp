#pragma once
// Names of the POSIX shared-memory segments that hold block pools (docs/architecture.md
// layer 4). A name is derived, never chosen freely, so that every process that
// knows (namespace, namespace generation, cache group, instance) finds the same
// segment, and two runs on one host (parallel tests, CI jobs, two nodes) never
// meet: the instance id keeps them apart (docs/stack-notes.md, "Shared memory").
//
//   /kvrt.<namespace>.g<namespace generation>.c<cache group>.<instance>
//
// The pool generation is deliberately not part of the name: a pool rebuilt
// under a new generation keeps its name, and an attacher that still expects the
// old generation is told so by the header (ErrorCode::stale_generation) instead
// of silently finding nothing.
#include <string>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt::shm {

struct PoolSegmentName {
  std::string namespace_name;  // cache namespace (spec 0x0CE); any bytes, escaped
  NamespaceGeneration namespace_generation;
  CacheGroupId group;
  std::string instance;  // node instance id, see make_instance_id(); any bytes, escaped
};

// The segment name, with a leading '/' as shm_open(3) expects. Bytes outside
// [A-Za-z0-9_-] are written as "~XX" (upper-case hex) so that the encoding is
// injective: two different namespaces can never share a segment, which plain
// replacement ("a/b" and "a_b" -> "a_b") would allow. Errors: invalid_argument
// naming the field when namespace or instance is empty, or when the name would
// exceed NAME_MAX (255 bytes after the slash).
Result<std::string> pool_segment_name(const PoolSegmentName& parts);

// The reversible escape used above, exposed for tests and for tools that list
// /dev/shm.
std::string escape_name_component(std::string_view raw);

// A fresh instance id: "p<pid>-<process start time>-<random>-<sequence>".
// pid plus start time is unique on one host for the life of the boot; the
// random part covers pid namespaces (containers sharing /dev/shm); the per-call
// sequence separates several ids taken by one process (tests).
std::string make_instance_id();

}  // namespace kvrt::shm
