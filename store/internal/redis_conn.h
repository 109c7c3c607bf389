// Pooled hiredis connections to one Redis server, shared by the redis: and
// redis-cluster: stores (store/redis_store.cc, store/internal/redis_router.h).
//
// A Conn is one connection taken from a RedisPool: commands and pipelines
// with the pool's timeouts; error replies become a Status (see
// ErrorReplyStatus). It goes back to the pool when destroyed, unless it
// failed (then the pool also drops its idle connections: after a server
// restart they are all dead) or still has replies due.
//
// Thread-safety: a RedisPool may be used by many threads; a Conn by one.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/block_store.h"
#include "store/internal/backends.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// The text of a string or status reply; "" for other types.
std::string ReplyString(const redisReply* r);

// The Status for an error reply `msg` from the server named `where`:
// NOAUTH and a rejected password are kInvalidArgument; LOADING, BUSY and the
// cluster's MOVED, ASK, TRYAGAIN and CLUSTERDOWN (the key's slot is served
// elsewhere or by nobody right now) are kUnavailable; OOM is
// kResourceExhausted; anything else kIOError.
Status ErrorReplyStatus(const std::string& where, std::string_view msg);

class RedisPool;

class Conn {
 public:
  Conn(RedisPool* pool, redisContext* ctx, bool reused) : pool_(pool), ctx_(ctx), reused_(reused) {}
  Conn(Conn&& o) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  // Whether the connection came from the idle pool (it may have died since).
  bool reused() const { return reused_; }
  bool broken() const { return broken_; }
  RedisPool* pool() const { return pool_; }
  // Gives up the context without returning it to the pool.
  redisContext* Take();

  // One command; an error reply is a non-OK Status.
  StatusOr<Reply> Command(const std::vector<std::string_view>& args);
  // Pipelining: Append many, then GetReply as many times. Flush sends what
  // was appended without waiting for replies (to start several servers on a
  // pipeline before reading any of them).
  Status Append(const std::vector<std::string_view>& args);
  Status Flush();
  StatusOr<Reply> GetReply();
  // As GetReply, but an error reply is returned as a reply (for the caller
  // to interpret, e.g. a cluster redirection); only a failed connection is
  // an error.
  StatusOr<Reply> GetRawReply();

 private:
  Status ContextError();

  RedisPool* pool_;
  redisContext* ctx_;
  bool reused_;
  bool broken_ = false;
  size_t outstanding_ = 0;  // appended commands whose replies were not read
};

class RedisPool {
 public:
  RedisPool(RedisAddress address, StoreOptions options);
  ~RedisPool();
  RedisPool(const RedisPool&) = delete;
  RedisPool& operator=(const RedisPool&) = delete;

  // "redis HOST:PORT/DB", for messages (never the password).
  const std::string& where() const { return where_; }
  const RedisAddress& address() const { return address_; }
  const StoreOptions& options() const { return options_; }

  // A connection from the pool, or a new one when `fresh` or none is idle.
  // A new connection gets the connect timeout, the per-command timeout,
  // AUTH and SELECT; failures are kUnavailable (unreachable) or
  // kInvalidArgument (password, database).
  StatusOr<Conn> Acquire(bool fresh = false);

 private:
  friend class Conn;
  static constexpr size_t kMaxIdle = 16;

  void Release(redisContext* c, bool broken);
  StatusOr<redisContext*> Connect();

  RedisAddress address_;
  StoreOptions options_;
  std::string where_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
};

}  // namespace store_internal
}  // namespace pacset
