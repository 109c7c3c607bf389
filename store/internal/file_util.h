// File helpers private to the file-backed stores (rocksdb: and dir:):
// flock(2) locks, the per-process pin files described in
// store/block_store.h, and the alignment of their direct reads. The generic
// file helpers they use (UniqueFd, PreadFull, MakeDirs, ListDir, RemoveTree,
// FsyncDir, ...) are in util/file_io.h; atomic replace-by-rename and
// TempDir in util/atomic_file.h.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "util/file_io.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

// Offset, length and memory alignment of the backends' direct (O_DIRECT)
// reads (StoreOptions::direct_reads): a multiple of every logical sector
// size up to 4 KiB.
constexpr uint64_t kDirectReadAlign = 4096;

enum class LockMode { kShared, kExclusive };
// Opens (creating it if needed) and flocks `path`, waiting for the lock.
StatusOr<UniqueFd> LockFile(const std::string& path, LockMode mode);
// Non-blocking exclusive flock of an open file: true if acquired, false if
// another open file description holds a lock on it.
StatusOr<bool> TryLockExclusive(int fd, const std::string& what);

// Pins of one store object (directory PATH/pins), see store/block_store.h.
// Pin files are named NAME.GEN.PID-N (N numbers the store objects of a process).
class PinFiles {
 public:
  explicit PinFiles(std::string dir);
  // Removes this process's pin files (a crash leaves them, unlocked: stale).
  ~PinFiles();

  // Shared for Pin, exclusive for CollectGarbage (store/block_store.h).
  StatusOr<UniqueFd> LockShared() { return LockFile(dir_ + "/lock", LockMode::kShared); }
  StatusOr<UniqueFd> LockExclusive() { return LockFile(dir_ + "/lock", LockMode::kExclusive); }

  // Counted per process; the first pin creates and locks the pin file.
  // `*created` tells whether this call created it (so a failed existence
  // check can undo exactly that).
  Status Pin(const std::string& name, uint64_t gen, bool* created);
  Status Unpin(const std::string& name, uint64_t gen);

  // The generations pinned by live processes (this one included). Removes the
  // pin files of dead processes. Call with LockExclusive held.
  StatusOr<std::set<std::pair<std::string, uint64_t>>> LivePins();

 private:
  struct Held {
    int count = 0;
    UniqueFd fd;
  };
  std::string PinFileName(const std::string& name, uint64_t gen) const;

  std::string dir_;
  std::string owner_;
  std::mutex mu_;
  std::map<std::pair<std::string, uint64_t>, Held> held_;
};

// Whether the entries of one directory changed: an inotify watch of the
// files directly in it (created, written, renamed, removed, their attributes
// changed; not read or opened), so a caller learns it with one read(2) rather
// than by stat'ing them. Not recursive.
class DirectoryWatch {
 public:
  // An error when inotify is unavailable, its per-user limits are reached,
  // or `dir` is not on a local file system (on NFS, CIFS, FUSE, ... another
  // host's writes raise no event): callers then look at the files themselves.
  static StatusOr<DirectoryWatch> Open(const std::string& dir);

  // True when anything changed since the last call (since Open for the
  // first), or when that cannot be known (the kernel's event queue
  // overflowed, a read failed, the directory itself is gone: then always).
  // Consumes what it saw: a change made after this call starts is seen by
  // the next one. Not thread-safe.
  bool Changed();

 private:
  explicit DirectoryWatch(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  bool gone_ = false;
};

}  // namespace store_internal
}  // namespace pacset
