#include "util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

extern char** environ;

namespace pacset {

bool WaitForChild(pid_t pid, int* wstatus) {
  for (;;) {
    if (waitpid(pid, wstatus, 0) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

namespace {

// posix_spawnp(args) with `actions` (destroyed here). 0 or the errno.
int Spawn(const std::vector<std::string>& args, posix_spawn_file_actions_t* actions, pid_t* pid) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawnp(pid, argv[0], actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(actions);
  return rc;
}

}  // namespace

int RunQuietly(const std::vector<std::string>& args) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = Spawn(args, &actions, &pid);
  int wstatus = 0;
  if (rc != 0 || !WaitForChild(pid, &wstatus)) return -1;
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}

namespace {

// RunCollecting and RunWritingTo: stdout to a pipe collected into *out, or
// (out_fd >= 0) straight to out_fd; stderr to a pipe collected into *err.
int RunAndCollect(const std::vector<std::string>& args, int out_fd, std::string* out,
                  std::string* err, int* exit_code) {
  int out_pipe[2] = {-1, -1}, err_pipe[2];
  if (out_fd < 0 && pipe2(out_pipe, O_CLOEXEC) != 0) return errno;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    if (out_fd < 0) {
      close(out_pipe[0]);
      close(out_pipe[1]);
    }
    return e;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd < 0 ? out_pipe[1] : out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  pid_t pid;
  const int rc = Spawn(args, &actions, &pid);
  if (out_fd < 0) close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    if (out_fd < 0) close(out_pipe[0]);
    close(err_pipe[0]);
    return rc;
  }
  // A bigger pipe: fewer wake-ups for a stream of hundreds of megabytes.
  if (out_fd < 0) (void)fcntl(out_pipe[0], F_SETPIPE_SZ, 1 << 20);
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  size_t used[2] = {out ? out->size() : 0, err->size()};
  int open_fds = out_fd < 0 ? 2 : 1;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      // Read straight into the sink's spare room (grown geometrically).
      std::string& sink = *sinks[i];
      if (sink.size() - used[i] < (1 << 20))
        sink.resize(std::max<size_t>(2 * sink.size(), used[i] + (4 << 20)));
      const ssize_t n = read(fds[i].fd, sink.data() + used[i], sink.size() - used[i]);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      used[i] += static_cast<size_t>(n);
    }
  }
  if (out) out->resize(used[0]);
  err->resize(used[1]);
  for (auto& p : fds)
    if (p.fd >= 0) close(p.fd);
  int wstatus = 0;
  if (!WaitForChild(pid, &wstatus)) return errno;
  *exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  return 0;
}

}  // namespace

int RunCollecting(const std::vector<std::string>& args, std::string* out, std::string* err,
                  int* exit_code) {
  return RunAndCollect(args, -1, out, err, exit_code);
}

int RunWritingTo(const std::vector<std::string>& args, int out_fd, std::string* err,
                 int* exit_code) {
  return RunAndCollect(args, out_fd, nullptr, err, exit_code);
}

}  // namespace pacset
