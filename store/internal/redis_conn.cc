#include "store/internal/redis_conn.h"

#include <cerrno>

#include "util/string_util.h"

namespace pacset {
namespace store_internal {

namespace {

timeval ToTimeval(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

}  // namespace

std::string ReplyString(const redisReply* r) {
  return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS
             ? std::string(r->str, r->len)
             : std::string();
}

Status ErrorReplyStatus(const std::string& where, std::string_view msg) {
  const std::string text = where + ": " + std::string(msg);
  if (StartsWith(msg, "NOAUTH"))
    return Status::InvalidArgument(where +
                                   " needs a password: set $REDISCLI_AUTH, use "
                                   "redis://:PASSWORD@HOST:PORT, or (pacsetfs) -o "
                                   "password_file=PATH");
  for (std::string_view transient : {"LOADING", "BUSY", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"})
    if (StartsWith(msg, transient)) return Status::Unavailable(text);
  if (StartsWith(msg, "OOM")) return Status::ResourceExhausted(text);
  return Status::IOError(text);
}

Conn::Conn(Conn&& o) noexcept
    : pool_(o.pool_),
      ctx_(o.ctx_),
      reused_(o.reused_),
      broken_(o.broken_),
      outstanding_(o.outstanding_) {
  o.ctx_ = nullptr;
}

Conn::~Conn() {
  if (ctx_ == nullptr) return;
  if (!broken_ && outstanding_ > 0) {
    redisFree(ctx_);  // replies still due: unusable, but the server is fine
    return;
  }
  pool_->Release(ctx_, broken_);
}

redisContext* Conn::Take() {
  redisContext* c = ctx_;
  ctx_ = nullptr;
  return c;
}

Status Conn::ContextError() {
  broken_ = true;
  std::string err = ctx_->errstr;
  if (ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
    err = "no reply within " + std::to_string(pool_->options().io_timeout_ms) + " ms";
  if (ctx_->err == REDIS_ERR_EOF) err = "the server closed the connection";
  return Status::Unavailable(pool_->where() + ": " + err);
}

StatusOr<Reply> Conn::Command(const std::vector<std::string_view>& args) {
  PACSET_RETURN_IF_ERROR(Append(args));
  return GetReply();
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

Status Conn::Flush() {
  int done = 0;
  while (!done)
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) return ContextError();
  return Status::Ok();
}

StatusOr<Reply> Conn::GetRawReply() {
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return ContextError();
  if (outstanding_ > 0) --outstanding_;
  return Reply(static_cast<redisReply*>(raw));
}

StatusOr<Reply> Conn::GetReply() {
  PACSET_ASSIGN_OR_RETURN(Reply r, GetRawReply());
  if (r->type == REDIS_REPLY_ERROR)
    return ErrorReplyStatus(pool_->where(), std::string_view(r->str, r->len));
  return r;
}

RedisPool::RedisPool(RedisAddress address, StoreOptions options)
    : address_(std::move(address)), options_(std::move(options)) {
  where_ = "redis " + address_.host + ":" + std::to_string(address_.port) + "/" +
           std::to_string(address_.db);
}

RedisPool::~RedisPool() {
  for (redisContext* c : idle_) redisFree(c);
}

StatusOr<Conn> RedisPool::Acquire(bool fresh) {
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

void RedisPool::Release(redisContext* c, bool broken) {
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

StatusOr<redisContext*> RedisPool::Connect() {
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

}  // namespace store_internal
}  // namespace pacset
