// Creating files whose paths come from outside (pack -o, export -o, predict
// --output, trace merges and reports, store catalogs) so that a crash, a
// failure or another user can never leave a torn file or write through a
// name they planted.
//
// AtomicFile writes a new file beside its destination and renames it over
// the destination on Commit(): readers see the old file or the whole new
// one. The temporary file gets a fresh random name, opened
// O_CREAT|O_EXCL|O_NOFOLLOW: a name planted by someone else (a symlink to a
// victim, a hard link, a FIFO) is never opened, a new name is drawn instead.
// rename() replaces a symlink at the destination rather than following it,
// so whatever the destination is, no other file is written.
//
// An existing destination that is a character device or a FIFO (/dev/null,
// /dev/stdout, a named pipe) cannot be replaced by a regular file: it is
// opened for writing without creating or truncating anything, and Commit()
// only flushes. A block device or a directory is refused.
//
// TempDir is a private directory (mkdtemp: random name, mode 0700) under
// $TMPDIR or /tmp for files that are not anyone's output, e.g. the .pac that
// `pacset import` packs on its way into a store, a RocksDB secondary's files,
// the request marks of `pacset-trace record`, and the tests' scratch space:
// the one place that picks a temporary directory.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace pacset {

// Thread-compatible (one thread at a time).
class AtomicFile {
 public:
  // Creates the temporary file for `path` (`mode` less the umask).
  static StatusOr<std::unique_ptr<AtomicFile>> Create(const std::string& path, int mode = 0644);
  // Removes the temporary file unless Commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Where to write (pwrite, mmap, fdopen(dup(fd))). Owned: do not close.
  int fd() const { return fd_; }
  // The destination, and the file being written (equal when written through).
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }
  // True when the destination is a device or FIFO written in place.
  bool writes_through() const { return temp_ == path_; }

  // fsyncs and closes the file, renames it over the destination and fsyncs
  // the directory. On failure the destination is untouched and the
  // temporary file is removed. Call at most once.
  Status Commit();

 private:
  AtomicFile(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  std::string path_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `contents` to `path` through an AtomicFile: on error `path` is
// untouched and the temporary file removed.
Status WriteFileAtomically(const std::string& path, std::string_view contents, int mode = 0644);

// Thread-compatible.
class TempDir {
 public:
  // mkdtemp("$TMPDIR/PREFIX-XXXXXX"), $TMPDIR (unset or empty) defaulting
  // to /tmp. Errors: "cannot create a temporary directory TEMPLATE: ...".
  static StatusOr<std::unique_ptr<TempDir>> Create(const std::string& prefix);
  // Removes the directory and everything in it (RemoveTree, util/file_io.h).
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace pacset
