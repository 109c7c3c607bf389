// Programs a test runs: a child process whose output the test reads, started
// by util/subprocess.h's StartChild.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pacset {
namespace store_test {

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
  bool Spawn(const std::vector<std::string>& args, bool with_stderr = false);
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
