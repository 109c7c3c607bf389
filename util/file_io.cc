#include "util/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace pacset {
namespace {

// The kind of a file that is not a regular file, for error messages.
const char* FileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

Status NotRegular(const std::string& path, mode_t mode) {
  return Status::InvalidArgument(path + " is " + FileTypeName(mode) + ", not a regular file");
}

// Reads `fd` until EOF into a string; `path` names it in errors.
StatusOr<std::string> ReadToEnd(int fd, const std::string& path) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + path, errno);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

StatusOr<size_t> PreadUpTo(int fd, char* buf, size_t n, uint64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + what, errno);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

Status PreadFull(int fd, char* buf, size_t n, uint64_t offset, const std::string& what) {
  PACSET_ASSIGN_OR_RETURN(const size_t done, PreadUpTo(fd, buf, n, offset, what));
  if (done < n)
    return Status::Corruption(what + ": file ends at byte " + std::to_string(offset + done) +
                              ", expected " + std::to_string(n - done) + " more bytes");
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

StatusOr<UniqueFd> OpenRegularFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    // A socket cannot be opened (ENXIO, "No such device or address"): say
    // what it is. stat here only words the message; nothing is opened.
    struct stat st;
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return NotRegular(path, st.st_mode);
    return Status::FromErrno("cannot open " + path, err);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  // Reads of a regular file do not look at O_NONBLOCK, but a FUSE daemon sees
  // the flags: clear it so the descriptor is an ordinary blocking one.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
    return Status::FromErrno("cannot open " + path, errno);
  return fd;
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("open " + path, errno);
  return ReadToEnd(fd.get(), path);
}

StatusOr<std::string> ReadWholeRegularFile(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path));
  return ReadToEnd(fd.get(), path);
}

FdStreambuf::int_type FdStreambuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  for (;;) {
    const ssize_t r = ::read(fd_, buf_, sizeof buf_);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) error_ = errno;
    if (r <= 0) return traits_type::eof();
    read_ += static_cast<uint64_t>(r);
    setg(buf_, buf_, buf_ + r);
    return traits_type::to_int_type(*gptr());
  }
}

FdStreambuf::pos_type FdStreambuf::seekoff(off_type off, std::ios_base::seekdir dir,
                                           std::ios_base::openmode which) {
  if (off != 0 || dir != std::ios_base::cur || !(which & std::ios_base::in))
    return pos_type(off_type(-1));
  return pos_type(static_cast<off_type>(read_ - static_cast<uint64_t>(egptr() - gptr())));
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return DirName(buf);
}

bool MakeAbsolute(std::string* path) {
  if (!path->empty() && (*path)[0] == '/') return true;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return false;
  *path = std::string(cwd) + "/" + *path;
  return true;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("empty directory path");
  if (IsDirectory(path)) return Status::Ok();
  if (PathExists(path)) return Status::InvalidArgument(path + " exists and is not a directory");
  const std::string parent = DirName(path);
  if (parent != path) PACSET_RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::FromErrno("create directory " + path, errno);
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::FromErrno("list directory " + dir, errno);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

namespace {

// Removes the entries of the open directory `fd` (closed here), recursively.
// The names are read first and removed after: removing entries while
// readdir walks a directory may make it skip others on some file systems.
void RemoveContents(int fd) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
  for (const std::string& name : names) {
    // unlinkat without AT_REMOVEDIR removes anything but a directory (EISDIR).
    if (::unlinkat(::dirfd(d), name.c_str(), 0) == 0 || errno != EISDIR) continue;
    const int sub =
        ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) RemoveContents(sub);
    ::unlinkat(::dirfd(d), name.c_str(), AT_REMOVEDIR);
  }
  ::closedir(d);
}

}  // namespace

void RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::unlink(path.c_str());
    return;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) RemoveContents(fd);
  ::rmdir(path.c_str());
}

Status FsyncFd(int fd, const std::string& what) {
  if (::fsync(fd) != 0) return Status::FromErrno("fsync " + what, errno);
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open directory " + dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Status::FromErrno("cannot sync directory " + dir, err);
  return Status::Ok();
}

}  // namespace pacset
