// A real redis-server for a test, on a free loopback port with its own data
// directory.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "util/atomic_file.h"

namespace pacset {
namespace store_test {

// $PACSET_REDIS_SERVER, else /usr/bin/redis-server.
std::string RedisServerBinary();

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
  std::string Start(const std::string& password = "", std::vector<std::string> extra = {});
  // Starts again on the same port and directory (data saved by ShutdownSave is reloaded).
  std::string Restart() { return Launch(); }
  // SHUTDOWN SAVE: writes dump.rdb into the data directory and exits.
  void ShutdownSave();
  void Kill();
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_->path(); }

 private:
  void Reap();
  std::string Launch();

  std::unique_ptr<TempDir> dir_ = TempDir::Create("pacset-store").value();
  std::string password_;
  std::vector<std::string> extra_, resolved_extra_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace store_test
}  // namespace pacset
