#include "util/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace pacset {

Status PreadFull(int fd, char* buf, size_t n, uint64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + what, errno);
    }
    if (r == 0)
      return Status::Corruption(what + ": file ends at byte " + std::to_string(offset + done) +
                                ", expected " + std::to_string(n - done) + " more bytes");
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status PwriteFull(int fd, const char* buf, size_t n, uint64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + what, errno);
    }
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return Status::FromErrno("read " + path, e);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

}  // namespace pacset
