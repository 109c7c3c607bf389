#include "store/internal/redis_router.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "util/string_util.h"

namespace pacset {
namespace store_internal {

namespace {

constexpr int kMaxRounds = 6;  // redirections a command may follow before giving up

bool ParseInt(std::string_view s, int max, int* out) {
  uint64_t v = 0;
  if (s.size() > 9 || !ParseUint64(s, &v) || v > static_cast<uint64_t>(max)) return false;
  *out = static_cast<int>(v);
  return true;
}

std::string HostPort(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

}  // namespace

uint16_t RedisCrc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

int RedisKeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return RedisCrc16(key) & (kRedisClusterSlots - 1);
}

RedisRedirect ParseRedisRedirect(std::string_view error) {
  RedisRedirect r;
  RedisRedirect::Kind kind;
  if (StartsWith(error, "MOVED ")) {
    kind = RedisRedirect::Kind::kMoved;
    error.remove_prefix(6);
  } else if (StartsWith(error, "ASK ")) {
    kind = RedisRedirect::Kind::kAsk;
    error.remove_prefix(4);
  } else {
    return r;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return r;
  const std::string_view endpoint = error.substr(space + 1);
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return r;
  int slot, port;
  if (!ParseInt(error.substr(0, space), kRedisClusterSlots - 1, &slot) ||
      !ParseInt(endpoint.substr(colon + 1), 65535, &port) || port == 0)
    return r;
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  r.kind = kind;
  r.slot = slot;
  r.host = std::string(host);
  r.port = port;
  return r;
}

StatusOr<std::vector<RedisSlotRange>> ParseClusterNodes(std::string_view text) {
  struct Line {
    std::string id, host, master;
    int port = 0;
    bool is_master = false, failed = false;
    std::vector<std::pair<int, int>> slots;
  };
  std::vector<Line> lines;
  size_t number = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::vector<std::string_view> f;
    for (size_t begin = 0; begin <= line.size();) {
      size_t end = line.find(' ', begin);
      if (end == std::string_view::npos) end = line.size();
      if (end > begin) f.push_back(line.substr(begin, end - begin));
      begin = end + 1;
    }
    auto bad = [&](const std::string& why) {
      return Status::Corruption("malformed CLUSTER NODES line " + std::to_string(number) + ": " +
                                why);
    };
    if (f.size() < 8) return bad("fewer than 8 fields");
    Line l;
    l.id = std::string(f[0]);
    std::string_view endpoint = f[1].substr(0, f[1].find('@'));  // HOST:PORT@BUS[,NAME]
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string_view::npos || !ParseInt(endpoint.substr(colon + 1), 65535, &l.port))
      return bad("address '" + std::string(f[1]) + "'");
    l.host = std::string(endpoint.substr(0, colon));
    for (size_t begin = 0; begin <= f[2].size();) {
      size_t end = f[2].find(',', begin);
      if (end == std::string_view::npos) end = f[2].size();
      const std::string_view flag = f[2].substr(begin, end - begin);
      if (flag == "master") l.is_master = true;
      if (flag == "fail" || flag == "fail?" || flag == "noaddr") l.failed = true;
      begin = end + 1;
    }
    l.master = std::string(f[3]);
    for (size_t k = 8; k < f.size(); ++k) {
      if (f[k].front() == '[') continue;  // a slot being migrated or imported
      const size_t dash = f[k].find('-');
      int first, last;
      if (!ParseInt(f[k].substr(0, dash), kRedisClusterSlots - 1, &first) ||
          !ParseInt(dash == std::string_view::npos ? f[k] : f[k].substr(dash + 1),
                    kRedisClusterSlots - 1, &last) ||
          last < first)
        return bad("slot range '" + std::string(f[k]) + "'");
      l.slots.emplace_back(first, last);
    }
    lines.push_back(std::move(l));
  }
  std::vector<RedisSlotRange> out;
  for (const Line& m : lines) {
    if (!m.is_master) continue;
    int replicas = 0;
    for (const Line& r : lines)
      if (!r.is_master && r.master == m.id && !r.failed) ++replicas;
    for (const auto& [first, last] : m.slots)
      out.push_back(RedisSlotRange{first, last, m.host, m.port, replicas});
  }
  return out;
}

RedisRouter::RedisRouter(const RedisAddress& server, const StoreOptions& options)
    : cluster_(false), options_(options), catalog_prefix_("pacset:"), seeds_{server} {
  nodes_.push_back(Node{server, std::make_unique<RedisPool>(server, options), 0});
  where_ = nodes_[0].pool->where();
}

RedisRouter::RedisRouter(const std::vector<RedisAddress>& seeds, const StoreOptions& options)
    : cluster_(true),
      options_(options),
      catalog_prefix_("pacset:{catalog}:"),
      catalog_key_("pacset:{catalog}:"),
      seeds_(seeds),
      owner_(kRedisClusterSlots, -1) {
  where_ = "redis cluster ";
  for (size_t i = 0; i < seeds.size(); ++i)
    where_ += (i ? "," : "") + HostPort(seeds[i].host, seeds[i].port);
}

RedisRouter::~RedisRouter() = default;

int RedisRouter::NodeLocked(const std::string& host, int port) {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].address.host == host && nodes_[i].address.port == port)
      return static_cast<int>(i);
  RedisAddress a = seeds_[0];  // the credentials of the cluster
  a.host = host;
  a.port = port;
  a.db = 0;
  nodes_.push_back(Node{a, std::make_unique<RedisPool>(a, options_), 0});
  return static_cast<int>(nodes_.size() - 1);
}

Status RedisRouter::LoadSlotMap() {
  // Ask the masters we know first, then the seeds, then every other node.
  std::vector<RedisPool*> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<bool> is_master(nodes_.size(), false);
    for (int16_t o : owner_)
      if (o >= 0) is_master[o] = true;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (is_master[i]) candidates.push_back(nodes_[i].pool.get());
    for (const RedisAddress& s : seeds_) {
      RedisPool* p = nodes_[NodeLocked(s.host, s.port)].pool.get();
      if (std::find(candidates.begin(), candidates.end(), p) == candidates.end())
        candidates.push_back(p);
    }
    for (const Node& n : nodes_)
      if (std::find(candidates.begin(), candidates.end(), n.pool.get()) == candidates.end())
        candidates.push_back(n.pool.get());
  }
  Status last = Status::Unavailable(where_ + ": no node known");
  for (RedisPool* pool : candidates) {
    auto conn = pool->Acquire();
    if (!conn.ok()) {
      if (conn.status().code() == StatusCode::kInvalidArgument) return conn.status();
      last = conn.status();
      continue;
    }
    auto reply = conn->Command({"CLUSTER", "NODES"});
    if (!reply.ok()) {
      // An error reply ("ERR This instance has cluster support disabled"),
      // not a failed connection: this server is no cluster node.
      if (reply.status().code() == StatusCode::kIOError)
        return Status::InvalidArgument(pool->where() + " is not a Redis Cluster node (" +
                                       reply.status().message() + "); use redis://");
      last = reply.status();
      continue;
    }
    auto ranges = ParseClusterNodes(ReplyString(reply->get()));
    if (!ranges.ok()) return ranges.status().WithContext(pool->where());
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int16_t> owner(kRedisClusterSlots, -1);
    for (const RedisSlotRange& r : *ranges) {
      const int n = NodeLocked(r.host.empty() ? pool->address().host : r.host, r.port);
      nodes_[n].replicas = r.replicas;
      for (int s = r.first; s <= r.last; ++s) owner[s] = static_cast<int16_t>(n);
    }
    owner_.swap(owner);
    ++epoch_;
    return Status::Ok();
  }
  return last;
}

bool RedisRouter::Refresh(uint64_t seen_epoch) {
  std::lock_guard<std::mutex> refresh(refresh_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (epoch_ != seen_epoch) return true;  // reloaded meanwhile
  }
  return LoadSlotMap().ok();
}

Status RedisRouter::Start() {
  if (!cluster_) {
    PACSET_ASSIGN_OR_RETURN(Conn c, nodes_[0].pool->Acquire());
    return c.Command({"PING"}).status();
  }
  PACSET_RETURN_IF_ERROR(LoadSlotMap());
  std::lock_guard<std::mutex> lock(mu_);
  for (int s = 0; s < kRedisClusterSlots; ++s)
    if (owner_[s] < 0)
      return Status::Unavailable(where_ + ": hash slot " + std::to_string(s) +
                                 " has no master (is the cluster fully set up?)");
  return Status::Ok();
}

StatusOr<Conn> RedisRouter::AcquireCatalog(bool fresh) {
  RedisPool* pool = nullptr;
  uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int n = cluster_ ? owner_[RedisKeySlot(catalog_key_)] : 0;
    if (n >= 0) pool = nodes_[n].pool.get();
    epoch = epoch_;
  }
  if (pool == nullptr) {
    Refresh(epoch);
    return Status::Unavailable(where_ + ": no master serves the catalog's hash slot " +
                               std::to_string(RedisKeySlot(catalog_key_)));
  }
  return pool->Acquire(fresh);
}

bool RedisRouter::RetryCatalog(const Conn& failed) {
  if (!cluster_) return failed.reused();
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = epoch_;
  }
  Refresh(epoch);
  std::lock_guard<std::mutex> lock(mu_);
  const int n = owner_[RedisKeySlot(catalog_key_)];
  return failed.reused() || (n >= 0 && nodes_[n].pool.get() != failed.pool());
}

Status RedisRouter::ReplicateCatalog(Conn& c) {
  if (!cluster_) return Status::Ok();
  int replicas = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Node& n : nodes_)
      if (n.pool.get() == c.pool()) replicas = n.replicas;
  }
  if (replicas == 0) return Status::Ok();
  auto r = c.Command({"WAIT", "1", std::to_string(options_.io_timeout_ms * 3 / 4)});
  return c.broken() ? r.status() : Status::Ok();
}

std::string RedisRouter::MasterOf(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  const int n = cluster_ ? owner_[RedisKeySlot(key)] : 0;
  return n < 0 ? std::string() : HostPort(nodes_[n].address.host, nodes_[n].address.port);
}

void RedisRouter::Run(const std::vector<RedisCommand>& cmds, std::vector<StatusOr<Reply>>* replies,
                      bool replicate) {
  replies->clear();
  replies->reserve(cmds.size());
  for (size_t i = 0; i < cmds.size(); ++i)
    replies->emplace_back(Status::Unavailable(where_ + ": command not sent"));
  std::vector<size_t> todo(cmds.size());
  for (size_t i = 0; i < cmds.size(); ++i) todo[i] = i;
  std::vector<int> ask(cmds.size(), -1);         // node an ASK redirection sent the command to
  std::vector<bool> resent(cmds.size(), false);  // already resent after a failed connection

  for (int round = 0; !todo.empty(); ++round) {
    // Route every command to a node.
    struct Batch {
      RedisPool* pool = nullptr;
      int replicas = 0;
      std::vector<size_t> cmds;
      std::optional<Conn> conn;
      Status failed;      // the connection failed before or while sending
      bool wait = false;  // WAIT appended after the commands
    };
    std::map<int, Batch> batches;
    uint64_t epoch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      epoch = epoch_;
      for (size_t i : todo) {
        const int n = ask[i] >= 0 ? ask[i] : cluster_ ? owner_[RedisKeySlot(cmds[i].key)] : 0;
        if (n < 0) {
          (*replies)[i] = Status::Unavailable(where_ + ": no master serves hash slot " +
                                              std::to_string(RedisKeySlot(cmds[i].key)));
          continue;
        }
        Batch& b = batches[n];
        b.pool = nodes_[n].pool.get();
        b.replicas = nodes_[n].replicas;
        b.cmds.push_back(i);
      }
    }
    std::vector<size_t> next;
    if (round == kMaxRounds) {
      for (auto& [n, b] : batches)
        for (size_t i : b.cmds)
          (*replies)[i] = Status::Unavailable(where_ + ": key '" + std::string(cmds[i].key) +
                                              "' still redirected after " +
                                              std::to_string(kMaxRounds) + " tries");
      break;
    }
    // Send to every master, then read: the masters work at the same time.
    for (auto& [n, b] : batches) {
      auto c = b.pool->Acquire();
      if (!c.ok()) {
        b.failed = c.status();
        continue;
      }
      b.conn.emplace(std::move(*c));
      for (size_t i : b.cmds) {
        if (ask[i] >= 0) b.failed = b.conn->Append({"ASKING"});
        if (b.failed.ok()) b.failed = b.conn->Append(cmds[i].args);
        if (!b.failed.ok()) break;
      }
      if (b.failed.ok() && replicate && b.replicas > 0) {
        b.failed = b.conn->Append({"WAIT", "1", std::to_string(options_.io_timeout_ms * 3 / 4)});
        b.wait = true;
      }
      if (b.failed.ok()) b.failed = b.conn->Flush();
    }
    bool moved = false, tryagain = false, unreplicated = false;
    struct Failed {
      size_t cmd;
      int node;
      bool reused;
    };
    std::vector<Failed> failed;
    for (auto& [n, b] : batches) {
      size_t k = 0;
      for (; k < b.cmds.size() && b.failed.ok(); ++k) {
        const size_t i = b.cmds[k];
        if (ask[i] >= 0) {
          auto asking = b.conn->GetRawReply();
          if (!asking.ok()) {
            b.failed = asking.status();
            break;
          }
        }
        auto r = b.conn->GetRawReply();
        if (!r.ok()) {
          b.failed = r.status();
          break;
        }
        ask[i] = -1;
        if ((*r)->type != REDIS_REPLY_ERROR) {
          (*replies)[i] = std::move(*r);
          continue;
        }
        const std::string_view msg((*r)->str, (*r)->len);
        const RedisRedirect redirect = ParseRedisRedirect(msg);
        if (redirect.kind != RedisRedirect::Kind::kNone) {
          ++redirects_;
          const std::string host = redirect.host.empty() ? b.pool->address().host : redirect.host;
          std::lock_guard<std::mutex> lock(mu_);
          const int to = NodeLocked(host, redirect.port);
          if (redirect.kind == RedisRedirect::Kind::kAsk) {
            ask[i] = to;
          } else {
            owner_[redirect.slot] = static_cast<int16_t>(to);
            moved = true;
          }
          next.push_back(i);
        } else if (StartsWith(msg, "TRYAGAIN")) {
          tryagain = true;  // a multi-key command during a slot migration
          next.push_back(i);
        } else {
          (*replies)[i] = ErrorReplyStatus(b.pool->where(), msg);
        }
      }
      if (b.failed.ok() && b.wait) {
        auto w = b.conn->GetReply();
        if (!w.ok()) {
          b.failed = w.status();
        } else if ((*w)->type != REDIS_REPLY_INTEGER || (*w)->integer < 1) {
          const Status unreplicated_status =
              Status::Unavailable(b.pool->where() + ": no replica acknowledged the writes within " +
                                  std::to_string(options_.io_timeout_ms * 3 / 4) + " ms");
          for (size_t i : b.cmds)
            if ((*replies)[i].ok()) (*replies)[i] = unreplicated_status;
          unreplicated = true;  // the replica may have failed: reload who has replicas
        }
      }
      if (b.failed.ok()) continue;
      const bool reused = b.conn.has_value() && b.conn->reused();
      for (; k < b.cmds.size(); ++k) {
        (*replies)[b.cmds[k]] = b.failed;
        failed.push_back(Failed{b.cmds[k], n, reused});
      }
    }
    batches.clear();  // connections back to their pools (or dropped) before resending
    if (cluster_ && (moved || unreplicated || !failed.empty())) Refresh(epoch);
    // After a failed connection, resend once what may now succeed: on a
    // connection that had been idle (the server may have restarted), or to
    // the slot's new master (a failover). The others keep their error.
    if (!failed.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Failed& f : failed) {
        const int owner = cluster_ ? owner_[RedisKeySlot(cmds[f.cmd].key)] : 0;
        if (resent[f.cmd] || !(f.reused || (owner >= 0 && owner != f.node))) continue;
        resent[f.cmd] = true;
        ask[f.cmd] = -1;
        next.push_back(f.cmd);
      }
    }
    if (tryagain) std::this_thread::sleep_for(std::chrono::milliseconds(2 << round));
    todo.swap(next);
  }
}

}  // namespace store_internal
}  // namespace pacset
