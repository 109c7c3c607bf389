// The project's file helpers, one home each: an owning descriptor;
// whole-buffer positional reads and writes (retrying short transfers and
// EINTR), shared by the .pac reader (layout/) and the file-backed stores;
// reading a whole file; opening a model or .pac file (a regular file and
// nothing else); path names; directories; fsync. Writing a file atomically
// and private temporary directories are in util/atomic_file.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <streambuf>
#include <string>
#include <vector>

#include "util/status.h"

namespace pacset {

// Owns a file descriptor; closing it drops any flock held through it.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// pread/pwrite of exactly n bytes. PreadFull reports a short file as
// kCorruption naming `what`; an OS error is kIOError "read <what>: <strerror>".
Status PreadFull(int fd, char* buf, size_t n, uint64_t offset, const std::string& what);
Status PwriteFull(int fd, const char* buf, size_t n, uint64_t offset, const std::string& what);

// pread of up to n bytes: fewer only at the end of the file. Returns how many.
StatusOr<size_t> PreadUpTo(int fd, char* buf, size_t n, uint64_t offset, const std::string& what);

// Opens `path` for reading if it is a regular file, and refuses anything else
// at once: the one way to open a model or a .pac file. A FIFO would block the
// open until a writer appears (forever if none does), a character device such
// as /dev/zero never ends, a directory or a socket fails later and less
// clearly. So the path is opened with O_NONBLOCK (a FIFO opens without
// waiting), O_NOCTTY (a terminal does not become the controlling one) and
// O_CLOEXEC, its type is checked with fstat on the descriptor -- not stat on
// the path, which another process could replace between the check and the
// open -- and O_NONBLOCK is cleared again before the descriptor is returned.
// Errors: "cannot open PATH: <strerror>" (kNotFound when missing);
// kInvalidArgument "PATH is a FIFO, not a regular file" (or a directory, a
// character device, a block device, a socket).
StatusOr<UniqueFd> OpenRegularFile(const std::string& path);

// The whole contents of the file at `path` (read until EOF, so it works on
// pipes and on files whose size is not known in advance, e.g. FUSE files).
// Errors: "open PATH: <strerror>" (kNotFound when missing), "read PATH: ...".
StatusOr<std::string> ReadWholeFile(const std::string& path);

// The whole contents of a model file: OpenRegularFile, then read until EOF
// (a regular file's size bounds the read; /proc-like files report size 0).
StatusOr<std::string> ReadWholeRegularFile(const std::string& path);

// A std::streambuf that reads a descriptor (not owned) from its current
// offset, for readers that take a std::istream (cereal) of a file opened with
// OpenRegularFile. It reads forward only: tellg() is the count of bytes
// consumed, other seeks fail. A read error ends the stream; error() then
// holds its errno.
class FdStreambuf : public std::streambuf {
 public:
  explicit FdStreambuf(int fd) : fd_(fd) {}
  int error() const { return error_; }

 protected:
  int_type underflow() override;
  pos_type seekoff(off_type off, std::ios_base::seekdir dir,
                   std::ios_base::openmode which) override;

 private:
  int fd_;
  int error_ = 0;
  uint64_t read_ = 0;  // bytes read from fd_ so far (the buffer's end)
  char buf_[65536];
};

// ---- Path names (text: no file is looked up) ----

// The part before the last '/': "a/b/c" -> "a/b", "c" -> ".", "/c" -> "/".
std::string DirName(const std::string& path);
// The part after the last '/': "a/b/c" -> "c", "c" -> "c", "a/b/" -> "".
std::string BaseName(const std::string& path);
// Makes a relative *path absolute by putting the working directory and a '/'
// before it (an empty path becomes "CWD/"); an absolute one stays as it is.
// Text only: ".", ".." and symlinks are kept. False, with errno set and
// *path untouched, when getcwd fails (e.g. the working directory was removed).
bool MakeAbsolute(std::string* path);

// The directory of the running program (/proc/self/exe, symlinks resolved):
// where the files installed next to it are found. "" if unknown.
std::string ExecutableDir();

// ---- Directories ----

// Whether `path` is a directory, or a symlink to one (stat).
bool IsDirectory(const std::string& path);
// Whether anything is at `path`; a dangling symlink counts (lstat).
bool PathExists(const std::string& path);
// mkdir -p, new directories mode 0755 less the umask. An existing directory
// is fine. Errors: kInvalidArgument "empty directory path", or "P exists and
// is not a directory" for `path` or a parent P; "create directory P: ...".
Status MakeDirs(const std::string& path);
// The names in `dir` except "." and "..", in no particular order.
// Errors: "list directory DIR: <strerror>".
StatusOr<std::vector<std::string>> ListDir(const std::string& dir);
// rm -r: removes `path` -- a file, a symlink (never what it points to), or a
// directory with everything in it. A missing path is fine. Best effort: what
// cannot be removed (no permission) stays, silently. Symlinks below `path`
// are never followed, even one planted in place of a directory mid-walk
// (the walk goes through directory descriptors opened O_NOFOLLOW).
void RemoveTree(const std::string& path);

// ---- Durability ----

// fsync(2) of an open file. Errors: "fsync WHAT: <strerror>".
Status FsyncFd(int fd, const std::string& what);
// fsync(2) of a directory, making a rename or create in it durable.
// Errors: "cannot open directory DIR: ...", "cannot sync directory DIR: ...".
Status FsyncDir(const std::string& dir);

}  // namespace pacset
