// Running other programs and waiting for them: the one place that starts a
// child process. Its users: the scikit-learn exporter (model import),
// fusermount3 (unmount), the command `pacset-trace record` traces, and the
// servers and helper programs of the tests (testkit/redis_server.h,
// testkit/child_process.h), and fusermount3 for a mount that unmounts when
// its daemon dies (fs/fusermount.cc).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace pacset {

// waitpid(pid) until it returns something other than EINTR. The wait status
// (for WIFEXITED and friends) in *wstatus; false (errno set) when waitpid fails.
bool WaitForChild(pid_t pid, int* wstatus);

// How StartChild sets up a child before it runs its program.
struct ChildOptions {
  // Descriptors of this process that become the child's standard output and
  // standard error (dup2: stdout first, then stderr, so one descriptor may
  // serve both); -1 leaves the child this process's. Every other descriptor
  // is inherited as it is: open the ones the child must not keep O_CLOEXEC.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // args[0] without a '/' is looked up in $PATH by execvp's rules (an empty
  // element is the working directory; without $PATH, /bin:/usr/bin; a file
  // found but not executable is skipped, EACCES if nothing else is found).
  // Off: args[0] is the path, relative to the working directory.
  bool search_path = true;
  // Also execvp's: a file found that is no executable format (ENOEXEC, e.g.
  // a script without "#!") is run by /bin/sh. posix_spawnp does not do this.
  bool run_scripts_with_sh = false;
  // "NAME=VALUE" entries the child's environment has in place of, or besides,
  // this process's variables of those names.
  std::vector<std::string> env;
  // Signal dispositions the child installs before it runs its program, e.g.
  // to give back the ones this process changed for the time of the child's
  // run (handlers become SIG_DFL at exec; SIG_IGN stays).
  std::vector<std::pair<int, struct sigaction>> signal_actions;
  // The kernel SIGKILLs the child when the thread that started it ends
  // (prctl PR_SET_PDEATHSIG): test servers that must not outlive a crashed
  // test.
  bool kill_with_parent = false;
  // Descriptors the child keeps although they are close-on-exec here (the
  // flag is cleared in the child only, so no other child started meanwhile
  // inherits them): a socket the program is told of by number.
  std::vector<int> keep_fds;
};

// Starts args[0] with arguments `args` as set out by `options`. Returns 0
// once the child runs its program, with its pid in *pid (wait for it with
// WaitForChild); else the errno of what failed -- fork, a redirection, or
// exec (ENOENT: not found; EACCES: not executable), in which case no child
// is left (one whose exec failed has been waited for).
//
// A child that needs none of kill_with_parent, signal_actions and
// run_scripts_with_sh is started with posix_spawn(p): glibc's
// clone(CLONE_VM | CLONE_VFORK) copies none of this process's page tables,
// where fork() copies them all and write-protects every page this process
// has, so that each of its next writes to one faults. A process holding
// 2 GiB (the Python package importing a scikit-learn model, whose exporter
// runs here) took 120-270 ms to start `true` with fork() and 1.3-1.7 s of
// faults (524,288) writing its memory after; 1-8 ms and none spawned
// (2026-12-07, this VM). The others fork().
//
// Safe in a threaded program: everything the child needs (argument vector,
// environment, the paths to try) is built before it starts, because another
// thread may hold the allocator's lock at that moment; after fork() the
// child calls only async-signal-safe functions (prctl, sigaction,
// sigprocmask, dup2, fcntl, execve, write, _exit) until its program runs.
// Either way no signal handler of this program runs in the child (they are
// SIG_DFL before signals are unblocked; ignored signals stay ignored), and
// the program starts with this thread's signal mask. A fork()'s exec failure
// reaches the parent through a close-on-exec pipe.
int StartChild(const std::vector<std::string>& args, const ChildOptions& options, pid_t* pid);

// Runs args[0] (searched on PATH) with stdin and stdout inherited and stderr
// sent to /dev/null, and waits. Returns the exit status; -1 when the program
// could not be started, was killed by a signal or could not be waited for.
int RunQuietly(const std::vector<std::string>& args);

// Runs args[0] (searched on PATH) with stdout and stderr to pipes and
// collects both into *out and *err (poll, so a chatty stderr cannot block a
// stream on stdout). *exit_code is the exit status, or -1 when killed by a
// signal. Returns 0, or the errno when the program could not be started.
int RunCollecting(const std::vector<std::string>& args, std::string* out, std::string* err,
                  int* exit_code);

// Like RunCollecting, but stdout is the open file `out_fd` (a memfd or a
// regular file; its offset advances as the program writes): a stream of
// hundreds of megabytes lands in place, with no pipe copy and no growing
// buffer. stderr is collected into *err.
int RunWritingTo(const std::vector<std::string>& args, int out_fd, std::string* err,
                 int* exit_code);

}  // namespace pacset
