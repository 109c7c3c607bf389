#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <random>

namespace pacset {

Status WriteFileAtomically(const std::string& path, std::string_view contents, int mode) {
  std::random_device rd;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Status::FromErrno("cannot create " + tmp, errno);
  Status s;
  size_t done = 0;
  while (s.ok() && done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) s = Status::FromErrno("cannot write " + tmp, n < 0 ? errno : EIO);
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (s.ok() && ::fsync(fd) != 0) s = Status::FromErrno("cannot sync " + tmp, errno);
  if (::close(fd) != 0 && s.ok()) s = Status::FromErrno("cannot close " + tmp, errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = Status::FromErrno("cannot rename " + tmp + " to " + path, errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::FromErrno("cannot open directory " + dir, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return Status::FromErrno("cannot sync directory " + dir, err);
  return Status::Ok();
}

}  // namespace pacset
