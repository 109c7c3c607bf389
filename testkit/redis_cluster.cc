#include "testkit/redis_cluster.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "testkit/child_process.h"
#include "testkit/raw_redis.h"

namespace pacset {
namespace store_test {
namespace {

// Whether CLUSTER NODES text `view` has node `id` as a replica of some
// master ("ID ADDR FLAGS MASTER-ID ..."), not flagged failed.
bool ListsLiveReplica(const std::string& view, const std::string& id) {
  std::istringstream lines(view);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string node, addr, flags, master;
    if (!(f >> node >> addr >> flags >> master) || node != id) continue;
    return master != "-" && flags.find("fail") == std::string::npos &&
           flags.find("noaddr") == std::string::npos;
  }
  return false;
}

}  // namespace

std::string RedisCluster::Start(int masters, int replicas) {
  const int total = masters * (1 + replicas);
  nodes_.clear();
  for (int i = 0; i < total; ++i) {
    nodes_.push_back(std::make_unique<RedisServer>());
    const std::string err = nodes_.back()->Start(
        "", {"--cluster-enabled", "yes", "--cluster-port", "{FREE_PORT}", "--cluster-config-file",
             "nodes.conf", "--cluster-node-timeout", "1000", "--appendonly", "no",
             // Replicas sync at once (the default waits 5 s for more replicas).
             "--repl-diskless-sync-delay", "0"});
    if (!err.empty()) return "node " + std::to_string(i) + ": " + err;
  }
  std::vector<std::string> args = {"/usr/bin/redis-cli", "--cluster", "create"};
  for (const auto& n : nodes_) args.push_back("127.0.0.1:" + std::to_string(n->port()));
  args.insert(args.end(), {"--cluster-replicas", std::to_string(replicas), "--cluster-yes"});
  ChildProcess cli;
  if (!cli.Spawn(args, /*with_stderr=*/true)) return "cannot run redis-cli";
  const std::string out = cli.ReadAll(60000);
  if (out.find("[OK] All 16384 slots covered") == std::string::npos)
    return "redis-cli --cluster create failed: " + out;
  return WaitHealthy(20000) ? "" : "the cluster did not become healthy: " + out;
}

std::string RedisCluster::uri(size_t seeds) const {
  std::string u = "redis-cluster://";
  for (size_t i = 0; i < std::min(seeds, nodes_.size()); ++i)
    u += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
  return u;
}

std::vector<int> RedisCluster::MasterPorts() {
  std::vector<int> out;
  for (const auto& n : nodes_) {
    if (n->pid() <= 0) continue;
    RawRedis r(n->port());
    if (r.Command({"ROLE"}).rfind("master", 0) == 0) out.push_back(n->port());
  }
  return out;
}

int RedisCluster::MasterPortOf(const std::string& key) {
  for (int port : MasterPorts()) {
    RawRedis r(port);
    if (r.Command({"EXISTS", key}).rfind("MOVED", 0) != 0) return port;
  }
  return -1;
}

bool RedisCluster::WaitHealthy(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = true;
    std::vector<std::string> replica_ids;
    for (const auto& n : nodes_) {
      if (n->pid() <= 0) continue;
      RawRedis r(n->port());
      ok = ok && ReplyLine(r.Command({"CLUSTER", "INFO"}), "cluster_state:") == "cluster_state:ok";
      // ROLE of a replica: slave, HOST, PORT, connect|connecting|sync|connected, OFFSET.
      const std::string role = r.Command({"ROLE"});
      if (role.rfind("slave", 0) == 0) {
        ok = ok && role.find("\nconnected\n") != std::string::npos;
        replica_ids.push_back(r.Command({"CLUSTER", "MYID"}));
      }
    }
    for (const auto& n : nodes_) {
      if (!ok || n->pid() <= 0) continue;
      const std::string view = RawRedis(n->port()).Command({"CLUSTER", "NODES"});
      for (const std::string& id : replica_ids) ok = ok && ListsLiveReplica(view, id);
    }
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace store_test
}  // namespace pacset
