#include "testkit/redis_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "testkit/free_port.h"
#include "testkit/raw_redis.h"
#include "util/file_io.h"
#include "util/subprocess.h"

namespace pacset {
namespace store_test {

std::string RedisServerBinary() {
  const char* env = std::getenv("PACSET_REDIS_SERVER");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/redis-server";
}

std::string RedisServer::Start(const std::string& password, std::vector<std::string> extra) {
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

void RedisServer::ShutdownSave() {
  if (pid_ <= 0) return;
  RawRedis r(port_, password_);
  r.Command({"SHUTDOWN", "SAVE"});
  Reap();
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  Reap();
}

void RedisServer::Reap() {
  int status;
  (void)WaitForChild(pid_, &status);
  pid_ = -1;
}

std::string RedisServer::Launch() {
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

}  // namespace store_test
}  // namespace pacset
