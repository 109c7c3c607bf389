// Running other programs and waiting for them, with EINTR handled: the
// scikit-learn exporter (model import), fusermount3 (unmount), the command
// `pacset-trace record` traces, the daemon a mount forks.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pacset {

// waitpid(pid) until it returns something other than EINTR. The wait status
// (for WIFEXITED and friends) in *wstatus; false (errno set) when waitpid fails.
bool WaitForChild(pid_t pid, int* wstatus);

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
