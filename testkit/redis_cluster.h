// A real Redis Cluster for a test: redis-servers on free loopback ports,
// joined by redis-cli.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "testkit/redis_server.h"

namespace pacset {
namespace store_test {

// A real Redis Cluster on 127.0.0.1: `masters` masters with `replicas` replicas
// each, every node a redis-server on free ports (its cluster bus on another
// free port), made with `redis-cli --cluster create`. Killed when this goes.
class RedisCluster {
 public:
  // Empty on success, else why it failed.
  std::string Start(int masters = 3, int replicas = 1);

  // redis-cluster://127.0.0.1:P,... with the first `seeds` nodes as seeds.
  std::string uri(size_t seeds = 3) const;
  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_[i]; }

  // Ports of the live nodes that are masters now.
  std::vector<int> MasterPorts();
  // The port of the live master that serves `key` ("MOVED" from the others).
  int MasterPortOf(const std::string& key);
  // Whether, within `timeout_ms`, every live node reports cluster_state:ok,
  // every live replica is in sync with its master, and every live node's
  // CLUSTER NODES lists every live replica as a live replica (what a client's
  // slot map learns from any node: before gossip reaches a node, it may still
  // list a new replica as a master of no slots).
  bool WaitHealthy(int timeout_ms);

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace store_test
}  // namespace pacset
