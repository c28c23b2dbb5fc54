#include "tools/chaos/chaos_node.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <thread>
#include <tuple>
#include <vector>

#include "actors/client.hpp"
#include "tools/chaos/chaos_worker_results.hpp"

namespace kvrt::chaos {

ChaosNode::ChaosNode(const ChaosOptions& options, CampaignRecord& record)
    : o_(options), c_(options.config), record_(record), descriptor_path_(options.out_dir + "/node.json") {}

Status ChaosNode::start() {
  const bool alternate = !c_.alternate_node_config_path.empty() && starts_ % 2 == 1;
  const std::string& config = alternate ? c_.alternate_node_config_path : c_.node_config_path;
  const std::string log = o_.out_dir + "/logs/node-" + std::to_string(starts_++) + ".log";
  Result<pid_t> pid = spawn_child(o_.kvrt_binary, {"node", "--config", config, "--descriptor", descriptor_path_}, log);
  if (!pid.ok()) return pid.error();
  process_ = Child{*pid, log, std::nullopt};
  log_offset_ = 0;  // a new node numbers its sessions from 1 again
  reclaimed_.clear();
  const auto deadline = Clock::now() + std::chrono::milliseconds(c_.settle_timeout_ms) + std::chrono::seconds(30);
  while (true) {
    Result<NodeDescriptor> d = read_node_descriptor(descriptor_path_);
    if (d.ok() && d->node_pid == static_cast<uint32_t>(*pid)) {
      descriptor_ = std::move(*d);
      for (const PoolAttachment& p : descriptor_.pools)
        if (!p.by_descriptor) segments_seen_.insert(p.segment_name);  // an unnamed segment has no name to outlive
      return connect_admin();
    }
    if (process_.poll())
      return make_error(ErrorCode::run_worker_failed,
                        "the node exited with status " + std::to_string(*process_.status) + " before serving:\n" +
                            tail_of(read_log(log)),
                        "node");
    if (Clock::now() > deadline)
      return make_error(ErrorCode::run_stalled, "the node did not serve its descriptor in time", "node");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

ChaosNode::Killed ChaosNode::kill() {
  collect_fired();
  admin_.reset();
  Killed killed{descriptor_, Clock::now()};
  process_.kill_and_reap();
  return killed;
}

void ChaosNode::check_successor(const NodeDescriptor& dead) {
  for (const PoolAttachment& p : dead.pools)
    if (!p.by_descriptor && std::filesystem::exists("/dev/shm/" + p.segment_name))
      record_.violation("the restarted node left the dead node's segment " + p.segment_name);
  for (size_t g = 0; g < descriptor_.pools.size() && g < dead.pools.size(); ++g)
    if (descriptor_.pools[g].generation.value != dead.pools[g].generation.value + 1)
      record_.violation("the restarted node's pool " + std::to_string(g) + " is at generation " +
                        std::to_string(descriptor_.pools[g].generation.value) + ", not one past " +
                        std::to_string(dead.pools[g].generation.value));
}

// The admin session (only when the campaign arms fault points or updates
// namespaces): the node's admin routes refuse worker sessions.
Status ChaosNode::connect_admin() {
  admin_.reset();
  Result<std::optional<ChaosAdminSession>> admin = ChaosAdminSession::connect(c_, descriptor_);
  if (!admin.ok()) return admin.error();
  admin_ = std::move(*admin);
  // Every point some node of the campaign registered is reported, fired or not.
  if (admin_)
    for (const std::string& name : admin_->registered()) record_.report.fault_points_armed.try_emplace(name, 0);
  return Status::success();
}

void ChaosNode::collect_fired() {
  if (!admin_) return;
  Result<std::vector<FaultPointFired>> fired = admin_->fired();
  if (!fired.ok()) {
    record_.violation("the node's fault points could not be read: " + fired.error().describe());
    return;
  }
  for (const FaultPointFired& f : *fired) record_.report.fault_points_fired[f.name] += f.fired;
}

// A weights invalidation or a purge of one of the node's namespaces.
// Refusals that the node's own state explains are counted, not violations
// (ChaosAdminSession::update_namespace).
void ChaosNode::update_namespace(const FaultEvent& e) {
  if (!admin_) return;
  Result<std::optional<ChaosAdminSession::NamespaceUpdate>> u = admin_->update_namespace(e);
  if (!u.ok()) {
    record_.violation(u.error().reason);
    return;
  }
  if (!*u) return;  // the node has no namespace
  ChaosReport& r = record_.report;
  if ((*u)->refused) {
    ++r.namespace_updates_refused;
  } else if ((*u)->purge) {
    ++r.namespace_purges;
    if ((*u)->resumed) ++r.namespace_purges_resumed;
  } else {
    ++r.namespace_invalidations;
  }
}

void ChaosNode::arm_fault_point(const FaultEvent& e) {
  if (!admin_) return;
  Result<std::optional<std::string>> armed = admin_->arm(e);
  if (!armed.ok()) {
    record_.violation("arming fault point " + admin_->registered()[e.slot % admin_->registered().size()] +
                      " failed: " + armed.error().describe());
    return;
  }
  if (*armed) ++record_.report.fault_points_armed[**armed];
}

// One validate() pass of every owner; each owner that failed it is a violation.
void ChaosNode::tally_validation(const NodeStats& stats, const std::string& when) {
  ++record_.report.validations;
  for (const OwnerStats& owner : stats.owners)
    if (!owner.validate_ok) record_.violation(owner.owner + ".validate()" + when + ": " + owner.validate_error);
}

void ChaosNode::validate() {
  Result<NodeStats> stats = read_node_stats(descriptor_, /*validate=*/true, std::chrono::seconds(10));
  if (!stats.ok()) {
    record_.violation("the node's statistics could not be read: " + stats.error().describe());
    return;
  }
  tally_validation(*stats, "");
  sample_timeline(*stats);
}

// The node's resident set [bytes], from /proc/<pid>/statm (field 2, pages).
int64_t ChaosNode::rss_bytes() const {
  std::ifstream statm("/proc/" + std::to_string(process_.pid) + "/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * ::sysconf(_SC_PAGESIZE);
}

void ChaosNode::sample_timeline(const NodeStats& stats) {
  const double t = record_.elapsed_s();
  const int64_t ops = stats.value("allocator", "operations").value_or(0);
  const uint64_t faults = record_.faults_injected();
  TimelinePoint p{t, 0, faults - faults_at_last_sample_, rss_bytes()};
  // A restarted node counts from 0 again.
  const int64_t done = ops >= last_ops_ ? ops - last_ops_ : ops;
  if (t > last_sample_s_) p.allocator_ops_per_s = static_cast<double>(done) / (t - last_sample_s_);
  record_.report.timeline.push_back(p);
  last_ops_ = ops;
  last_sample_s_ = t;
  faults_at_last_sample_ = faults;
}

// First and last resident set, and the slope after warm-up (least squares).
void ChaosNode::summarize_rss() {
  ChaosReport& r = record_.report;
  std::vector<std::pair<double, double>> kept;
  for (const TimelinePoint& p : r.timeline)
    if (p.node_rss_bytes > 0 && p.t_s >= 0.2 * c_.duration_s)
      kept.emplace_back(p.t_s / 60.0, static_cast<double>(p.node_rss_bytes) / (1 << 20));
  if (!r.timeline.empty()) {
    r.node_rss_first_mib = static_cast<double>(r.timeline.front().node_rss_bytes) / (1 << 20);
    r.node_rss_last_mib = static_cast<double>(r.timeline.back().node_rss_bytes) / (1 << 20);
  }
  if (kept.size() < 2) return;
  double mx = 0, my = 0;
  for (const auto& [x, y] : kept) mx += x, my += y;
  mx /= kept.size();
  my /= kept.size();
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : kept) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
  r.node_rss_slope_mib_per_min = sxx > 0 ? sxy / sxx : 0;
}

std::optional<Clock::time_point> ChaosNode::reclaimed_at(uint64_t session) {
  auto seen = reclaimed_.find(session);
  if (seen == reclaimed_.end() && Clock::now() >= next_log_scan_) {
    scan_log();
    next_log_scan_ = Clock::now() + std::chrono::milliseconds(10);
    seen = reclaimed_.find(session);
  }
  if (seen == reclaimed_.end()) return std::nullopt;
  return seen->second;
}

// Reads what the node logged since the last scan and notes when each
// "session=N worker lost" line was first seen (the gateway's reclaim of a
// killed or hung worker, actors/gateway_actor.cpp).
void ChaosNode::scan_log() {
  std::ifstream in(process_.log, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(log_offset_));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t complete = text.rfind('\n');
  if (complete == std::string::npos) return;
  log_offset_ += complete + 1;
  const auto now = Clock::now();
  std::istringstream lines(text.substr(0, complete + 1));
  for (std::string line; std::getline(lines, line);) {
    const size_t lost = line.find(" worker lost");
    const size_t at = line.find("session=");
    if (lost == std::string::npos || at == std::string::npos || at > lost) continue;
    reclaimed_.emplace(std::strtoull(line.c_str() + at + 8, nullptr, 10), now);
  }
}

void ChaosNode::shut_down() {
  collect_fired();
  admin_.reset();  // a session too: the node must end with none
  check_quiescent();
  const NodeDescriptor last = descriptor_;
  ::kill(process_.pid, SIGTERM);
  const auto stop_deadline = Clock::now() + std::chrono::milliseconds(c_.settle_timeout_ms);
  while (!process_.poll()) {
    if (Clock::now() > stop_deadline) {
      record_.violation("the node did not shut down on SIGTERM");
      process_.kill_and_reap();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (process_.status != 0)
    record_.violation("the node exited with status " + std::to_string(*process_.status) + " on SIGTERM");
  if (std::filesystem::exists(descriptor_path_)) record_.violation("the node left its descriptor behind");
  if (std::filesystem::exists(last.token_dir)) record_.violation("the node left its token directory (sockets) behind");
  for (const std::string& name : segments_seen_)
    if (std::filesystem::exists("/dev/shm/" + name)) record_.violation("segment " + name + " outlived the campaign");
}

void ChaosNode::check_quiescent() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(c_.settle_timeout_ms);
  Result<NodeStats> stats = read_node_stats(descriptor_, /*validate=*/true, std::chrono::seconds(10));
  while (stats.ok() && stats->value("node", "workers_connected") != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stats = read_node_stats(descriptor_, /*validate=*/true, std::chrono::seconds(10));
  }
  if (!stats.ok()) {
    record_.violation("the node's final statistics could not be read: " + stats.error().describe());
    return;
  }
  tally_validation(*stats, " at the end");
  // What stays held with no session: only the radix index's cache, one
  // node lease per cached block and one live block per cached page in
  // each pool (the hash chain holds nothing: its blocks are free, tagged).
  const std::optional<int64_t> radix = stats->value("prefix_index", "radix");
  const int64_t cached_pages = radix ? stats->value("prefix_index", "cached_pages").value_or(-1) : 0;
  const int64_t cached_blocks = radix ? stats->value("prefix_index", "cached_blocks").value_or(-1) : 0;
  const std::tuple<const char*, const char*, int64_t> expected[] = {{"node", "workers_connected", 0},
                                                                    {"allocator", "leaked_blocks", 0},
                                                                    {"allocator", "refcount_delta", 0},
                                                                    {"allocator", "live_requests", 0},
                                                                    {"allocator", "live_leases", cached_blocks},
                                                                    {"allocator", "node_leases", cached_blocks},
                                                                    {"allocator", "pool0_live_blocks", cached_pages},
                                                                    {"node", "reuse_open_attempts", 0}};
  for (const auto& [owner, name, want] : expected) {
    const std::optional<int64_t> v = stats->value(owner, name);
    if (v != want)
      record_.violation(std::string(owner) + "." + name + " is " + (v ? std::to_string(*v) : std::string("missing")) +
                        " once every worker is gone (expected " + std::to_string(want) + ")");
  }
  if (radix && stats->value("prefix_index", "path_leases") != 0)
    record_.violation("the radix index still holds path leases once every worker is gone");
}

}  // namespace kvrt::chaos
