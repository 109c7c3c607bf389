#include "util/file_io.h"

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

}  // namespace pacset
