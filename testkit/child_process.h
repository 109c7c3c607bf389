// Programs a test runs: a child process whose output the test reads, and the
// argument vector of an execv made before fork().
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pacset {
namespace store_test {

// execv's argument vector over `args` (which must outlive it), built before
// fork() so that the child calls nothing but async-signal-safe functions.
std::vector<char*> ExecArgv(std::vector<std::string>& args);

// A child process with its stdout on a pipe; SIGKILLed when this object goes
// (and by the kernel when the test process dies).
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Kill(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool Spawn(std::vector<std::string> args, bool with_stderr = false);
  // The first line the child prints, or "" if none within `timeout_ms`.
  std::string ReadLine(int timeout_ms);
  // Everything the child prints until it closes its output (or `timeout_ms`).
  std::string ReadAll(int timeout_ms);
  void Kill();

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

}  // namespace store_test
}  // namespace pacset
