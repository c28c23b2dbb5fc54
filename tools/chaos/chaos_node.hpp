#pragma once
// The node of a campaign: one `kvrt node` child at a time on the campaign's
// descriptor path, its admin session (fault points, namespace updates), and
// what the campaign reads of it: validate(), the timeline samples, the
// sessions its log says it reclaimed, and at the end its quiescence and a
// clean shutdown that leaves nothing behind.
#include <map>
#include <optional>
#include <set>
#include <string>

#include "services/session/node_descriptor.hpp"
#include "tools/chaos/chaos_admin_session.hpp"
#include "tools/chaos/chaos_child.hpp"
#include "tools/chaos/chaos_record.hpp"

namespace kvrt::chaos {

class ChaosNode {
 public:
  ChaosNode(const ChaosOptions& options, CampaignRecord& record);

  const std::string& descriptor_path() const { return descriptor_path_; }
  const NodeDescriptor& descriptor() const { return descriptor_; }

  // A node on the descriptor path, serving once the descriptor names it (a
  // killed predecessor's descriptor stays until the new node replaces it),
  // with its admin session connected when the campaign needs one.
  Status start();
  // SIGKILL, after the fault points that fired on it are added to the
  // report (its counters die with it).
  struct Killed {
    NodeDescriptor descriptor;  // the dead node's
    Clock::time_point at;       // the moment of the SIGKILL
  };
  Killed kill();
  // The node that replaced `dead`: it removed the dead node's segments and
  // serves every pool at the next generation.
  void check_successor(const NodeDescriptor& dead);

  void arm_fault_point(const FaultEvent& e);
  void update_namespace(const FaultEvent& e);

  // validate() of every owner, and one timeline sample.
  void validate();
  // The node's resident set over the timeline: first, last, slope after warm-up.
  void summarize_rss();
  // When the node's log first said it reclaimed `session` ("session=N worker
  // lost"); the log is read at most every 10 ms.
  std::optional<Clock::time_point> reclaimed_at(uint64_t session);

  // The end: no session left, nothing held but the radix cache, every
  // owner valid; then SIGTERM, a clean exit, and no descriptor, socket or
  // segment left behind. The campaign's other sessions must be gone first.
  void shut_down();

 private:
  Status connect_admin();
  void collect_fired();
  void scan_log();
  void tally_validation(const NodeStats& stats, const std::string& when);
  void sample_timeline(const NodeStats& stats);
  int64_t rss_bytes() const;
  void check_quiescent();

  const ChaosOptions& o_;
  const ChaosConfig& c_;
  CampaignRecord& record_;
  std::string descriptor_path_;
  NodeDescriptor descriptor_;
  Child process_;
  uint32_t starts_ = 0;
  std::set<std::string> segments_seen_;
  std::optional<ChaosAdminSession> admin_;  // none: the campaign neither arms points nor updates namespaces
  // The current node's log, scanned for reclaimed sessions.
  uint64_t log_offset_ = 0;
  std::map<uint64_t, Clock::time_point> reclaimed_;
  Clock::time_point next_log_scan_{};
  // The last timeline sample.
  int64_t last_ops_ = 0;
  double last_sample_s_ = 0;
  uint64_t faults_at_last_sample_ = 0;
};

}  // namespace kvrt::chaos
