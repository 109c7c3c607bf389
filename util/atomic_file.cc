#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <ctime>

#include "util/file_io.h"

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

StatusOr<std::unique_ptr<TempDir>> TempDir::Create(const std::string& prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/" +
                     prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::FromErrno("cannot create a temporary directory " + tmpl, errno);
  return std::unique_ptr<TempDir>(new TempDir(std::move(tmpl)));
}

TempDir::~TempDir() { RemoveTree(path_); }

}  // namespace pacset
