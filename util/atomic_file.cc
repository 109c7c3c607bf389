#include "util/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace pacset {
namespace {

// 16 hex digits from the kernel's random pool (no state to seed or share).
std::string RandomSuffix() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
    // Without getrandom, the address of a stack variable and the time still
    // vary; uniqueness is enforced by O_EXCL anyway.
    v = reinterpret_cast<uintptr_t>(&v) ^ static_cast<uint64_t>(::time(nullptr)) ^
        (static_cast<uint64_t>(::getpid()) << 32);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = kHex[(v >> (4 * i)) & 15];
  return s;
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("cannot write " + what, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path, int mode) {
  if (path.empty()) return Status::InvalidArgument("empty output path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
      return std::unique_ptr<AtomicFile>(new AtomicFile(path, path, fd));
    }
    if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + " is a directory");
    if (!S_ISREG(st.st_mode))
      return Status::InvalidArgument(path + " is not a regular file, a character device or a FIFO");
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string temp = path + ".tmp-" + RandomSuffix();
    const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          static_cast<mode_t>(mode));
    if (fd >= 0) return std::unique_ptr<AtomicFile>(new AtomicFile(path, std::move(temp), fd));
    if (errno != EEXIST) return Status::FromErrno("cannot create " + temp, errno);
  }
  return Status::AlreadyExists("cannot create a temporary file beside " + path +
                               ": 100 random names were all taken");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !writes_through()) ::unlink(temp_.c_str());
}

Status AtomicFile::Commit() {
  if (committed_ || fd_ < 0) return Status::Internal(path_ + ": committed twice");
  const int fd = fd_;
  fd_ = -1;
  if (writes_through()) {
    committed_ = true;
    if (::close(fd) != 0) return Status::FromErrno("cannot write " + path_, errno);
    return Status::Ok();
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("cannot sync " + temp_, err);
  }
  if (::close(fd) != 0) return Status::FromErrno("cannot write " + temp_, errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    return Status::FromErrno("cannot rename " + temp_ + " to " + path_, errno);
  committed_ = true;
  return FsyncDir(DirName(path_));
}

Status WriteFileAtomically(const std::string& path, std::string_view contents, int mode) {
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::Create(path, mode));
  PACSET_RETURN_IF_ERROR(WriteAll(file->fd(), contents, file->temp_path()));
  return file->Commit();
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

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

StatusOr<std::unique_ptr<TempDir>> TempDir::Create(const std::string& prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/" +
                     prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::FromErrno("cannot create a temporary directory " + tmpl, errno);
  return std::unique_ptr<TempDir>(new TempDir(std::move(tmpl)));
}

namespace {

// Removes the entries of the open directory `fd` (closed here), recursively.
void RemoveContents(int fd) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0 || errno != EISDIR) continue;
    const int sub =
        ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) RemoveContents(sub);
    ::unlinkat(::dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  ::closedir(d);
}

}  // namespace

TempDir::~TempDir() {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) RemoveContents(fd);
  ::rmdir(path_.c_str());
}

}  // namespace pacset
