// Shared by the store tests and the store_child helper: generated blocks, a
// real redis-server started on a free loopback port, child processes, and
// per-backend test environments that can damage or count the bytes a
// backend really stored. Temporary directories are util/atomic_file.h's
// TempDir; children are started by util/subprocess.h's StartChild.
#pragma once

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <rocksdb/db.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "layout/block.h"
#include "store/block_store.h"
#include "store/internal/backends.h"
#include "util/atomic_file.h"
#include "util/file_io.h"
#include "util/subprocess.h"

namespace pacset {
namespace store_test {

// Block `index` of a test forest: a payload derived from (seed, index), sealed.
inline std::string MakeBlock(uint32_t block_size, uint64_t index, uint64_t seed) {
  std::string b(block_size, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + index * 0xD1B54A32D192ED03ull + 1;
  for (uint32_t i = 0; i + 8 <= block_size - kBlockTrailerSize; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(&b[i], &x, 8);
  }
  SealBlock(b.data(), block_size, index, /*seed=*/0);
  return b;
}

// Writes a test forest as a new generation (payload seed = its generation
// number unless `seed` is given) and publishes it.
inline Status WriteForest(BlockStore& store, const std::string& name, uint32_t block_size,
                          uint64_t count, uint64_t* gen_out = nullptr, int64_t seed = -1) {
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<GenerationWriter> w,
                          store.BeginGeneration(name, block_size, count));
  const uint64_t s = seed >= 0 ? static_cast<uint64_t>(seed) : w->generation();
  for (uint64_t i = 0; i < count; ++i)
    PACSET_RETURN_IF_ERROR(w->Put(i, MakeBlock(block_size, i, s).data()));
  ForestInfo info;
  info.source_file = name + ".pac";
  info.source_format = "pac";
  PACSET_RETURN_IF_ERROR(w->Publish(info));
  if (gen_out != nullptr) *gen_out = w->generation();
  return Status::Ok();
}

// A loopback TCP port nobody listens on right now.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A raw hiredis connection for tests (damaging and counting stored bytes).
class RawRedis {
 public:
  explicit RawRedis(int port, const std::string& password = "", int db = 0) {
    timeval tv{2, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c_ != nullptr && c_->err == 0) {
      redisSetTimeout(c_, tv);
      if (!password.empty()) Command({"AUTH", password});
      if (db != 0) Command({"SELECT", std::to_string(db)});
    }
  }
  ~RawRedis() {
    if (c_ != nullptr) redisFree(c_);
  }
  bool ok() const { return c_ != nullptr && c_->err == 0; }
  // The reply as text: strings and status as is, integers in decimal, nil as
  // "(nil)", errors as "ERR...", arrays as their elements joined by '\n'.
  std::string Command(const std::vector<std::string>& args) {
    if (!ok()) return "(no connection)";
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (r == nullptr) return "(io error)";
    std::string out = Text(r);
    freeReplyObject(r);
    return out;
  }

 private:
  static std::string Text(const redisReply* r) {
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
      case REDIS_REPLY_ERROR:
        return std::string(r->str, r->len);
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_NIL:
        return "(nil)";
      case REDIS_REPLY_ARRAY: {
        std::string s;
        for (size_t i = 0; i < r->elements; ++i) s += (i ? "\n" : "") + Text(r->element[i]);
        return s;
      }
    }
    return "";
  }
  redisContext* c_ = nullptr;
};

inline std::string RedisServerBinary() {
  const char* env = std::getenv("PACSET_REDIS_SERVER");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/redis-server";
}

// Bytes of the block keys (pacset:blk:*) the redis-server on `port` holds.
inline uint64_t BlockBytesOn(int port) {
  RawRedis r(port);
  uint64_t bytes = 0;
  std::string cursor = "0";
  do {
    // SCAN replies [cursor, [keys...]]; RawRedis flattens to lines.
    std::string reply = r.Command({"SCAN", cursor, "MATCH", "pacset:blk:*", "COUNT", "1000"});
    size_t nl = reply.find('\n');
    cursor = reply.substr(0, nl);
    while (nl != std::string::npos) {
      const size_t next = reply.find('\n', nl + 1);
      const std::string key =
          reply.substr(nl + 1, next == std::string::npos ? next : next - nl - 1);
      if (!key.empty()) bytes += std::stoull(r.Command({"STRLEN", key}));
      nl = next;
    }
  } while (cursor != "0");
  return bytes;
}

// Flips a bit of block `index` of `f` on the redis-server at `port` (which
// must hold it); empty on success, else what failed.
inline std::string CorruptRedisBlock(int port, const ForestInfo& f, uint64_t index) {
  RawRedis r(port);
  const std::string key = store_internal::RedisBlockKey(f.name, f.generation, index);
  std::string value = r.Command({"GET", key});
  if (value.size() != f.block_size) return "GET " + key + " returned " + value.substr(0, 40);
  value[value.size() / 2] ^= 0x01;
  const std::string reply = r.Command({"SET", key, value});
  return reply == "OK" ? "" : "SET failed: " + reply;
}

// Deletes block `index` of `f` from the redis-server at `port`.
inline std::string DeleteRedisBlock(int port, const ForestInfo& f, uint64_t index) {
  const std::string reply =
      RawRedis(port).Command({"DEL", store_internal::RedisBlockKey(f.name, f.generation, index)});
  return reply == "1" ? "" : "DEL returned " + reply;
}

// A real redis-server on 127.0.0.1, with its own data directory, killed when
// this object goes (and by the kernel if the test process dies).
class RedisServer {
 public:
  RedisServer() = default;
  ~RedisServer() { Kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Empty on success, else why it failed. `extra` is appended to the
  // command line; "{FREE_PORT}" in it becomes another free port, chosen with
  // the server's (e.g. for --cluster-port) and kept by Restart.
  std::string Start(const std::string& password = "", std::vector<std::string> extra = {}) {
    password_ = password;
    extra_ = std::move(extra);
    if (::access(RedisServerBinary().c_str(), X_OK) != 0)
      return RedisServerBinary() +
             " not found: the redis tests need a real redis-server (apt-get install redis-server)";
    std::string last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreePort();
      resolved_extra_ = extra_;
      for (std::string& a : resolved_extra_)
        if (a == "{FREE_PORT}") a = std::to_string(FreePort());
      last = Launch();
      if (last.empty()) return "";
    }
    return last;
  }
  // Starts again on the same port and directory (data saved by ShutdownSave is reloaded).
  std::string Restart() { return Launch(); }
  // SHUTDOWN SAVE: writes dump.rdb into the data directory and exits.
  void ShutdownSave() {
    if (pid_ <= 0) return;
    RawRedis r(port_, password_);
    r.Command({"SHUTDOWN", "SAVE"});
    Reap();
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    Reap();
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_->path(); }

 private:
  void Reap() {
    int status;
    (void)WaitForChild(pid_, &status);
    pid_ = -1;
  }
  std::string Launch() {
    const std::string port = std::to_string(port_);
    const std::string log = dir_->path() + "/redis.log";
    std::vector<std::string> args = {RedisServerBinary(),
                                     "--port",
                                     port,
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_->path(),
                                     "--daemonize",
                                     "no",
                                     "--protected-mode",
                                     "no"};
    if (!password_.empty()) {
      args.push_back("--requirepass");
      args.push_back(password_);
    }
    args.insert(args.end(), resolved_extra_.begin(), resolved_extra_.end());
    // Opened before fork(), as StartChild builds the rest: the child of a
    // threaded test must not allocate. Unopened (-1), the child writes to the
    // test's own output.
    const UniqueFd log_fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    ChildOptions child;
    child.stdout_fd = child.stderr_fd = log_fd.get();
    child.search_path = false;
    child.kill_with_parent = true;
    const int err = StartChild(args, child, &pid_);
    if (err != 0) {
      pid_ = -1;
      return "cannot start " + args[0] + ": " + std::strerror(err);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        auto text = ReadWholeFile(log);
        return "redis-server exited at start: " + (text.ok() ? *text : std::string("(no log)"));
      }
      RawRedis r(port_, password_);
      if (r.ok() && r.Command({"PING"}) == "PONG") return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Kill();
    return "redis-server did not answer PING within 10 s";
  }

  std::unique_ptr<TempDir> dir_ = TempDir::Create("pacset-store").value();
  std::string password_;
  std::vector<std::string> extra_, resolved_extra_;
  int port_ = -1;
  pid_t pid_ = -1;
};

// A child process with its stdout on a pipe; SIGKILLed when this object goes
// (and by the kernel when the test process dies).
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Kill(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // False when the child could not be started (args[0] is a path: no $PATH
  // search).
  bool Spawn(const std::vector<std::string>& args, bool with_stderr = false) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    ChildOptions child;
    child.stdout_fd = fds[1];
    if (with_stderr) child.stderr_fd = fds[1];
    child.search_path = false;
    child.kill_with_parent = true;
    const int err = StartChild(args, child, &pid_);
    ::close(fds[1]);
    if (err != 0) {
      ::close(fds[0]);
      pid_ = -1;
      return false;
    }
    out_ = fds[0];
    return true;
  }
  // The first line the child prints, or "" if none within `timeout_ms`.
  std::string ReadLine(int timeout_ms) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char c;
      if (::read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }
  // Everything the child prints until it closes its output (or `timeout_ms`).
  std::string ReadAll(int timeout_ms) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status;
      (void)WaitForChild(pid_, &status);
      pid_ = -1;
    }
    if (out_ >= 0) {
      ::close(out_);
      out_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// The lines of a RawRedis reply that start with `prefix`, e.g. the
// "cluster_state:" line of CLUSTER INFO ("" if none).
inline std::string ReplyLine(const std::string& reply, const std::string& prefix) {
  size_t begin = 0;
  while (begin < reply.size()) {
    size_t end = reply.find_first_of("\r\n", begin);
    if (end == std::string::npos) end = reply.size();
    const std::string line = reply.substr(begin, end - begin);
    if (line.rfind(prefix, 0) == 0) return line;
    begin = end + 1;
  }
  return "";
}

// A real Redis Cluster on 127.0.0.1: `masters` masters with `replicas` replicas
// each, every node a redis-server on free ports (its cluster bus on another
// free port), made with `redis-cli --cluster create`. Killed when this goes.
class RedisCluster {
 public:
  // Empty on success, else why it failed.
  std::string Start(int masters = 3, int replicas = 1) {
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

  // redis-cluster://127.0.0.1:P,... with the first `seeds` nodes as seeds.
  std::string uri(size_t seeds = 3) const {
    std::string u = "redis-cluster://";
    for (size_t i = 0; i < std::min(seeds, nodes_.size()); ++i)
      u += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
    return u;
  }
  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_[i]; }

  // Ports of the live nodes that are masters now.
  std::vector<int> MasterPorts() {
    std::vector<int> out;
    for (const auto& n : nodes_) {
      if (n->pid() <= 0) continue;
      RawRedis r(n->port());
      if (r.Command({"ROLE"}).rfind("master", 0) == 0) out.push_back(n->port());
    }
    return out;
  }
  // The port of the live master that serves `key` ("MOVED" from the others).
  int MasterPortOf(const std::string& key) {
    for (int port : MasterPorts()) {
      RawRedis r(port);
      if (r.Command({"EXISTS", key}).rfind("MOVED", 0) != 0) return port;
    }
    return -1;
  }
  // Whether, within `timeout_ms`, every live node reports cluster_state:ok,
  // every live replica is in sync with its master, and every live node's
  // CLUSTER NODES lists every live replica as a live replica (what a client's
  // slot map learns from any node: before gossip reaches a node, it may still
  // list a new replica as a master of no slots).
  bool WaitHealthy(int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = true;
      std::vector<std::string> replica_ids;
      for (const auto& n : nodes_) {
        if (n->pid() <= 0) continue;
        RawRedis r(n->port());
        ok =
            ok && ReplyLine(r.Command({"CLUSTER", "INFO"}), "cluster_state:") == "cluster_state:ok";
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

 private:
  // Whether CLUSTER NODES text `view` has node `id` as a replica of some
  // master ("ID ADDR FLAGS MASTER-ID ..."), not flagged failed.
  static bool ListsLiveReplica(const std::string& view, const std::string& id) {
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

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

// One backend under test, with its own storage; can reach behind the store.
class StoreEnv {
 public:
  virtual ~StoreEnv() = default;
  virtual std::string Uri() const = 0;
  virtual StoreOptions Options() const {
    StoreOptions o;
    o.lease_ms = 600;
    o.busy_timeout_ms = 500;
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 2000;
    o.rocksdb_block_cache_bytes = 8u << 20;
    return o;
  }
  // Whether imports of other processes can run while this process writes.
  virtual bool ConcurrentWriterProcesses() const = 0;
  // The following reach the stored bytes directly; for rocksdb the store
  // must be closed. Empty string on success, else what failed.
  virtual std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) = 0;
  virtual std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) = 0;
  // Bytes of blocks physically stored (all forests, generations, leftovers).
  virtual uint64_t RawBlockBytes() = 0;
};

class RocksDbEnv final : public StoreEnv {
 public:
  std::string Uri() const override { return "rocksdb:" + path(); }
  bool ConcurrentWriterProcesses() const override { return false; }
  std::string path() const { return dir_->path() + "/store"; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override {
    return Modify(f, index, true);
  }
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override {
    return Modify(f, index, false);
  }
  uint64_t RawBlockBytes() override {
    rocksdb::DB* db = nullptr;
    rocksdb::Options o;
    if (!rocksdb::DB::OpenForReadOnly(o, path(), &db).ok()) return UINT64_MAX;
    std::unique_ptr<rocksdb::DB> holder(db);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    uint64_t bytes = 0;
    for (it->Seek("B"); it->Valid() && it->key()[0] == 'B'; it->Next()) bytes += it->value().size();
    return bytes;
  }

 private:
  std::string Modify(const ForestInfo& f, uint64_t index, bool corrupt) {
    rocksdb::DB* db = nullptr;
    rocksdb::Options o;
    rocksdb::Status s = rocksdb::DB::Open(o, path(), &db);
    if (!s.ok()) return s.ToString();
    std::unique_ptr<rocksdb::DB> holder(db);
    const std::string key = store_internal::RocksDbBlockKey(f.name, f.generation, index);
    std::string value;
    s = db->Get(rocksdb::ReadOptions(), key, &value);
    if (!s.ok()) return s.ToString();
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (corrupt) {
      value[value.size() / 2] ^= 0x01;
      s = db->Put(wo, key, value);
    } else {
      s = db->Delete(wo, key);
    }
    return s.ok() ? "" : s.ToString();
  }
  std::unique_ptr<TempDir> dir_ = TempDir::Create("pacset-store").value();
};

class DirEnv final : public StoreEnv {
 public:
  std::string Uri() const override { return "dir:" + path(); }
  bool ConcurrentWriterProcesses() const override { return true; }
  std::string path() const { return dir_->path() + "/store"; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override {
    const std::string file = path() + "/" + store_internal::DirGenerationFile(f.name, f.generation);
    int fd = ::open(file.c_str(), O_RDWR);
    if (fd < 0) return "open " + file + " failed";
    const off_t off = static_cast<off_t>(index * f.block_size + f.block_size / 2);
    char c;
    bool ok = ::pread(fd, &c, 1, off) == 1;
    c ^= 0x01;
    ok = ok && ::pwrite(fd, &c, 1, off) == 1;
    ::close(fd);
    return ok ? "" : "rewrite " + file + " failed";
  }
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override {
    // A file cut short: the block and everything after it is gone.
    const std::string file = path() + "/" + store_internal::DirGenerationFile(f.name, f.generation);
    return ::truncate(file.c_str(), static_cast<off_t>(index * f.block_size)) == 0
               ? ""
               : "truncate " + file + " failed";
  }
  uint64_t RawBlockBytes() override {
    uint64_t bytes = 0;
    auto names = ListDir(path() + "/forests");
    if (!names.ok()) return UINT64_MAX;
    for (const auto& n : *names) {
      auto files = ListDir(path() + "/forests/" + n);
      if (!files.ok()) continue;
      for (const auto& f : *files) {
        struct stat st;
        if (::stat((path() + "/forests/" + n + "/" + f).c_str(), &st) == 0) bytes += st.st_size;
      }
    }
    return bytes;
  }

 private:
  std::unique_ptr<TempDir> dir_ = TempDir::Create("pacset-store").value();
};

class RedisEnv final : public StoreEnv {
 public:
  // Empty on success.
  std::string Start() { return server_.Start(); }
  std::string Uri() const override { return server_.uri(); }
  bool ConcurrentWriterProcesses() const override { return true; }
  RedisServer& server() { return server_; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override {
    return CorruptRedisBlock(server_.port(), f, index);
  }
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override {
    return DeleteRedisBlock(server_.port(), f, index);
  }
  uint64_t RawBlockBytes() override { return BlockBytesOn(server_.port()); }

 private:
  RedisServer server_;
};

// A Redis Cluster of three masters with a replica each.
class RedisClusterEnv final : public StoreEnv {
 public:
  // Empty on success.
  std::string Start() { return cluster_.Start(3, 1); }
  std::string Uri() const override { return cluster_.uri(); }
  bool ConcurrentWriterProcesses() const override { return true; }
  RedisCluster& cluster() { return cluster_; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override {
    return CorruptRedisBlock(MasterPort(f, index), f, index);
  }
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override {
    return DeleteRedisBlock(MasterPort(f, index), f, index);
  }
  uint64_t RawBlockBytes() override {
    uint64_t bytes = 0;
    for (int port : cluster_.MasterPorts()) bytes += BlockBytesOn(port);
    return bytes;
  }

 private:
  int MasterPort(const ForestInfo& f, uint64_t index) {
    return cluster_.MasterPortOf(store_internal::RedisBlockKey(f.name, f.generation, index));
  }
  RedisCluster cluster_;
};

// "rocksdb", "dir", "redis" or "redis-cluster"; for the last two, *error says
// why the servers did not start.
inline std::unique_ptr<StoreEnv> MakeEnv(const std::string& backend, std::string* error) {
  error->clear();
  if (backend == "rocksdb") return std::make_unique<RocksDbEnv>();
  if (backend == "dir") return std::make_unique<DirEnv>();
  if (backend == "redis-cluster") {
    auto env = std::make_unique<RedisClusterEnv>();
    *error = env->Start();
    return env;
  }
  auto env = std::make_unique<RedisEnv>();
  *error = env->Start();
  return env;
}

}  // namespace store_test
}  // namespace pacset
