// Mounting through fusermount3 for a mount that goes away with its daemon
// (auto_unmount), started without fork().
//
// libfuse 3.14 mounts with auto_unmount by fork()ing and exec'ing
// fusermount3, which mounts, sends the /dev/fuse descriptor back over a
// socket pair and stays, watching the socket: when it closes (the daemon
// ended, however it ended) and the mount's connection is gone, it unmounts.
// The fork() copied the daemon's page tables and write-protected every page
// it had: each of the daemon's next writes to one of them faulted (a fresh
// daemon's first row paid for them). Here fusermount3 is started with
// posix_spawn (util/subprocess.h) and the descriptor it sends is given to
// libfuse as the mount point "/dev/fd/N".
//
// The protocol (fusermount3's own, libfuse 3.x): the program runs as
// `fusermount3 -o OPTIONS -- MOUNTPOINT` with _FUSE_COMMFD=N in its
// environment, N being its end of a SOCK_STREAM socket pair; it sends one
// byte with the descriptor as SCM_RIGHTS, or exits with an error (printed on
// its standard error) and the socket reads EOF. Its standard streams are not
// the daemon's: it outlives the start of the daemon, whose caller may wait
// for them to close; what it prints before it mounts is read from a pipe
// (the error of Mount).
#pragma once

#include <sys/types.h>

#include <string>

#include "util/file_io.h"
#include "util/status.h"

namespace pacset::fs_internal {

// The fusermount3 to run: /usr/bin/fusermount3 (where Debian's fuse3 puts it,
// and where libfuse looks first) if it is there and executable, else
// "fusermount3" to be found on $PATH as libfuse then does. A daemon whose
// $PATH holds a directory another user can write runs the system's program
// all the same.
const char* FusermountProgram();

class FusermountWatch {
 public:
  // Mounts a FUSE file system at `mountpoint` with the mount options
  // `options` ("rw,nosuid,nodev,fsname=...,auto_unmount", as fusermount3
  // takes them). *fuse_fd is the mount's /dev/fuse descriptor
  // (close-on-exec), the caller's to close; fusermount3 stays to watch.
  static StatusOr<FusermountWatch> Mount(const std::string& mountpoint, const std::string& options,
                                         int* fuse_fd);

  FusermountWatch(FusermountWatch&& o) noexcept : socket_(std::move(o.socket_)), pid_(o.pid_) {
    o.pid_ = -1;
  }
  FusermountWatch& operator=(FusermountWatch&&) = delete;
  ~FusermountWatch() { Finish(); }

  // Closes the socket and waits for fusermount3, which unmounts if the
  // mount's connection is gone, i.e. once every /dev/fuse descriptor of the
  // mount is closed: close the session's first. A mount someone else
  // unmounted, or one that still answers, is left as it is.
  void Finish();

 private:
  FusermountWatch(UniqueFd socket, pid_t pid) : socket_(std::move(socket)), pid_(pid) {}

  UniqueFd socket_;  // this end; fusermount3 holds the other
  pid_t pid_ = -1;
};

}  // namespace pacset::fs_internal
