// kvrt_fuzz_seeds SOURCE_ROOT CORPUS_DIR: writes the seed corpus of every
// fuzz target (docs/fuzzing.md) from the test fixtures and the example
// configs, as CORPUS_DIR/<target>/seed-*. Earlier seed-* files are removed
// first; regression-* files are the crashes found and are never touched.
// The output is deterministic, so a regenerated corpus differs only where a
// fixture did.
//
//   wire             every wire type's fully populated fixture and its default
//                    value (tests/schema/codec_*fixtures.hpp), behind the
//                    type's selector byte (fuzz/wire_types.hpp)
//   channel_frame    frame streams: attach, pipelined requests, refusals
//   page_pool        page-pool messages with and without SCM_RIGHTS data
//   node_descriptor  descriptors as the node writes them
//   <config>         the files of config/ and tests/data/ that config reads
//   trace_merge      Chrome trace files as ChromeTraceRecorder writes them
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// Before the fixtures: they call codec::encode by qualified name.
#include "schema/codecs.hpp"
// (keep this order)
#include "fuzz/wire_types.hpp"
#include "services/mapper/page_pool_channel.hpp"
#include "services/session/channel_frame.hpp"
#include "services/session/node_descriptor.hpp"
#include "services/telemetry/chrome_trace.hpp"
#include "tests/schema/codec_node_fixtures.hpp"

namespace fs = std::filesystem;
using namespace kvrt;

namespace {

fs::path corpus_root;
fs::path source_root;

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "kvrt_fuzz_seeds: %s\n", why.c_str());
  std::exit(1);
}

// An empty target folder with its regression files kept.
fs::path target_dir(const std::string& target) {
  const fs::path dir = corpus_root / target;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("seed-", 0) == 0) fs::remove(e.path());
  return dir;
}

void write(const fs::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::ofstream out(dir / ("seed-" + name), std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write " + (dir / name).string());
}

void write(const fs::path& dir, const std::string& name, const std::string& text) {
  write(dir, name, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Copies SOURCE_ROOT/<folder>/*.<extension>, named seed-<stem>-<file>.
void copy_files(const fs::path& dir, const std::string& folder, const std::string& stem, const std::string& extension) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(source_root / folder))
    if (e.is_regular_file() && e.path().extension() == extension) files.push_back(e.path());
  if (files.empty()) fail("no " + extension + " files in " + folder);
  for (const fs::path& f : files) write(dir, stem + "-" + f.filename().string(), read(f));
}

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ---- wire -------------------------------------------------------------------

// Index of every wire type by name: the selector byte of its seeds.
template <class T>
std::pair<uint8_t, const char*> wire_index() {
  size_t index = 0, found = fuzz::kWireTypeCount;
  const char* name = nullptr;
  fuzz::for_each_wire_type([&](auto type) {
    if (std::is_same_v<typename decltype(type)::type, T>) found = index, name = type.name;
    ++index;
  });
  if (found == fuzz::kWireTypeCount) fail("a fixture type is missing from fuzz/wire_types.hpp");
  return {static_cast<uint8_t>(found), name};
}

template <class T>
void wire_seeds(const fs::path& dir, const T& populated) {
  const auto [index, name] = wire_index<T>();
  // The populated value read misaligned, the default one aligned (bit 7).
  write(dir, std::string(name) + "-filled", concat({{index}, codec::encode(populated)}));
  write(dir, std::string(name) + "-default", concat({{static_cast<uint8_t>(index | 0x80)}, codec::encode(T{})}));
}

void wire(const fs::path& dir) {
  size_t types = 0;
  const auto each = [&](auto named) {
    using T = typename decltype(named)::type;
    wire_seeds<T>(dir, test::filled<T>());
    ++types;
  };
  test::for_each_codec_type(each);
  test::for_each_node_type(each);
  // The statistics `kvrt stats` reads have no fixture of their own.
  wire_seeds(dir, NodeStatsReceipt{{test::filled<OwnerStats>(1), test::filled<OwnerStats>(2)}});
  ++types;
  if (types != fuzz::kWireTypeCount) fail("fuzz/wire_types.hpp lists a type with no fixture here");
}

// ---- channel_frame ----------------------------------------------------------

std::vector<uint8_t> frame(RouteId route, uint64_t sequence, const std::vector<uint8_t>& payload) {
  const ChannelHeaderBytes h =
      write_channel_header(ChannelFrameHeader{static_cast<uint32_t>(payload.size()), route, sequence});
  return concat({std::vector<uint8_t>(h.begin(), h.end()), payload});
}

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

void channel_frame(const fs::path& dir) {
  const auto ticket = bytes_of("0123456789abcdef0123456789abcdef");
  const auto batch = codec::encode(test::filled<AllocatorBatch>());
  const auto prefix = codec::encode(test::filled<PrefixBatch>());
  const RouteId allocator = AllocatorRoute::id;
  // First byte: the recv piece size minus one.
  write(dir, "attach", concat({{255}, frame(kAttachRoute, 1, ticket)}));
  write(dir, "attach-then-calls",
        concat({{255}, frame(kAttachRoute, 1, ticket), frame(allocator, 2, batch), frame(kPingRoute, 3, {})}));
  write(dir, "pipelined-bytewise",
        concat({{0},
                frame(kAttachRoute, 1, ticket),
                frame(kPingRoute, 2, {1, 2, 3}),
                frame(kPingRoute, 3, {}),
                frame(PrefixRoute::id, 4, prefix)}));
  write(dir, "pieces-of-7", concat({{6}, frame(kPingRoute, 9, bytes_of("ping")), frame(kPingRoute, 10, {})}));
  auto flags = frame(kPingRoute, 1, {});
  flags[6] = 1;  // reserved flags
  write(dir, "reserved-flags", concat({{255}, frame(kPingRoute, 0, {}), flags}));
  auto unknown = frame(kPingRoute, 1, {});
  unknown[4] = 0xee;  // a route nobody declared
  write(dir, "unknown-route", concat({{255}, unknown}));
  auto oversized = frame(kPingRoute, 1, {});
  const uint32_t too_large = kChannelMaxPayloadBytes + 1;
  std::memcpy(oversized.data(), &too_large, 4);  // little endian, as the header
  write(dir, "oversized", concat({{255}, oversized}));
  auto partial = frame(allocator, 5, batch);
  partial.resize(partial.size() / 2);  // the stream ends mid-frame
  write(dir, "partial", concat({{31}, frame(kPingRoute, 4, {}), partial}));
}

// ---- page_pool --------------------------------------------------------------

// Control data as recvmsg writes it for `fds` descriptors in one SCM_RIGHTS message.
std::vector<uint8_t> rights(const std::vector<int>& fds) {
  std::vector<uint8_t> control(CMSG_SPACE(fds.size() * sizeof(int)), 0);
  cmsghdr c{};
  c.cmsg_level = SOL_SOCKET;
  c.cmsg_type = SCM_RIGHTS;
  c.cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(control.data(), &c, sizeof c);
  std::memcpy(control.data() + CMSG_LEN(0), fds.data(), fds.size() * sizeof(int));
  return control;
}

std::vector<uint8_t> pool_message(uint8_t flags, const std::vector<uint8_t>& control, const PagePoolOffer& offer) {
  const std::vector<std::byte> m = encode_page_pool_message(offer);
  std::vector<uint8_t> out{flags, static_cast<uint8_t>(control.size())};
  out.insert(out.end(), control.begin(), control.end());
  for (std::byte b : m) out.push_back(static_cast<uint8_t>(b));
  return out;
}

void page_pool(const fs::path& dir) {
  // The identity fuzz/targets/page_pool.cpp expects when flag bit 1 is clear.
  const PagePoolIdentity pool{4096, 64, PoolGeneration{3}};
  const PagePoolOffer empty{pool, 4, {}};
  const PagePoolOffer mapped{pool, 8, {ViewPage{0, 5}, ViewPage{3, 63}, ViewPage{7, 0}}};
  const PagePoolOffer outside{pool, 2, {ViewPage{2, 1}}};                // a page beyond the view
  const PagePoolOffer twice{pool, 4, {ViewPage{1, 1}, ViewPage{1, 2}}};  // one page mapped twice
  const PagePoolOffer foreign{PagePoolIdentity{8192, 16, PoolGeneration{9}}, 4, {ViewPage{0, 15}}};
  write(dir, "one-fd-empty", pool_message(0, rights({7}), empty));
  write(dir, "one-fd-mapped", pool_message(0, rights({7}), mapped));
  write(dir, "no-control", pool_message(0, {}, mapped));
  write(dir, "two-fds", pool_message(0, rights({7, 8}), mapped));
  write(dir, "cut", pool_message(1, rights({7}), mapped));
  write(dir, "page-outside-view", pool_message(0, rights({7}), outside));
  write(dir, "page-twice", pool_message(0, rights({7}), twice));
  write(dir, "foreign-pool", pool_message(0, rights({7}), foreign));
  write(dir, "foreign-pool-expected", pool_message(2, rights({7}), foreign));
  auto magic = pool_message(0, rights({7}), empty);
  magic[2 + rights({7}).size()] ^= 0xff;
  write(dir, "bad-magic", magic);
}

// ---- node_descriptor --------------------------------------------------------

void node_descriptor(const fs::path& dir) {
  const SessionReceipt session = test::filled<SessionReceipt>();
  NodeDescriptor d;
  d.host = "127.0.0.1";
  d.port = 40123;
  d.node_pid = 4242;
  d.instance = "fuzz-1";
  d.layout_path = "/opt/kvrt/config/layouts/small-two-group.toml";
  d.layout_sha256 = session.layout_sha256;
  d.block_tokens = 16;
  d.token_dir = "/tmp/kvrt-node.json.tokens";
  write(dir, "no-pools.json", node_descriptor_json(d));
  d.pools = session.pools;  // two shared-memory pools and a GPU pool
  write(dir, "pools.json", node_descriptor_json(d));
  d.mapper = MapperAttachment{2, 4, 256, 4, 64, 2, 4096, 128, 3, "/tmp/kvrt-node.json.tokens/mapper.sock"};
  write(dir, "pools-mapper.json", node_descriptor_json(d));
}

// ---- trace_merge ------------------------------------------------------------

// A trace written by ChromeTraceRecorder, with the process id replaced by a
// fixed one so that the corpus does not change with every run.
std::string recorded_trace(const std::string& process, int slices) {
  const fs::path tmp = fs::temp_directory_path() / ("kvrt-fuzz-seed-" + std::to_string(::getpid()) + ".json");
  {
    ChromeTraceRecorder recorder(tmp.string(), process);
    for (int i = 0; i < slices; ++i) {
      const TraceContext trace{uint64_t(1000 + i), uint64_t(2000 + i), uint64_t(i)};
      recorder.slice(i % 2 == 0 ? "allocator" : "worker \"0\"", "allocate", 100 + 10 * i, 105 + 10 * i, trace);
      recorder.flow_start("worker \"0\"", 100 + 10 * i, flow_id(trace));
      recorder.flow_finish("allocator", 104 + 10 * i, flow_id(trace));
    }
    if (!recorder.flush().ok()) fail("cannot write " + tmp.string());
  }
  std::string text = read(tmp);
  fs::remove(tmp);
  const std::string pid = "\"pid\":" + std::to_string(::getpid());
  for (size_t at = text.find(pid); at != std::string::npos; at = text.find(pid, at))
    text.replace(at, pid.size(), "\"pid\":1000");
  return text;
}

void trace_merge(const fs::path& dir) {
  write(dir, "empty.json", recorded_trace("kvrt node", 0));
  write(dir, "node.json", recorded_trace("kvrt node", 2));
  write(dir, "worker.json", recorded_trace("kvrt worker 0 \xce\xbb", 3));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kvrt_fuzz_seeds SOURCE_ROOT CORPUS_DIR\n");
    return 2;
  }
  source_root = argv[1];
  corpus_root = argv[2];
  wire(target_dir("wire"));
  channel_frame(target_dir("channel_frame"));
  page_pool(target_dir("page_pool"));
  node_descriptor(target_dir("node_descriptor"));
  {
    const fs::path dir = target_dir("node_config");
    copy_files(dir, "config", "config", ".toml");  // node.toml, and the others as near misses
    copy_files(dir, "tests/data/node", "data", ".toml");
  }
  {
    const fs::path dir = target_dir("run_config");
    write(dir, "config-run.toml", read(source_root / "config/run.toml"));
    write(dir, "config-model.toml", read(source_root / "config/model.toml"));
    copy_files(dir, "tests/data/run", "data", ".toml");
  }
  copy_files(target_dir("layout"), "config/layouts", "config", ".toml");
  {
    const fs::path dir = target_dir("workload");
    copy_files(dir, "config/workloads", "config", ".toml");
    copy_files(dir, "tests/data/workloads", "data", ".toml");
  }
  write(target_dir("chaos_config"), "config-chaos.toml", read(source_root / "config/chaos.toml"));
  copy_files(target_dir("snapshot"), "config/snapshots", "config", ".toml");
  copy_files(target_dir("ledger_scenario"), "config/ledgers", "config", ".toml");
  write(target_dir("replay_prefix"), "data-prefix_demo.trace.jsonl",
        read(source_root / "tests/data/replay/prefix_demo.trace.jsonl"));
  write(target_dir("replay_radix"), "data-radix_demo.trace.jsonl",
        read(source_root / "tests/data/replay/radix_demo.trace.jsonl"));
  trace_merge(target_dir("trace_merge"));
  return 0;
}
