#include "util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "util/file_io.h"

extern char** environ;

namespace pacset {

bool WaitForChild(pid_t pid, int* wstatus) {
  for (;;) {
    if (waitpid(pid, wstatus, 0) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

namespace {

// The paths execvp tries for `file`, in order (ChildOptions::search_path).
std::vector<std::string> ExecPaths(const std::string& file, bool search_path) {
  if (!search_path || file.find('/') != std::string::npos) return {file};
  const char* env_path = std::getenv("PATH");
  const std::string dirs = env_path != nullptr ? env_path : "/bin:/usr/bin";
  std::vector<std::string> paths;
  size_t begin = 0;
  for (;;) {
    const size_t end = dirs.find(':', begin);
    const std::string dir = dirs.substr(begin, end == std::string::npos ? end : end - begin);
    paths.push_back(dir.empty() ? file : dir + "/" + file);
    if (end == std::string::npos) return paths;
    begin = end + 1;
  }
}

// Whether execvp goes on to the next directory after an exec failed with `err`.
bool TryNextPath(int err) {
  return err == EACCES || err == ENOENT || err == ESTALE || err == ENOTDIR || err == ENODEV ||
         err == ETIMEDOUT;
}

// Everything the child of StartChild uses, made before fork().
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> sh_argv;  // "/bin/sh", (the path), args[1..]: run_scripts_with_sh
  char** envp = nullptr;
  std::vector<char*> env_storage;
  std::vector<std::string> path_storage;
  std::vector<char*> paths;
};

// Sends `err` to the parent and ends the child.
[[noreturn]] void FailChild(int report_fd, int err) {
  (void)!::write(report_fd, &err, sizeof err);
  ::_exit(127);
}

// dup2(from, to) in the child; from == to only clears close-on-exec.
bool Redirect(int from, int to) {
  if (from < 0) return true;
  if (from == to) {
    const int flags = ::fcntl(to, F_GETFD);
    return flags >= 0 && ::fcntl(to, F_SETFD, flags & ~FD_CLOEXEC) == 0;
  }
  for (;;) {
    if (::dup2(from, to) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

// The child between fork() and exec: async-signal-safe calls only. It
// starts with every signal blocked; `mask` is the one to run the program
// with.
[[noreturn]] void RunChild(ChildPlan& plan, const ChildOptions& options, int report_fd,
                           const sigset_t& mask) {
  if (options.kill_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // No handler of this program may run in the child (as posix_spawn does):
  // back to SIG_DFL, which exec would do anyway; ignored signals stay ignored.
  for (int signo = 1; signo < NSIG; ++signo) {
    struct sigaction action;
    if (::sigaction(signo, nullptr, &action) != 0 || action.sa_handler == SIG_IGN ||
        action.sa_handler == SIG_DFL)
      continue;
    action.sa_handler = SIG_DFL;
    action.sa_flags = 0;
    ::sigaction(signo, &action, nullptr);
  }
  for (const auto& [signo, action] : options.signal_actions) ::sigaction(signo, &action, nullptr);
  if (!Redirect(options.stdout_fd, STDOUT_FILENO) || !Redirect(options.stderr_fd, STDERR_FILENO))
    FailChild(report_fd, errno);
  for (int fd : options.keep_fds)
    if (!Redirect(fd, fd)) FailChild(report_fd, errno);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  bool eacces = false;
  int err = ENOENT;
  for (char* path : plan.paths) {
    ::execve(path, plan.argv.data(), plan.envp);
    if (errno == ENOEXEC && !plan.sh_argv.empty()) {
      plan.sh_argv[1] = path;
      ::execve(plan.sh_argv[0], plan.sh_argv.data(), plan.envp);
    }
    err = errno;
    if (!TryNextPath(err)) FailChild(report_fd, err);
    if (err == EACCES) eacces = true;
  }
  FailChild(report_fd, eacces ? EACCES : err);
}

// StartChild for a child that needs no code of ours run in it. One spawn:
// posix_spawnp looks for the program in the child, by execvp's rules (one
// spawn a directory of $PATH took a process each).
int SpawnChild(ChildPlan& plan, const ChildOptions& options, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  if (const int err = posix_spawn_file_actions_init(&actions); err != 0) return err;
  // adddup2(fd, fd) clears close-on-exec in the child (glibc >= 2.29).
  int err = 0;
  if (options.stdout_fd >= 0)
    err = posix_spawn_file_actions_adddup2(&actions, options.stdout_fd, STDOUT_FILENO);
  if (err == 0 && options.stderr_fd >= 0)
    err = posix_spawn_file_actions_adddup2(&actions, options.stderr_fd, STDERR_FILENO);
  for (int fd : options.keep_fds)
    if (err == 0) err = posix_spawn_file_actions_adddup2(&actions, fd, fd);
  if (err == 0) {
    err = options.search_path
              ? posix_spawnp(pid, plan.argv[0], &actions, nullptr, plan.argv.data(), plan.envp)
              : posix_spawn(pid, plan.argv[0], &actions, nullptr, plan.argv.data(), plan.envp);
  }
  posix_spawn_file_actions_destroy(&actions);
  return err;
}

}  // namespace

int StartChild(const std::vector<std::string>& args, const ChildOptions& options, pid_t* pid) {
  if (args.empty() || args[0].empty()) return ENOENT;
  ChildPlan plan;
  for (const std::string& a : args) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  if (options.run_scripts_with_sh) {
    static char kShell[] = "/bin/sh";
    plan.sh_argv.push_back(kShell);
    plan.sh_argv.insert(plan.sh_argv.end(), plan.argv.begin(), plan.argv.end());
  }
  plan.envp = environ;
  if (!options.env.empty()) {
    // This process's variables but those `options.env` sets, then those.
    auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const bool replaced =
          std::any_of(options.env.begin(), options.env.end(),
                      [&](const std::string& v) { return name_of(v) == name_of(*e); });
      if (!replaced) plan.env_storage.push_back(*e);
    }
    for (const std::string& v : options.env)
      plan.env_storage.push_back(const_cast<char*>(v.c_str()));
    plan.env_storage.push_back(nullptr);
    plan.envp = plan.env_storage.data();
  }
  if (!options.kill_with_parent && options.signal_actions.empty() && !options.run_scripts_with_sh)
    return SpawnChild(plan, options, pid);
  plan.path_storage = ExecPaths(args[0], options.search_path);
  for (std::string& p : plan.path_storage) plan.paths.push_back(p.data());

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return errno;
  if (report[1] <= STDERR_FILENO) {
    // Standard streams were closed: keep the report off the descriptors the
    // child redirects.
    const int high = ::fcntl(report[1], F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    const int err = errno;
    ::close(report[1]);
    if (high < 0) {
      ::close(report[0]);
      return err;
    }
    report[1] = high;
  }
  // Signals stay blocked in the child until its handlers are reset.
  sigset_t all, mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &mask);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    RunChild(plan, options, report[1], mask);
  }
  const int fork_err = errno;
  pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  ::close(report[1]);
  if (child < 0) {
    ::close(report[0]);
    return fork_err;
  }
  // EOF (the pipe closed at exec) or the errno of a child that could not exec.
  int child_err = 0;
  size_t got = 0;
  while (got < sizeof child_err) {
    const ssize_t n =
        ::read(report[0], reinterpret_cast<char*>(&child_err) + got, sizeof child_err - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(report[0]);
  if (got != 0) {
    int wstatus = 0;
    (void)WaitForChild(child, &wstatus);
    return child_err != 0 ? child_err : EIO;
  }
  *pid = child;
  return 0;
}

int RunQuietly(const std::vector<std::string>& args) {
  UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (!null.valid()) return -1;
  ChildOptions options;
  options.stderr_fd = null.get();
  pid_t pid;
  int wstatus = 0;
  if (StartChild(args, options, &pid) != 0 || !WaitForChild(pid, &wstatus)) return -1;
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
  ChildOptions options;
  options.stdout_fd = out_fd < 0 ? out_pipe[1] : out_fd;
  options.stderr_fd = err_pipe[1];
  pid_t pid;
  const int rc = StartChild(args, options, &pid);
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
