// redis://[:PASSWORD@]HOST:PORT[/DB] — one store shared by many hosts — and
// redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...] — the same spread over
// the masters of a Redis Cluster (routing: store/internal/redis_router.h).
//
// Keys (all under "pacset:"; NAME never contains ':'). On a cluster every
// catalog key below has "{catalog}:" after "pacset:" (pacset:{catalog}:current,
// ...), a hash tag that puts the whole catalog in one slot so that the Lua
// scripts stay atomic on one master; blocks keep their names and spread over
// all slots:
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
// Connections: a small pool per server (store/internal/redis_conn.h), so
// concurrent threads never share a hiredis context. Idempotent calls that
// failed on a reused connection (after a server restart they are all dead)
// or on a master that a failover replaced are retried once on a new one.
// Block reads, writes and deletions are pipelines routed by key; on a
// cluster a block write returns only once a replica has it.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
#include "store/internal/generation_writer.h"
#include "store/internal/redis_router.h"
#include "util/string_util.h"

namespace pacset {
namespace store_internal {

std::string RedisBlockKey(const std::string& name, uint64_t gen, uint64_t index) {
  return "pacset:blk:" + name + ":" + std::to_string(gen) + ":" + std::to_string(index);
}

namespace {

// The catalog's keys under `prefix` (RedisRouter::CatalogPrefix()).
struct CatalogKeys {
  explicit CatalogKeys(const std::string& prefix)
      : current(prefix + "current"),
        catalog(prefix + "catalog"),
        generations(prefix + "generations"),
        pending(prefix + "pending"),
        lastgen(prefix + "lastgen"),
        condemned(prefix + "condemned"),
        pins(prefix + "pins"),
        pin_lease_prefix(prefix + "lease:pin:"),
        pending_lease_prefix(prefix + "lease:pending:") {}
  const std::string current, catalog, generations, pending, lastgen, condemned, pins;
  const std::string pin_lease_prefix, pending_lease_prefix;
};

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

class RedisStore;

class RedisWriter final : public GenerationWriterBase {
 public:
  RedisWriter(RedisStore* store, std::string name, uint64_t gen, uint32_t block_size,
              uint64_t block_count, std::shared_ptr<std::atomic<bool>> lease_lost)
      : GenerationWriterBase(std::move(name), gen, block_size, block_count),
        store_(store),
        lease_lost_(std::move(lease_lost)) {}
  ~RedisWriter() override;

 private:
  Status WriteBlock(uint64_t index, const char* block) override;
  Status SendBatchIfFull() override;
  Status PublishGeneration(const ForestInfo& info) override;
  Status Drain();  // sends the batch

  RedisStore* store_;
  std::shared_ptr<std::atomic<bool>> lease_lost_;
  // Blocks waiting to be sent, one pipeline per batch (see SendBatchIfFull).
  std::vector<std::string> batch_keys_;
  std::vector<std::string> batch_blocks_;
  size_t batch_bytes_ = 0;
};

class RedisStore final : public BlockStore {
 public:
  RedisStore(std::unique_ptr<RedisRouter> router, const StoreOptions& options)
      : router_(std::move(router)), keys_(router_->CatalogPrefix()), options_(options) {
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
        PACSET_RETURN_IF_ERROR(c.Append({"DEL", keys_.pin_lease_prefix + m}));
        PACSET_RETURN_IF_ERROR(c.Append({"SREM", keys_.pins, m}));
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
    PACSET_RETURN_IF_ERROR(router_->Start());
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

  RedisRouter& router() { return *router_; }
  const std::string& where() const { return router_->where(); }
  const StoreOptions& options() const { return options_; }
  Status PublishWriter(const ForestInfo& info);
  void AbandonWriter(const std::string& name, uint64_t gen);

  // Runs fn on a pooled connection to the catalog's server; when that failed
  // with kUnavailable on a reused connection (a server restart kills idle
  // connections) or the catalog moved to another master, once more on a
  // fresh one. For idempotent operations only.
  template <class Fn>
  Status WithConn(Fn fn) {
    PACSET_ASSIGN_OR_RETURN(Conn c, router_->AcquireCatalog());
    Status s = fn(c);
    if (s.code() != StatusCode::kUnavailable) return s;
    Conn dead = std::move(c);
    const bool retry = router_->RetryCatalog(dead);
    { Conn drop = std::move(dead); }  // drop it (and the idle pool) before reconnecting
    if (!retry) return s;
    PACSET_ASSIGN_OR_RETURN(Conn fresh, router_->AcquireCatalog(true));
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

  std::unique_ptr<RedisRouter> router_;
  const CatalogKeys keys_;
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
  if (!published()) store_->AbandonWriter(name(), generation());
}

Status RedisWriter::WriteBlock(uint64_t index, const char* block) {
  if (lease_lost_->load())
    return Status::DeadlineExceeded(context() + ": the import's lease on " + store_->where() +
                                    " expired; import again");
  batch_keys_.push_back(RedisBlockKey(name(), generation(), index));
  batch_blocks_.emplace_back(block, block_size());
  batch_bytes_ += block_size();
  return Status::Ok();
}

Status RedisWriter::SendBatchIfFull() {
  return batch_keys_.size() >= 64 || batch_bytes_ >= (8u << 20) ? Drain() : Status::Ok();
}

Status RedisWriter::Drain() {
  std::vector<RedisCommand> cmds(batch_keys_.size());
  for (size_t i = 0; i < cmds.size(); ++i)
    cmds[i] = RedisCommand{batch_keys_[i], {"SET", batch_keys_[i], batch_blocks_[i]}};
  std::vector<StatusOr<Reply>> replies;
  // Replicated: a block the writer was told is stored survives a failover.
  store_->router().Run(cmds, &replies, /*replicate=*/true);
  batch_keys_.clear();
  batch_blocks_.clear();
  batch_bytes_ = 0;
  for (const auto& r : replies)
    if (!r.ok()) return r.status().WithContext(context());
  return Status::Ok();
}

Status RedisWriter::PublishGeneration(const ForestInfo& info) {
  if (!batch_keys_.empty()) PACSET_RETURN_IF_ERROR(Drain());
  return store_->PublishWriter(info);
}

void RedisStore::AbandonWriter(const std::string& name, uint64_t gen) {
  const std::string lease = keys_.pending_lease_prefix + Field(name, gen);
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
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"HINCRBY", keys_.lastgen, name, "1"}));
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
  const std::string lease = keys_.pending_lease_prefix + field;
  const std::string ttl = std::to_string(options_.lease_ms);
  const std::string encoded = EncodeForestInfo(pending);
  // The lease first: a marker without a lease would be collected at once.
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    PACSET_RETURN_IF_ERROR(c.Command({"SET", lease, "1", "PX", ttl}).status());
    return c.Command({"HSET", keys_.pending, field, encoded}).status();
  }));
  auto lost = std::make_shared<std::atomic<bool>>(false);
  AddLease(lease, Lease{false, lost});
  return std::unique_ptr<GenerationWriter>(
      new RedisWriter(this, name, gen, block_size, block_count, lost));
}

Status RedisStore::PublishWriter(const ForestInfo& info) {
  const std::string& name = info.name;
  const uint64_t gen = info.generation;
  const std::string context = ForestContext(name, gen);
  const std::string field = Field(name, gen);
  const std::string lease = keys_.pending_lease_prefix + field;
  const std::string gen_s = std::to_string(gen);
  const std::string encoded = EncodeForestInfo(info);
  PACSET_ASSIGN_OR_RETURN(Conn c, router_->AcquireCatalog());
  PACSET_ASSIGN_OR_RETURN(
      Reply r, c.Command({"EVAL", kPublishScript, "5", keys_.current, keys_.catalog,
                          keys_.generations, keys_.pending, lease, name, gen_s, field, encoded}));
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
  // Before collecting: a failover must not bring back the old catalog after
  // the old generation's blocks are gone.
  (void)router_->ReplicateCatalog(c);
  (void)CollectGarbage();  // best effort: the publish itself succeeded
  return Status::Ok();
}

StatusOr<ForestInfo> RedisStore::Lookup(const std::string& name) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  ForestInfo info;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"HGET", keys_.catalog, name}));
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
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"HVALS", keys_.catalog}));
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
    PACSET_ASSIGN_OR_RETURN(Conn c, router_->AcquireCatalog());
    PACSET_ASSIGN_OR_RETURN(
        Reply r, c.Command({"EVAL", kDeleteScript, "2", keys_.current, keys_.catalog, name}));
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
      return Status::NotFound("no forest named '" + name + "' in store " + where());
    (void)router_->ReplicateCatalog(c);  // before its blocks go (see PublishWriter)
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
  const std::string lease = keys_.pin_lease_prefix + member;
  const std::string ttl = std::to_string(options_.lease_ms);
  const std::string field = Field(name, gen);
  Status s = WithConn([&](Conn& c) {
    PACSET_ASSIGN_OR_RETURN(Reply r, c.Command({"EVAL", kPinScript, "3", keys_.generations,
                                                keys_.pins, lease, field, member, ttl}));
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
      return Status::NotFound(ForestContext(name, gen) + " is no longer in store " + where());
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
    return Status::InvalidArgument(ForestContext(name, gen) + " is not pinned by this store");
  if (--it->second > 0) return Status::Ok();
  pins_.erase(it);
  const std::string member = PinMember(name, gen);
  const std::string lease = keys_.pin_lease_prefix + member;
  RemoveLease(lease);
  // If this fails the lease simply expires.
  return WithConn([&](Conn& c) {
    PACSET_RETURN_IF_ERROR(c.Command({"DEL", lease}).status());
    return c.Command({"SREM", keys_.pins, member}).status();
  });
}

Status RedisStore::DeleteCondemned(Conn& c, uint64_t* collected) {
  PACSET_ASSIGN_OR_RETURN(Reply all, c.Command({"HGETALL", keys_.condemned}));
  for (size_t i = 0; i + 1 < all->elements; i += 2) {
    const std::string field = ReplyString(all->element[i]);
    ForestInfo info;
    std::string name;
    uint64_t gen;
    if (!ParseField(field, &name, &gen)) continue;
    PACSET_RETURN_IF_ERROR(DecodeForestInfo(ReplyString(all->element[i + 1]),
                                            "condemned generation " + field + " in " + where(),
                                            &info));
    // One UNLINK per block: on a cluster the blocks are spread over all slots.
    constexpr uint64_t kChunk = 4096;
    for (uint64_t first = 0; first < info.block_count; first += kChunk) {
      std::vector<std::string> keys;
      for (uint64_t b = first; b < std::min(info.block_count, first + kChunk); ++b)
        keys.push_back(RedisBlockKey(name, gen, b));
      std::vector<RedisCommand> cmds;
      for (const auto& k : keys) cmds.push_back(RedisCommand{k, {"UNLINK", k}});
      std::vector<StatusOr<Reply>> replies;
      router_->Run(cmds, &replies);
      for (const auto& r : replies) PACSET_RETURN_IF_ERROR(r.status());
    }
    PACSET_RETURN_IF_ERROR(c.Command({"HDEL", keys_.condemned, field}).status());
    ++*collected;
  }
  return Status::Ok();
}

StatusOr<uint64_t> RedisStore::CollectGarbage() {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  uint64_t collected = 0;
  PACSET_RETURN_IF_ERROR(WithConn([&](Conn& c) {
    collected = 0;
    PACSET_ASSIGN_OR_RETURN(Reply pending, c.Command({"HKEYS", keys_.pending}));
    for (size_t i = 0; i < pending->elements; ++i) {
      const std::string field = ReplyString(pending->element[i]);
      const std::string lease = keys_.pending_lease_prefix + field;
      PACSET_RETURN_IF_ERROR(c.Command({"EVAL", kCondemnPendingScript, "3", keys_.pending,
                                        keys_.condemned, lease, field})
                                 .status());
    }
    PACSET_ASSIGN_OR_RETURN(Reply gens, c.Command({"HKEYS", keys_.generations}));
    PACSET_ASSIGN_OR_RETURN(Reply current, c.Command({"HGETALL", keys_.current}));
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
          c.Command({"EVAL", kCondemnGenerationScript, "4", keys_.current, keys_.generations,
                     keys_.pins, keys_.condemned, name, gen_s, field, keys_.pin_lease_prefix})
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
    st.backend = router_->cluster() ? "redis-cluster" : "redis";
    st.location = router_->location();
    PACSET_ASSIGN_OR_RETURN(Reply forests, c.Command({"HLEN", keys_.catalog}));
    st.forests = static_cast<uint64_t>(forests->integer);
    PACSET_ASSIGN_OR_RETURN(Reply pending, c.Command({"HLEN", keys_.pending}));
    st.pending = static_cast<uint64_t>(pending->integer);
    PACSET_ASSIGN_OR_RETURN(Reply gens, c.Command({"HVALS", keys_.generations}));
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
  std::vector<std::string> keys;
  keys.reserve(blocks.size());
  for (uint64_t b : blocks) keys.push_back(RedisBlockKey(forest.name, forest.generation, b));
  std::vector<RedisCommand> cmds;
  cmds.reserve(blocks.size());
  for (const std::string& k : keys) cmds.push_back(RedisCommand{k, {"GET", k}});
  std::vector<StatusOr<Reply>> replies;
  router_->Run(cmds, &replies);
  out->assign(blocks.size(), std::string());
  Status first;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!replies[i].ok()) {
      if (first.ok()) first = replies[i].status();
      continue;
    }
    const redisReply* r = replies[i]->get();
    if (r->type == REDIS_REPLY_NIL) {
      if (first.ok())
        first = Status::NotFound("block " + std::to_string(blocks[i]) + ": missing from the store");
      continue;
    }
    (*out)[i].assign(r->str, r->len);
  }
  return first;
}

}  // namespace

StatusOr<std::unique_ptr<BlockStore>> OpenRedisStore(const RedisAddress& address,
                                                     const StoreOptions& options) {
  auto store =
      std::make_unique<RedisStore>(std::make_unique<RedisRouter>(address, options), options);
  PACSET_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<BlockStore>(std::move(store));
}

StatusOr<std::unique_ptr<BlockStore>> OpenRedisClusterStore(const std::vector<RedisAddress>& seeds,
                                                            const StoreOptions& options) {
  auto store = std::make_unique<RedisStore>(std::make_unique<RedisRouter>(seeds, options), options);
  PACSET_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<BlockStore>(std::move(store));
}

}  // namespace store_internal
}  // namespace pacset
