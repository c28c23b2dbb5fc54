// Cross-process page pool (the CPU realisation of 0x06B): the node maps pages and writes rows through its contiguous
// view; a worker process, given only the pool's memfd (SCM_RIGHTS) and the receipts' page table, reads the same rows
// through its own contiguous view. Plus the typed rejections of a foreign, stale or malformed pool message.
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/mapper/memfd_backing.hpp"
#include "services/mapper/page_pool_channel.hpp"
#include "tests/mapper/mapper_fixture.hpp"
#include "tests/mapper/mapper_peer_protocol.hpp"

extern char** environ;

using namespace kvrt;
using namespace kvrt::test;

namespace {

constexpr uint32_t kPagesPerSlot = 4;  // [pages per tensor per slot]

// L=1, B=2, H_kv=2, d_h=64, b=2: 256 B rows; G = one OS page; T_max covers
// four pages; N_handle = 2L * B * 4 pages, so every slot can be fully mapped.
MapperConfig cross_process_config() {
  MapperConfig c;
  c.local_layers = 1;
  c.request_slots = 2;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.element_bytes = 2;
  c.page_group_bytes = MemfdBacking::os_page_bytes();
  c.max_tokens = static_cast<uint32_t>(kPagesPerSlot * c.page_group_bytes / 256);
  c.handle_count = 2 * c.local_layers * c.request_slots * kPagesPerSlot;
  return c;
}

struct SocketPair {
  int node = -1, worker = -1;
  SocketPair() {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0);
    node = fds[0];
    worker = fds[1];
  }
  ~SocketPair() {
    if (node >= 0) close(node);
    if (worker >= 0) close(worker);
  }
};

// A sealed memfd of `bytes`, standing in for a pool the receiver must reject.
int sealed_memfd(uint64_t bytes, bool seal) {
  const int fd = memfd_create("kvrt-foreign-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, static_cast<off_t>(bytes)) == 0);
  if (seal) REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  return fd;
}

// Sends raw bytes with an optional fd, bypassing send_page_pool's checks.
void send_raw(int socket_fd, const std::vector<uint8_t>& bytes, int fd) {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  REQUIRE(sendmsg(socket_fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

std::string drain(int fd) {
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

// Number of fds this process holds, to show a rejected message leaks none.
size_t open_fd_count() {
  size_t n = 0;
  for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

}  // namespace

TEST_CASE("cross-process: a worker reads the node's rows through its own contiguous view", "[mapper]") {
  const MapperConfig config = cross_process_config();
  auto backing = std::make_unique<MemfdBacking>();
  MemfdBacking* memfd = backing.get();
  auto made = VmmMapper::init(config, std::move(backing));
  REQUIRE(made.ok());
  VmmMapper& m = *made.value();
  const MapperGeometry& g = m.geometry();
  const uint32_t tpp = g.tokens_per_page();

  // X and Y grow one page per step in turn, so X's bundles interleave with
  // Y's and X's V0 pages land on non-adjacent handles.
  auto x = m.alloc_reqid(req('X'), gen1(), config.max_tokens).value();
  auto y = m.alloc_reqid(req('Y'), gen1(), config.max_tokens).value();
  std::vector<MappedFrontierReceipt> receipts;
  for (uint32_t pages = 1; pages <= kPagesPerSlot; ++pages) {
    auto stepped = m.step({{req('X'), pages * tpp}, {req('Y'), pages * tpp}}, MappingPath::synchronous);
    REQUIRE(stepped.ok());
    REQUIRE(stepped->feasibility == MappingFeasibility::ready);
    for (auto& r : stepped->receipts) receipts.push_back(r);
  }
  REQUIRE(m.validate().ok());
  std::vector<uint64_t> x_value_handles;
  for (uint32_t q = 0; q < kPagesPerSlot; ++q) {
    auto loc = m.translate(req('X'), x.generation, 0, KvTensorKind::value, q * tpp, 0, 0);
    REQUIRE(loc.ok());
    x_value_handles.push_back(loc->handle.value);
  }
  for (size_t i = 1; i < x_value_handles.size(); ++i) CHECK(x_value_handles[i] > x_value_handles[i - 1] + 1);

  // The node writes X's V0 rows through its contiguous view: one memcpy over
  // four pages on non-adjacent handles.
  const uint64_t seed = 0x6B7672746D6170ull;
  const uint64_t offset = g.page_offset(g.tensor_index(0, KvTensorKind::value), x.slot.value, 0);
  const uint64_t bytes = uint64_t{config.max_tokens} * g.row_bytes();
  std::vector<uint8_t> rows(bytes);
  for (uint64_t i = 0; i < bytes; ++i) rows[i] = seeded_row_byte(seed, i);
  std::memcpy(m.reservation_base() + offset, rows.data(), bytes);
  REQUIRE(m.append_rows(req('X'), x.generation, config.max_tokens).ok());

  // The page table the worker gets is the receipts' mappings, nothing else.
  const auto pages = view_pages_from_receipts(g, receipts);
  CHECK(pages.size() == config.handle_count);
  const PagePoolIdentity identity{config.page_group_bytes, config.handle_count, PoolGeneration{3}};
  const PagePoolOffer offer{identity, static_cast<uint32_t>(g.virtual_reserved_bytes() / config.page_group_bytes),
                            pages};

  SocketPair sockets;
  // The worker's end arrives as fd 3; dup2 onto itself would keep CLOEXEC.
  if (sockets.worker == kMapperPeerSocketFd) {
    const int moved = fcntl(sockets.worker, F_DUPFD_CLOEXEC, kMapperPeerSocketFd + 1);
    REQUIRE(moved >= 0);
    close(sockets.worker);
    sockets.worker = moved;
  }
  int out[2], err[2];
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, sockets.worker, kMapperPeerSocketFd);
  std::vector<std::string> args{KVRT_MAPPER_PEER,
                                std::to_string(identity.page_group_bytes),
                                std::to_string(identity.handle_count),
                                std::to_string(identity.generation.value),
                                std::to_string(offset),
                                std::to_string(bytes),
                                std::to_string(seed)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, KVRT_MAPPER_PEER, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  close(sockets.worker);
  sockets.worker = -1;
  REQUIRE(spawned == 0);
  const Status sent = send_page_pool(sockets.node, memfd->pool_fd(), offer);
  const std::string output = drain(out[0]);
  const std::string errors = drain(err[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(sent.ok());
  INFO("worker stderr: " << errors);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The worker's digest of what it read equals the node's digest of what it wrote.
  CHECK(output == sha256(std::span<const uint8_t>(rows)).hex() + "\n");
  // The worker's complement is visible through the node's view: same pages, both ways.
  const auto* node_view = reinterpret_cast<const uint8_t*>(m.reservation_base() + offset);
  uint64_t complemented = 0;
  for (uint64_t i = 0; i < bytes; ++i) complemented += node_view[i] == static_cast<uint8_t>(~rows[i]);
  CHECK(complemented == bytes);
  REQUIRE(m.free_reqid(req('X'), x.generation, ReleaseMode::unmap_now).ok());
  REQUIRE(m.free_reqid(req('Y'), y.generation, ReleaseMode::unmap_now).ok());
  REQUIRE(m.validate().ok());
  REQUIRE(m.shutdown().ok());
}

TEST_CASE("cross-process: foreign, stale and malformed pool messages are typed rejections", "[mapper]") {
  const uint64_t page = MemfdBacking::os_page_bytes();
  const PagePoolIdentity expected{page, 4, PoolGeneration{8}};
  const PagePoolOffer offer{expected, 4, {{0, 2}, {1, 0}}};
  const size_t fds_before = open_fd_count();
  SocketPair s;
  const int good = sealed_memfd(4 * page, true);

  SECTION("stale pool generation") {
    PagePoolOffer stale = offer;
    stale.identity.generation = PoolGeneration{7};
    REQUIRE(send_page_pool(s.node, good, stale).ok());
    auto got = receive_page_pool(s.worker, expected);
    CHECK(code_of(got) == ErrorCode::stale_generation);
    CHECK(got.error().field == "pool_generation");
  }
  SECTION("foreign geometry") {
    PagePoolOffer foreign = offer;
    foreign.identity.page_group_bytes = 2 * page;  // another node's G over the same pool size
    foreign.identity.handle_count = 4;
    REQUIRE(send_page_pool(s.node, good, foreign).ok());
    auto got = receive_page_pool(s.worker, expected);
    CHECK(code_of(got) == ErrorCode::incompatible);
    CHECK(got.error().field == "page_group_bytes");
  }
  SECTION("fd smaller than the header says") {
    const int small = sealed_memfd(3 * page, true);
    REQUIRE(send_page_pool(s.node, small, offer).ok());
    close(small);
    auto got = receive_page_pool(s.worker, expected);
    CHECK(code_of(got) == ErrorCode::pool_size_mismatch);
    CHECK(got.error().field == "pool_fd");
  }
  SECTION("unsealed pool") {
    const int loose = sealed_memfd(4 * page, false);
    REQUIRE(send_page_pool(s.node, loose, offer).ok());
    close(loose);
    auto got = receive_page_pool(s.worker, expected);
    CHECK(code_of(got) == ErrorCode::pool_size_mismatch);
    CHECK(got.error().field == "seals");
  }
  SECTION("no fd") {
    send_raw(s.node, std::vector<uint8_t>(40, 0), -1);
    CHECK(code_of(receive_page_pool(s.worker, expected)) == ErrorCode::pool_fd_missing);
  }
  SECTION("wrong magic") {
    send_raw(s.node, std::vector<uint8_t>(40, 0xAB), good);
    CHECK(code_of(receive_page_pool(s.worker, expected)) == ErrorCode::pool_message_bad_magic);
  }
  SECTION("truncated header") {
    send_raw(s.node, std::vector<uint8_t>(12, 0), good);
    CHECK(code_of(receive_page_pool(s.worker, expected)) == ErrorCode::pool_message_truncated);
  }
  SECTION("page table outside the pool is refused before sending") {
    PagePoolOffer bad = offer;
    bad.pages.push_back({2, 4});
    auto sent = send_page_pool(s.node, good, bad);
    CHECK(code_of(sent) == ErrorCode::coordinate_out_of_range);
    CHECK(sent.error().field == "handle");
  }
  SECTION("a stream socket has no message boundaries") {
    int stream[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stream) == 0);
    auto sent = send_page_pool(stream[0], good, offer);
    CHECK(code_of(sent) == ErrorCode::invalid_argument);
    CHECK(sent.error().field == "socket_type");
    close(stream[0]);
    close(stream[1]);
  }
  SECTION("an accepted pool maps pages at their handles") {
    // Handle h holds byte value h + 1 at its start; the view puts handle 2 at page 0.
    for (uint64_t h = 0; h < 4; ++h) {
      const uint8_t mark = static_cast<uint8_t>(h + 1);
      REQUIRE(pwrite(good, &mark, 1, static_cast<off_t>(h * page)) == 1);
    }
    REQUIRE(fcntl(good, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
    REQUIRE(send_page_pool(s.node, good, offer).ok());
    auto got = receive_page_pool(s.worker, expected);
    REQUIRE(got.ok());
    CHECK(got->offer().pages == offer.pages);
    auto view = PoolView::map(got.value());
    REQUIRE(view.ok());
    CHECK(view->bytes() == 4 * page);
    CHECK(static_cast<uint8_t>(view->base()[0]) == 3);
    CHECK(static_cast<uint8_t>(view->base()[page]) == 1);
    // A page table naming a handle past N_handle maps nothing.
    auto refused = PoolView::map(got->fd(), expected, 4, {{0, 4}});
    CHECK(code_of(refused) == ErrorCode::coordinate_out_of_range);
  }
  close(good);
  // Every rejected message closed the fd it carried.
  CHECK(open_fd_count() == fds_before + 2);  // only the socket pair remains
}
