#include "fs/internal/fusermount.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

StatusOr<FusermountWatch> FusermountWatch::Mount(const std::string& mountpoint,
                                                 const std::string& options, int* fuse_fd) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return Status::FromErrno("socketpair for fusermount3", errno);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  ChildOptions child;
  child.keep_fds = {theirs.get()};
  child.env = {"_FUSE_COMMFD=" + std::to_string(theirs.get())};
  pid_t pid = -1;
  if (const int err = StartChild({"fusermount3", "-o", options, "--", mountpoint}, child, &pid);
      err != 0)
    return Status::FromErrno("cannot run fusermount3", err);
  theirs.reset();  // so that the socket reads EOF if fusermount3 exits
  FusermountWatch watch(std::move(ours), pid);
  *fuse_fd = ReceiveFd(watch.socket_.get());
  if (*fuse_fd < 0) {
    const int err = errno;
    int wstatus = 0;
    (void)WaitForChild(pid, &wstatus);
    watch.pid_ = -1;
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0)
      return Status::IOError("fusermount3 could not mount on " + mountpoint + " (exit status " +
                             std::to_string(WEXITSTATUS(wstatus)) + ")");
    return Status::FromErrno("no /dev/fuse descriptor from fusermount3", err);
  }
  return watch;
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
