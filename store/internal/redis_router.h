// Where the commands of a redis store go: one server (redis://), or the
// masters of a Redis Cluster (redis-cluster://HOST:PORT[,HOST:PORT...]).
//
// Cluster routing (the Redis Cluster specification): a key belongs to hash
// slot CRC16(key) mod 16384, where CRC16 is CRC-16/XMODEM and only the part
// between the first '{' and the next '}' is hashed when that part is not
// empty (a "hash tag", so related keys share a slot). The router keeps a map
// slot -> master, loaded with CLUSTER NODES from any node it knows (the
// seeds of the URI first), and follows the cluster's redirections:
//   MOVED SLOT HOST:PORT  the slot has a new master: the map is reloaded (and
//                         the slot set to HOST:PORT), the command resent there;
//   ASK SLOT HOST:PORT    the slot is being migrated and this key has moved:
//                         the one command is resent to HOST:PORT after ASKING;
//   TRYAGAIN              retried after a pause of a few milliseconds.
// A connection that fails reloads the map (a failover promotes a replica on
// another address); the command is resent once if that changed its master
// or the connection was an idle one (a restart kills them all). A slot whose
// master is down and not yet replaced is kUnavailable; callers retry (the
// filesystem does, until its store_timeout).
//
// Keys of the store: its catalog (Lua scripts that must be atomic) lives in
// the hash slot of one tag, CatalogPrefix() = "pacset:{catalog}:" on a
// cluster, so every script runs on one master; blocks carry no tag and spread
// over all slots, i.e. over all masters. On one server the prefix is "pacset:".
//
// Replication: Run(..., replicate=true) ends each master's share of a
// pipeline with WAIT 1 (when the slot map lists a replica for it) and fails
// those commands if no replica acknowledged them within the command timeout,
// so a block that a writer was told is stored survives the failover of its
// master. ReplicateCatalog does the same, best effort, after catalog writes.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/internal/redis_conn.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

constexpr int kRedisClusterSlots = 16384;

// CRC-16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster uses.
uint16_t RedisCrc16(std::string_view data);
// The hash slot of `key` (hash tags honoured).
int RedisKeySlot(std::string_view key);

// A parsed "MOVED SLOT HOST:PORT" / "ASK SLOT HOST:PORT" error reply. An empty
// host ("MOVED 1 :7001") means the host of the node that replied.
struct RedisRedirect {
  enum class Kind { kNone, kMoved, kAsk };
  Kind kind = Kind::kNone;
  int slot = -1;
  std::string host;
  int port = 0;
};
RedisRedirect ParseRedisRedirect(std::string_view error);

// One master's range of slots, from CLUSTER NODES.
struct RedisSlotRange {
  int first = 0, last = 0;  // inclusive
  std::string host;         // "" if the node has no address yet: the host that was asked
  int port = 0;
  int replicas = 0;  // the master's replicas not marked as failed
};
// Parses the text of CLUSTER NODES (one line per node: ID HOST:PORT@BUS[,NAME]
// FLAGS MASTER PING PONG EPOCH LINK SLOT...); slots being imported or migrated
// ("[S->-ID]", "[S-<-ID]") stay with their current master. kCorruption names
// the malformed line. (CLUSTER SLOTS is not used: Redis 7 leaves a replica
// out of it until it has received data.)
StatusOr<std::vector<RedisSlotRange>> ParseClusterNodes(std::string_view text);

// One command and the key that routes it (one of its arguments).
struct RedisCommand {
  std::string_view key;
  std::vector<std::string_view> args;
};

class RedisRouter {
 public:
  // One server: every command goes to it.
  RedisRouter(const RedisAddress& server, const StoreOptions& options);
  // A cluster, found through `seeds` (password and user from the first).
  RedisRouter(const std::vector<RedisAddress>& seeds, const StoreOptions& options);
  ~RedisRouter();
  RedisRouter(const RedisRouter&) = delete;
  RedisRouter& operator=(const RedisRouter&) = delete;

  bool cluster() const { return cluster_; }
  // "redis HOST:PORT/DB" or "redis cluster HOST:PORT,..." (the seeds), for messages.
  const std::string& where() const { return where_; }
  // "HOST:PORT/DB" or "cluster HOST:PORT,...": where() without "redis ".
  std::string location() const { return where_.substr(6); }
  const std::string& CatalogPrefix() const { return catalog_prefix_; }

  // Checks the server answers (one server) or loads the slot map and checks
  // that every slot has a master (cluster).
  Status Start();

  // A connection to the master of the catalog keys.
  StatusOr<Conn> AcquireCatalog(bool fresh = false);
  // After a catalog command on `failed` returned kUnavailable: whether to try
  // once more on a fresh connection (the connection was an idle one, or the
  // catalog's slot has a new master now).
  bool RetryCatalog(const Conn& failed);
  // Waits (at most the command timeout) until a replica of the catalog's
  // master has what `c` wrote; no-op without replicas. Best effort: only a
  // failed connection is an error.
  Status ReplicateCatalog(Conn& c);

  // Runs the commands pipelined, each on the master of its key, all masters
  // at once; (*replies)[i] is the reply to cmds[i] or its error (error
  // replies, as ErrorReplyStatus, and failed connections). All commands must
  // be idempotent: a command may reach a server twice.
  void Run(const std::vector<RedisCommand>& cmds, std::vector<StatusOr<Reply>>* replies,
           bool replicate = false);

  // "HOST:PORT" of the master serving `key` now (tests).
  std::string MasterOf(std::string_view key);
  // Redirections followed so far (tests).
  uint64_t redirects() const { return redirects_.load(); }

 private:
  struct Node {
    RedisAddress address;
    std::unique_ptr<RedisPool> pool;
    int replicas = 0;
  };
  // The node index for HOST:PORT, added if new. REQUIRES mu_.
  int NodeLocked(const std::string& host, int port);
  // Reloads the slot map unless someone did since `seen_epoch`; false if no
  // node answered.
  bool Refresh(uint64_t seen_epoch);
  Status LoadSlotMap();

  const bool cluster_;
  const StoreOptions options_;
  std::string where_;
  std::string catalog_prefix_;
  std::string catalog_key_;  // any key in the catalog's slot
  std::vector<RedisAddress> seeds_;

  mutable std::mutex mu_;
  std::vector<Node> nodes_;     // never shrinks; pools live as long as the router
  std::vector<int16_t> owner_;  // slot -> index in nodes_, -1: none
  uint64_t epoch_ = 0;          // incremented by every map load
  std::mutex refresh_mu_;       // one map load at a time

  std::atomic<uint64_t> redirects_{0};
};

}  // namespace store_internal
}  // namespace pacset
