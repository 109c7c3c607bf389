// redis://[:PASSWORD@]HOST:PORT[/DB] — one store shared by many hosts.
//
// Keys (all under "pacset:"; NAME never contains ':'):
//   pacset:blk:NAME:GEN:INDEX    a block (string)
//   pacset:current               hash NAME -> current generation (decimal)
//   pacset:catalog               hash NAME -> ForestInfo (cereal) of the current generation
//   pacset:generations           hash NAME:GEN -> ForestInfo of every published generation stored
//   pacset:pending               hash NAME:GEN -> ForestInfo of an import in progress
//   pacset:lastgen               hash NAME -> last generation allocated (HINCRBY; survives Delete)
//   pacset:condemned             hash NAME:GEN -> ForestInfo of a generation whose blocks are
//                                being deleted (a crashed collector's work is resumed)
//   pacset:pins                  set NAME:GEN:HOLDER of pins, each with a lease key
//   pacset:lease:pin:NAME:GEN:HOLDER, pacset:lease:pending:NAME:GEN
//                                lease keys with a TTL (StoreOptions::lease_ms), refreshed by
//                                the store's lease thread while held
//
// Publish, Delete, Pin and the decision to collect a generation are Lua
// scripts (EVAL), so each is one atomic step on the server: a generation is
// condemned only if it is neither current nor pinned by a live lease at that
// instant, and Pin only succeeds on a generation that is still stored.
//
// Connections: a small pool, so concurrent threads never share a hiredis
// context. Each is made with the connect timeout, gets the per-command
// timeout, AUTH and SELECT. A failed connection is dropped with the rest of
// the idle pool (after a server restart they are all dead), and read-only or
// idempotent calls made on a reused connection are retried once on a new one.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "layout/block.h"
#include "store/block_store.h"
#include "store/internal/backends.h"
#include "store/internal/codec.h"
#include "store/internal/file_util.h"

namespace pacset {
namespace store_internal {

std::string RedisBlockKey(const std::string& name, uint64_t gen, uint64_t index) {
  return "pacset:blk:" + name + ":" + std::to_string(gen) + ":" + std::to_string(index);
}

namespace {

constexpr char kCurrent[] = "pacset:current";
constexpr char kCatalog[] = "pacset:catalog";
constexpr char kGenerations[] = "pacset:generations";
constexpr char kPending[] = "pacset:pending";
constexpr char kLastGen[] = "pacset:lastgen";
constexpr char kCondemned[] = "pacset:condemned";
constexpr char kPins[] = "pacset:pins";
constexpr char kPinLeasePrefix[] = "pacset:lease:pin:";
constexpr char kPendingLeasePrefix[] = "pacset:lease:pending:";

// KEYS current catalog generations pending lease; ARGV name gen field info.
constexpr char kPublishScript[] = R"lua(
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(cur) >= tonumber(ARGV[2]) then return {1, cur} end
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 0 then return {2, ''} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
redis.call('HDEL', KEYS[4], ARGV[3])
redis.call('DEL', KEYS[5])
return {0, ''}
)lua";

// KEYS current catalog; ARGV name.
constexpr char kDeleteScript[] = R"lua(
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
)lua";

// KEYS generations pins lease; ARGV field member ttl_ms.
constexpr char kPinScript[] = R"lua(
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[2])
return 1
)lua";

// KEYS current generations pins condemned; ARGV name gen field lease_prefix.
constexpr char kCondemnGenerationScript[] = R"lua(
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return 0 end
local info = redis.call('HGET', KEYS[2], ARGV[3])
if not info then return 0 end
local prefix = ARGV[3] .. ':'
local live = false
for _, m in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if string.sub(m, 1, #prefix) == prefix then
    if redis.call('EXISTS', ARGV[4] .. m) == 1 then
      live = true
    else
      redis.call('SREM', KEYS[3], m)
    end
  end
end
if live then return 0 end
redis.call('HDEL', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[4], ARGV[3], info)
return 1
)lua";

// KEYS pending condemned lease; ARGV field.
constexpr char kCondemnPendingScript[] = R"lua(
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local info = redis.call('HGET', KEYS[1], ARGV[1])
if not info then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], info)
return 1
)lua";

std::string Field(const std::string& name, uint64_t gen) {
  return name + ":" + std::to_string(gen);
}

bool ParseField(const std::string& field, std::string* name, uint64_t* gen) {
  const size_t colon = field.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *name = field.substr(0, colon);
  return ParseUint64(field.substr(colon + 1), gen);
}

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval ToTimeval(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

class RedisPool;

// One pooled connection, returned to the pool on destruction unless it failed.
class Conn {
 public:
  Conn(RedisPool* pool, redisContext* ctx, bool reused) : pool_(pool), ctx_(ctx), reused_(reused) {}
  Conn(Conn&& o) noexcept
      : pool_(o.pool_),
        ctx_(o.ctx_),
        reused_(o.reused_),
        broken_(o.broken_),
        outstanding_(o.outstanding_) {
    o.ctx_ = nullptr;
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  bool reused() const { return reused_; }
  bool broken() const { return broken_; }
  // Gives up the context without returning it to the pool.
  redisContext* Take() {
    redisContext* c = ctx_;
    ctx_ = nullptr;
    return c;
  }

  // One command; an error reply is a non-OK Status.
  StatusOr<Reply> Command(const std::vector<std::string_view>& args) {
    PACSET_RETURN_IF_ERROR(Append(args));
    return GetReply();
  }
  // Pipelining: Append many, then GetReply as many times.
  Status Append(const std::vector<std::string_view>& args);
  StatusOr<Reply> GetReply();

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
  RedisPool(RedisAddress address, StoreOptions options)
      : address_(std::move(address)), options_(std::move(options)) {
    where_ = "redis " + address_.host + ":" + std::to_string(address_.port) + "/" +
             std::to_string(address_.db);
  }
  ~RedisPool() {
    for (redisContext* c : idle_) redisFree(c);
  }

  const std::string& where() const { return where_; }
  const StoreOptions& options() const { return options_; }

  // A connection from the pool, or a new one when `fresh` or none is idle.
  StatusOr<Conn> Acquire(bool fresh = false) {
    if (!fresh) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        redisContext* c = idle_.back();
        idle_.pop_back();
        return Conn(this, c, true);
      }
    }
    PACSET_ASSIGN_OR_RETURN(redisContext * c, Connect());
    return Conn(this, c, false);
  }

  void Release(redisContext* c, bool broken) {
    if (broken) {
      redisFree(c);
      // The server probably went away: its other connections are dead too.
      std::vector<redisContext*> dead;
      {
        std::lock_guard<std::mutex> lock(mu_);
        dead.swap(idle_);
      }
      for (redisContext* d : dead) redisFree(d);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdle) {
      idle_.push_back(c);
    } else {
      redisFree(c);
    }
  }

 private:
  static constexpr size_t kMaxIdle = 16;

  StatusOr<redisContext*> Connect() {
    redisContext* c = redisConnectWithTimeout(address_.host.c_str(), address_.port,
                                              ToTimeval(options_.connect_timeout_ms));
    if (c == nullptr) return Status::ResourceExhausted("cannot allocate a redis context");
    if (c->err != 0) {
      std::string err = c->errstr;
      redisFree(c);
      return Status::Unavailable("cannot connect to " + where_ + ": " + err);
    }
    if (redisSetTimeout(c, ToTimeval(options_.io_timeout_ms)) != 0) {
      redisFree(c);
      return Status::Unavailable("cannot set the timeout of a connection to " + where_);
    }
    (void)redisEnableKeepAlive(c);
    Conn conn(this, c, false);
    if (!address_.password.empty()) {
      std::vector<std::string_view> auth = {"AUTH"};
      if (!address_.user.empty()) auth.push_back(address_.user);
      auth.push_back(address_.password);
      auto r = conn.Command(auth);
      if (!r.ok()) {
        if (!conn.broken()) redisFree(conn.Take());
        if (r.status().code() == StatusCode::kUnavailable) return r.status();
        return Status::InvalidArgument(where_ + " rejected the password (" + r.status().message() +
                                       ")");
      }
    }
    if (address_.db != 0) {
      const std::string db = std::to_string(address_.db);
      auto r = conn.Command({"SELECT", db});
      if (!r.ok()) {
        if (!conn.broken()) redisFree(conn.Take());
        if (r.status().code() == StatusCode::kUnavailable) return r.status();
        return Status::InvalidArgument(where_ + ": cannot select database " + db + " (" +
                                       r.status().message() + ")");
      }
    }
    return conn.Take();
  }

  RedisAddress address_;
  StoreOptions options_;
  std::string where_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
};

Conn::~Conn() {
  if (ctx_ == nullptr) return;
  if (!broken_ && outstanding_ > 0) {
    redisFree(ctx_);  // replies still due: unusable, but the server is fine
    return;
  }
  pool_->Release(ctx_, broken_);
}

Status Conn::ContextError() {
  broken_ = true;
  std::string err = ctx_->errstr;
  if (ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
    err = "no reply within " + std::to_string(pool_->options().io_timeout_ms) + " ms";
  if (ctx_->err == REDIS_ERR_EOF) err = "the server closed the connection";
  return Status::Unavailable(pool_->where() + ": " + err);
}

Status Conn::Append(const std::vector<std::string_view>& args) {
  std::vector<const char*> argv(args.size());
  std::vector<size_t> argvlen(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    argv[i] = args[i].data();
    argvlen[i] = args[i].size();
  }
  if (redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), argvlen.data()) !=
      REDIS_OK)
    return ContextError();
  ++outstanding_;
  return Status::Ok();
}

StatusOr<Reply> Conn::GetReply() {
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return ContextError();
  if (outstanding_ > 0) --outstanding_;
  Reply r(static_cast<redisReply*>(raw));
  if (r->type == REDIS_REPLY_ERROR) {
    std::string msg(r->str, r->len);
    if (msg.rfind("NOAUTH", 0) == 0)
      return Status::InvalidArgument(pool_->where() +
                                     " needs a password: set $REDISCLI_AUTH, use "
                                     "redis://:PASSWORD@HOST:PORT, or (pacsetfs) -o "
                                     "password_file=PATH");
    if (msg.rfind("LOADING", 0) == 0 || msg.rfind("BUSY", 0) == 0)
      return Status::Unavailable(pool_->where() + ": " + msg);
    if (msg.rfind("OOM", 0) == 0) return Status::ResourceExhausted(pool_->where() + ": " + msg);
    return Status::IOError(pool_->where() + ": " + msg);
  }
  return r;
}

std::string ReplyString(const redisReply* r) {
  return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS
             ? std::string(r->str, r->len)
             : std::string();
}

class RedisStore;

class RedisWriter final : public GenerationWriter {
 public:
  RedisWriter(RedisStore* store, std::string name, uint64_t gen, uint32_t block_size,
              uint64_t block_count, std::shared_ptr<std::atomic<bool>> lease_lost)
      : store_(store),
        name_(std::move(name)),
        gen_(gen),
        block_size_(block_size),
        block_count_(block_count),
        lease_lost_(std::move(lease_lost)),
        written_(block_count, false) {}
  ~RedisWriter() override;

  uint64_t generation() const override { return gen_; }
  Status Put(uint64_t index, const char* block) override;
  Status Publish(ForestInfo info) override;

 private:
  Status Drain();

  RedisStore* store_;
  std::string name_;
  uint64_t gen_;
  uint32_t block_size_;
  uint64_t block_count_;
  std::shared_ptr<std::atomic<bool>> lease_lost_;
  std::unique_ptr<Conn> conn_;  // held for the pipeline of SETs
  size_t in_flight_ = 0;
  size_t in_flight_bytes_ = 0;
  std::vector<bool> written_;
  uint64_t n_written_ = 0;
  bool published_ = false;
};

class RedisStore final : public BlockStore {
 public:
  RedisStore(const RedisAddress& address, const StoreOptions& options)
      : pool_(address, options), options_(options) {
    std::random_device rd;
    char buf[17];
    snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    holder_ = buf;
  }
  ~RedisStore() override {
    {
      std::lock_guard<std::mutex> lock(lease_mu_);
      stop_ = true;
    }
    lease_cv_.notify_all();
    if (lease_thread_.joinable()) lease_thread_.join();
    // Release this store's pins now rather than when their leases run out.
    std::vector<std::string> members;
    for (const auto& [key, count] : pins_) members.push_back(PinMember(key.first, key.second));
    if (members.empty()) return;
    (void)WithConn([&](Conn& c) {
      for (const std::string& m : members) {
        PACSET_RETURN_IF_ERROR(c.Append({"DEL", kPinLeasePrefix + m}));
        PACSET_RETURN_IF_ERROR(c.Append({"SREM", kPins, m}));
      }
      Status first;
      for (size_t i = 0; i < 2 * members.size() && !c.broken(); ++i) {
        Status s = c.GetReply().status();
        if (first.ok()) first = s;
      }
      return first;
    });
  }

  Status Open() {
    PACSET_RETURN_IF_ERROR(WithConn([](Conn& c) { return c.Command({"PING"}).status(); }));
    lease_thread_ = std::thread([this] { LeaseLoop(); });
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<GenerationWriter>> BeginGeneration(const std::string& name,
                                                              uint32_t block_size,
                                                              uint64_t block_count) override;
  StatusOr<ForestInfo> Lookup(const std::string& name) override;
  StatusOr<std::vector<ForestInfo>> List() override;
  Status Delete(const std::string& name) override;
  Status Pin(const std::string& name, uint64_t gen) override;
  Status Unpin(const std::string& name, uint64_t gen) override;
  StatusOr<uint64_t> CollectGarbage() override;
  StatusOr<StoreStats> Stat() override;

  RedisPool& pool() { return pool_; }
  const std::string& where() const { return pool_.where(); }
  const StoreOptions& options() const { return options_; }
  Status PublishWriter(const std::string& name, uint64_t gen, uint32_t block_size,
                       uint64_t block_count, ForestInfo info);
  void AbandonWriter(const std::string& name, uint64_t gen);

  // Runs fn on a pooled connection; when that failed with kUnavailable on a
  // reused connection (a server restart kills idle connections), once more on
  // a fresh one. For idempotent operations only.
  template <class Fn>
  Status WithConn(Fn fn) {
    PACSET_ASSIGN_OR_RETURN(Conn c, pool_.Acquire());
    Status s = fn(c);
    if (s.code() != StatusCode::kUnavailable || !c.reused()) return s;
    { Conn dead = std::move(c); }  // drop it (and the idle pool) before reconnecting
    PACSET_ASSIGN_OR_RETURN(Conn fresh, pool_.Acquire(true));
    return fn(fresh);
  }

 protected:
  Status ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                    std::vector<std::string>* out) override;

 private:
  struct Lease {
    bool is_pin = false;
    std::shared_ptr<std::atomic<bool>> lost;  // pending imports: set when the lease expired
  };
  Status CheckWritable() const {
    if (options_.read_only)
      return Status::NotSupported("store " + where() + " was opened read-only");
    return Status::Ok();
  }
  std::string PinMember(const std::string& name, uint64_t gen) const {
    return Field(name, gen) + ":" + holder_;
  }
  void AddLease(const std::string& key, Lease lease) {
    std::lock_guard<std::mutex> lock(lease_mu_);
    leases_[key] = std::move(lease);
  }
  void RemoveLease(const std::string& key) {
    std::lock_guard<std::mutex> lock(lease_mu_);
    leases_.erase(key);
  }
  void LeaseLoop();
  Status DeleteCondemned(Conn& c, uint64_t* collected);

  RedisPool pool_;
  const StoreOptions options_;
  std::string holder_;  // this store object's id in pin members

  std::mutex pin_mu_;
  std::map<std::pair<std::string, uint64_t>, int> pins_;

  std::mutex lease_mu_;
  std::condition_variable lease_cv_;
  bool stop_ = false;
  std::map<std::string, Lease> leases_;  // lease key -> what it keeps alive
  std::thread lease_thread_;
};

RedisWriter::~RedisWriter() {
  // A connection goes back to the pool only with no replies outstanding.
  if (conn_ != nullptr && in_flight_ > 0) (void)Drain();
  conn_.reset();
  if (!published_) store_->AbandonWriter(name_, gen_);
}

Status RedisWriter::Put(uint64_t index, const char* block) {
  const std::string context = ContextFor(name_, gen_);
  if (published_) return Status::InvalidArgument(context + ": already published");
  if (index >= block_count_)
    return Status::InvalidArgument(context + ": block " + std::to_string(index) +
                                   " is beyond the block count " + std::to_string(block_count_));
  if (written_[index])
    return Status::InvalidArgument(context + ": block " + std::to_string(index) + " written twice");
  if (lease_lost_->load())
    return Status::DeadlineExceeded(context + ": the import's lease on " + store_->where() +
                                    " expired; import again");
  if (conn_ == nullptr || conn_->broken()) {
    conn_.reset();
    PACSET_ASSIGN_OR_RETURN(Conn c, store_->pool().Acquire());
    conn_ = std::make_unique<Conn>(std::move(c));
  }
  const std::string key = RedisBlockKey(name_, gen_, index);
  PACSET_RETURN_IF_ERROR(conn_->Append({"SET", key, std::string_view(block, block_size_)}));
  ++in_flight_;
  in_flight_bytes_ += block_size_;
  written_[index] = true;
  ++n_written_;
  if (in_flight_ >= 64 || in_flight_bytes_ >= (8u << 20)) return Drain();
  return Status::Ok();
}

Status RedisWriter::Drain() {
  Status first;
  for (; in_flight_ > 0; --in_flight_) {
    auto r = conn_->GetReply();
    if (!r.ok() && first.ok()) first = r.status();
    if (conn_->broken()) {
      in_flight_ = 0;
      break;
    }
  }
  in_flight_bytes_ = 0;
  return first.WithContext(ContextFor(name_, gen_));
}

Status RedisWriter::Publish(ForestInfo info) {
  const std::string context = ContextFor(name_, gen_);
  if (published_) return Status::InvalidArgument(context + ": already published");
  if (conn_ != nullptr) PACSET_RETURN_IF_ERROR(Drain());
  if (n_written_ != block_count_)
    return Status::InvalidArgument(context + ": only " + std::to_string(n_written_) + " of " +
                                   std::to_string(block_count_) + " blocks were written");
  conn_.reset();
  PACSET_RETURN_IF_ERROR(
      store_->PublishWriter(name_, gen_, block_size_, block_count_, std::move(info)));
  published_ = true;
  return Status::Ok();
}

void RedisStore::AbandonWriter(const std::string& name, uint64_t gen) {
  const std::string lease = kPendingLeasePrefix + Field(name, gen);
  RemoveLease(lease);
  // Best effort: without the lease the next collection takes the blocks now
  // rather than one lease period later.
  (void)WithConn([&](Conn& c) { return c.Command({"DEL", lease}).status(); });
}

void RedisStore::LeaseLoop() {
  std::unique_lock<std::mutex> lock(lease_mu_);
  const auto period = std::chrono::milliseconds(std::max(1, options_.lease_ms / 3));
  const std::string ttl = std::to_string(options_.lease_ms);
  while (!stop_) {
    lease_cv_.wait_for(lock, period, [this] { return stop_; });
    if (stop_) break;
    std::map<std::string, Lease> leases = leases_;
    lock.unlock();
    if (!leases.empty()) {
      (void)WithConn([&](Conn& c) {
        for (const auto& [key, lease] : leases)
          PACSET_RETURN_IF_ERROR(c.Append({"PEXPIRE", key, ttl}));
        std::vector<std::string> expired_pins;
        for (const auto& [key, lease] : leases) {
          auto r = c.GetReply();
          if (!r.ok()) {
            if (c.broken()) return r.status();
            continue;
          }
          if ((*r)->type == REDIS_REPLY_INTEGER && (*r)->integer == 0) {
            // The key is gone: the server lost it (restart without persistence)
            // or we were cut off longer than the lease.
            if (lease.is_pin) {
              expired_pins.push_back(key);
            } else if (lease.lost) {
              lease.lost->store(true);
            }
          }
        }
        for (const std::string& key : expired_pins)
          PACSET_RETURN_IF_ERROR(c.Command({"SET", key, "1", "PX", ttl}).status());
        return Status::Ok();
      });
    }
    lock.lock();
  }
}

StatusOr<std::unique_ptr<GenerationWriter>> RedisStore::BeginGeneration(const std::string& name,
                                                                        uint32_t block_size,
                                                                        uint64_t block_count) {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  if (!IsValidBlockSize(block_size))
    return Status::InvalidArgument("invalid block size " + std::to_string(block_size));
  if (block_count == 0) return Status::InvalidArgument("forest '" + name + "': no blocks");
  uint64_t gen = 0;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"HINCRBY", kLastGen, name, "1"}));
    if (r->type != REDIS_REPLY_INTEGER || r->integer <= 0)
      return Status::Corruption(where() + ": bad generation counter for '" + name + "'");
    gen = static_cast<uint64_t>(r->integer);
    return Status::Ok();
  }));
  ForestInfo pending;
  pending.name = name;
  pending.generation = gen;
  pending.block_size = block_size;
  pending.block_count = block_count;
  pending.size_bytes = uint64_t{block_size} * block_count;
  pending.created_unix_ns = NowUnixNs();
  const std::string field = Field(name, gen);
  const std::string lease = kPendingLeasePrefix + field;
  const std::string ttl = std::to_string(options_.lease_ms);
  const std::string encoded = EncodeForestInfo(pending);
  // The lease first: a marker without a lease would be collected at once.
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    PACSET_RETURN_IF_ERROR(c.Command({"SET", lease, "1", "PX", ttl}).status());
    return c.Command({"HSET", kPending, field, encoded}).status();
  }));
  auto lost = std::make_shared<std::atomic<bool>>(false);
  AddLease(lease, Lease{false, lost});
  return std::unique_ptr<GenerationWriter>(
      new RedisWriter(this, name, gen, block_size, block_count, lost));
}

Status RedisStore::PublishWriter(const std::string& name, uint64_t gen, uint32_t block_size,
                                 uint64_t block_count, ForestInfo info) {
  const std::string context = ContextFor(name, gen);
  info.name = name;
  info.generation = gen;
  info.block_size = block_size;
  info.block_count = block_count;
  info.size_bytes = uint64_t{block_size} * block_count;
  if (info.created_unix_ns == 0) info.created_unix_ns = NowUnixNs();
  const std::string field = Field(name, gen);
  const std::string lease = kPendingLeasePrefix + field;
  const std::string gen_s = std::to_string(gen);
  const std::string encoded = EncodeForestInfo(info);
  PACSET_ASSIGN_OR_RETURN(Conn c, pool_.Acquire());
  PACSET_ASSIGN_OR_RETURN(
      Reply r, c.Command({"EVAL", kPublishScript, "5", kCurrent, kCatalog, kGenerations, kPending,
                          lease, name, gen_s, field, encoded}));
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_INTEGER)
    return Status::Internal(where() + ": unexpected reply to publish");
  const long long code = r->element[0]->integer;
  if (code == 1)
    return Status::AlreadyExists(context + ": generation " + ReplyString(r->element[1]) +
                                 " was published meanwhile; import again");
  if (code == 2)
    return Status::DeadlineExceeded(context + ": the import's lease on " + where() +
                                    " expired and its blocks were collected; import again");
  RemoveLease(lease);
  (void)CollectGarbage();  // best effort: the publish itself succeeded
  return Status::Ok();
}

StatusOr<ForestInfo> RedisStore::Lookup(const std::string& name) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  ForestInfo info;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"HGET", kCatalog, name}));
    if (r->type == REDIS_REPLY_NIL)
      return Status::NotFound("no forest named '" + name + "' in store " + where());
    return DecodeForestInfo(ReplyString(r.get()), "catalog entry '" + name + "' in " + where(),
                            &info);
  }));
  return info;
}

StatusOr<std::vector<ForestInfo>> RedisStore::List() {
  std::vector<ForestInfo> out;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    out.clear();
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"HVALS", kCatalog}));
    for (size_t i = 0; i < r->elements; ++i) {
      ForestInfo info;
      PACSET_RETURN_IF_ERROR(
          DecodeForestInfo(ReplyString(r->element[i]), "catalog entry in " + where(), &info));
      out.push_back(std::move(info));
    }
    return Status::Ok();
  }));
  std::sort(out.begin(), out.end(),
            [](const ForestInfo& a, const ForestInfo& b) { return a.name < b.name; });
  return out;
}

Status RedisStore::Delete(const std::string& name) {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  {
    PACSET_ASSIGN_OR_RETURN(Conn c, pool_.Acquire());
    PACSET_ASSIGN_OR_RETURN(Reply r,
                            c.Command({"EVAL", kDeleteScript, "2", kCurrent, kCatalog, name}));
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
      return Status::NotFound("no forest named '" + name + "' in store " + where());
  }
  (void)CollectGarbage();
  return Status::Ok();
}

Status RedisStore::Pin(const std::string& name, uint64_t gen) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  std::lock_guard<std::mutex> lock(pin_mu_);
  int& count = pins_[{name, gen}];
  if (count > 0) {
    ++count;
    return Status::Ok();
  }
  const std::string member = PinMember(name, gen);
  const std::string lease = kPinLeasePrefix + member;
  const std::string ttl = std::to_string(options_.lease_ms);
  const std::string field = Field(name, gen);
  Status s = WithConn([&](Conn& c) {
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"EVAL", kPinScript, "3", kGenerations, kPins, lease,
                                                field, member, ttl}));
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
      return Status::NotFound(ContextFor(name, gen) + " is no longer in store " + where());
    return Status::Ok();
  });
  if (!s.ok()) {
    pins_.erase({name, gen});
    return s;
  }
  count = 1;
  AddLease(lease, Lease{true, nullptr});
  return Status::Ok();
}

Status RedisStore::Unpin(const std::string& name, uint64_t gen) {
  std::lock_guard<std::mutex> lock(pin_mu_);
  auto it = pins_.find({name, gen});
  if (it == pins_.end())
    return Status::InvalidArgument(ContextFor(name, gen) + " is not pinned by this store");
  if (--it->second > 0) return Status::Ok();
  pins_.erase(it);
  const std::string member = PinMember(name, gen);
  const std::string lease = kPinLeasePrefix + member;
  RemoveLease(lease);
  // If this fails the lease simply expires.
  return WithConn([&](Conn& c) {
    PACSET_RETURN_IF_ERROR(c.Command({"DEL", lease}).status());
    return c.Command({"SREM", kPins, member}).status();
  });
}

Status RedisStore::DeleteCondemned(Conn& c, uint64_t* collected) {
  PACSET_ASSIGN_OR_RETURN(Reply all, c.Command({"HGETALL", kCondemned}));
  for (size_t i = 0; i + 1 < all->elements; i += 2) {
    const std::string field = ReplyString(all->element[i]);
    ForestInfo info;
    std::string name;
    uint64_t gen;
    if (!ParseField(field, &name, &gen)) continue;
    PACSET_RETURN_IF_ERROR(DecodeForestInfo(ReplyString(all->element[i + 1]),
                                            "condemned generation " + field + " in " + where(),
                                            &info));
    constexpr uint64_t kChunk = 1000;
    size_t commands = 0;
    for (uint64_t first = 0; first < info.block_count; first += kChunk) {
      std::vector<std::string> keys;
      for (uint64_t b = first; b < std::min(info.block_count, first + kChunk); ++b)
        keys.push_back(RedisBlockKey(name, gen, b));
      std::vector<std::string_view> args = {"UNLINK"};
      for (const auto& k : keys) args.push_back(k);
      PACSET_RETURN_IF_ERROR(c.Append(args));
      ++commands;
    }
    Status first;
    for (size_t k = 0; k < commands && !c.broken(); ++k) {
      Status s = c.GetReply().status();
      if (first.ok()) first = s;
    }
    PACSET_RETURN_IF_ERROR(first);
    PACSET_RETURN_IF_ERROR(c.Command({"HDEL", kCondemned, field}).status());
    ++*collected;
  }
  return Status::Ok();
}

StatusOr<uint64_t> RedisStore::CollectGarbage() {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  uint64_t collected = 0;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    collected = 0;
    PACSET_ASSIGN_OR_RETURN(Reply pending, c.Command({"HKEYS", kPending}));
    for (size_t i = 0; i < pending->elements; ++i) {
      const std::string field = ReplyString(pending->element[i]);
      const std::string lease = kPendingLeasePrefix + field;
      PACSET_RETURN_IF_ERROR(
          c.Command({"EVAL", kCondemnPendingScript, "3", kPending, kCondemned, lease, field})
              .status());
    }
    PACSET_ASSIGN_OR_RETURN(Reply gens, c.Command({"HKEYS", kGenerations}));
    PACSET_ASSIGN_OR_RETURN(Reply current, c.Command({"HGETALL", kCurrent}));
    std::map<std::string, std::string> cur;
    for (size_t i = 0; i + 1 < current->elements; i += 2)
      cur[ReplyString(current->element[i])] = ReplyString(current->element[i + 1]);
    for (size_t i = 0; i < gens->elements; ++i) {
      const std::string field = ReplyString(gens->element[i]);
      std::string name;
      uint64_t gen;
      if (!ParseField(field, &name, &gen)) continue;
      const std::string gen_s = std::to_string(gen);
      if (auto it = cur.find(name); it != cur.end() && it->second == gen_s) continue;
      PACSET_RETURN_IF_ERROR(
          c.Command({"EVAL", kCondemnGenerationScript, "4", kCurrent, kGenerations, kPins,
                     kCondemned, name, gen_s, field, kPinLeasePrefix})
              .status());
    }
    return DeleteCondemned(c, &collected);
  }));
  return collected;
}

StatusOr<StoreStats> RedisStore::Stat() {
  StoreStats st;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    st = StoreStats{};
    st.backend = "redis";
    st.location = where().substr(6);
    PACSET_ASSIGN_OR_RETURN(Reply forests, c.Command({"HLEN", kCatalog}));
    st.forests = static_cast<uint64_t>(forests->integer);
    PACSET_ASSIGN_OR_RETURN(Reply pending, c.Command({"HLEN", kPending}));
    st.pending = static_cast<uint64_t>(pending->integer);
    PACSET_ASSIGN_OR_RETURN(Reply gens, c.Command({"HVALS", kGenerations}));
    for (size_t i = 0; i < gens->elements; ++i) {
      ForestInfo info;
      PACSET_RETURN_IF_ERROR(DecodeForestInfo(ReplyString(gens->element[i]),
                                              "generation record in " + where(), &info));
      ++st.generations;
      st.blocks += info.block_count;
      st.bytes += info.size_bytes;
    }
    return Status::Ok();
  }));
  return st;
}

Status RedisStore::ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                              std::vector<std::string>* out) {
  return WithConn([&](Conn& c) {
    out->assign(blocks.size(), std::string());
    for (uint64_t b : blocks)
      PACSET_RETURN_IF_ERROR(c.Append({"GET", RedisBlockKey(forest.name, forest.generation, b)}));
    Status first;
    for (size_t i = 0; i < blocks.size(); ++i) {
      auto r = c.GetReply();
      if (!r.ok()) {
        if (c.broken()) return r.status();
        if (first.ok()) first = r.status();
        continue;
      }
      if ((*r)->type == REDIS_REPLY_NIL) {
        if (first.ok())
          first =
              Status::NotFound("block " + std::to_string(blocks[i]) + ": missing from the store");
        continue;
      }
      (*out)[i].assign((*r)->str, (*r)->len);
    }
    return first;
  });
}

}  // namespace

StatusOr<std::unique_ptr<BlockStore>> OpenRedisStore(const RedisAddress& address,
                                                     const StoreOptions& options) {
  auto store = std::make_unique<RedisStore>(address, options);
  PACSET_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<BlockStore>(std::move(store));
}

}  // namespace store_internal
}  // namespace pacset
