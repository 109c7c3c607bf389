#include "fs/internal/fusermount.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "util/subprocess.h"

namespace pacset::fs_internal {
namespace {

// The descriptor fusermount3 sends: -1 once the socket reads EOF (it failed
// and exited), or with errno set when recvmsg fails.
int ReceiveFd(int socket) {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) errno = EPROTO;  // fusermount3 exited without sending one
  if (n <= 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      return fd;
    }
  }
  errno = EPROTO;
  return -1;
}

}  // namespace

const char* FusermountProgram() {
  static const char* const program =
      access("/usr/bin/fusermount3", X_OK) == 0 ? "/usr/bin/fusermount3" : "fusermount3";
  return program;
}

StatusOr<FusermountWatch> FusermountWatch::Mount(const std::string& mountpoint,
                                                 const std::string& options, int* fuse_fd) {
  int pair[2], err_pipe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return Status::FromErrno("socketpair for fusermount3", errno);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe for fusermount3", errno);
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  UniqueFd null(open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (!null.valid()) return Status::FromErrno("/dev/null", errno);
  ChildOptions child;
  child.keep_fds = {theirs.get()};
  child.env = {"_FUSE_COMMFD=" + std::to_string(theirs.get())};
  // It stays for the daemon's life: it must not hold the standard streams of
  // whoever started the daemon (a caller reading them would wait for it).
  // What it says when it fails comes through a pipe read only until then.
  child.stdout_fd = null.get();
  child.stderr_fd = err_write.get();
  pid_t pid = -1;
  if (const int err =
          StartChild({FusermountProgram(), "-o", options, "--", mountpoint}, child, &pid);
      err != 0)
    return Status::FromErrno("cannot run fusermount3", err);
  theirs.reset();  // so that the socket reads EOF if fusermount3 exits
  err_write.reset();
  FusermountWatch watch(std::move(ours), pid);
  *fuse_fd = ReceiveFd(watch.socket_.get());
  if (*fuse_fd >= 0) return watch;
  const int err = errno;
  int wstatus = 0;
  (void)WaitForChild(pid, &wstatus);
  watch.pid_ = -1;
  std::string said;  // it has exited: the pipe reads to EOF
  char buf[512];
  ssize_t n;
  while (said.size() < 4096 &&
         ((n = read(err_read.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0) said.append(buf, static_cast<size_t>(n));
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
  if (!said.empty()) return Status::IOError("cannot mount on " + mountpoint + ": " + said);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0)
    return Status::IOError("cannot mount on " + mountpoint + ": fusermount3 exited with status " +
                           std::to_string(WEXITSTATUS(wstatus)));
  return Status::FromErrno("cannot mount on " + mountpoint + ": no descriptor from fusermount3",
                           err);
}

void FusermountWatch::Finish() {
  socket_.reset();
  if (pid_ > 0) {
    int wstatus = 0;
    (void)WaitForChild(pid_, &wstatus);
    pid_ = -1;
  }
}

}  // namespace pacset::fs_internal
