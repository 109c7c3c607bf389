#include "testkit/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>

#include "util/subprocess.h"

namespace pacset {
namespace store_test {

bool ChildProcess::Spawn(const std::vector<std::string>& args, bool with_stderr) {
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

std::string ChildProcess::ReadLine(int timeout_ms) {
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

std::string ChildProcess::ReadAll(int timeout_ms) {
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

void ChildProcess::Kill() {
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

}  // namespace store_test
}  // namespace pacset
