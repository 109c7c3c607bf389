#include "store/internal/file_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "util/string_util.h"

namespace pacset {
namespace store_internal {

StatusOr<UniqueFd> LockFile(const std::string& path, LockMode mode) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  // A reader without write permission can still take the lock: flock works on
  // a read-only descriptor.
  if (!fd.valid() && (errno == EACCES || errno == EROFS))
    fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("open lock file " + path, errno);
  const int op = mode == LockMode::kShared ? LOCK_SH : LOCK_EX;
  while (::flock(fd.get(), op) != 0) {
    if (errno != EINTR) return Status::FromErrno("lock " + path, errno);
  }
  return fd;
}

StatusOr<bool> TryLockExclusive(int fd, const std::string& what) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) return Status::FromErrno("lock " + what, errno);
  }
}

namespace {

// "NAME.GEN.OWNER" (NAME may contain dots; OWNER has none) -> NAME, GEN.
bool ParsePinFileName(const std::string& file, std::string* name, uint64_t* gen) {
  const size_t last = file.rfind('.');
  if (last == std::string::npos || last == 0 || last + 1 == file.size()) return false;
  const size_t mid = file.rfind('.', last - 1);
  if (mid == std::string::npos || mid == 0) return false;
  if (!ParseUint64(file.substr(mid + 1, last - mid - 1), gen)) return false;
  *name = file.substr(0, mid);
  return true;
}

std::atomic<uint64_t> next_pin_owner{0};

}  // namespace

PinFiles::PinFiles(std::string dir)
    : dir_(std::move(dir)),
      // PID-N: one process may hold several stores pinning the same generation.
      owner_(std::to_string(::getpid()) + "-" + std::to_string(next_pin_owner++)) {}

std::string PinFiles::PinFileName(const std::string& name, uint64_t gen) const {
  return name + "." + std::to_string(gen) + "." + owner_;
}

PinFiles::~PinFiles() {
  for (const auto& [key, held] : held_)
    ::unlink((dir_ + "/" + PinFileName(key.first, key.second)).c_str());
}

Status PinFiles::Pin(const std::string& name, uint64_t gen, bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  *created = false;
  Held& h = held_[{name, gen}];
  if (h.count > 0) {
    ++h.count;
    return Status::Ok();
  }
  const std::string path = dir_ + "/" + PinFileName(name, gen);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    held_.erase({name, gen});
    return Status::FromErrno("create pin file " + path, errno);
  }
  auto locked = TryLockExclusive(fd.get(), path);
  if (!locked.ok() || !*locked) {
    held_.erase({name, gen});
    if (!locked.ok()) return locked.status();
    return Status::Internal("pin file " + path + " is locked by another holder");
  }
  h.count = 1;
  h.fd = std::move(fd);
  *created = true;
  return Status::Ok();
}

Status PinFiles::Unpin(const std::string& name, uint64_t gen) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find({name, gen});
  if (it == held_.end())
    return Status::InvalidArgument("forest '" + name + "' generation " + std::to_string(gen) +
                                   " is not pinned by this process");
  if (--it->second.count > 0) return Status::Ok();
  const std::string path = dir_ + "/" + PinFileName(name, gen);
  ::unlink(path.c_str());  // before closing: nobody else can lock it while we hold it
  held_.erase(it);
  return Status::Ok();
}

StatusOr<std::set<std::pair<std::string, uint64_t>>> PinFiles::LivePins() {
  std::set<std::pair<std::string, uint64_t>> live;
  PACSET_ASSIGN_OR_RETURN(std::vector<std::string> files, ListDir(dir_));
  for (const auto& f : files) {
    std::string name;
    uint64_t gen;
    if (!ParsePinFileName(f, &name, &gen)) continue;
    const std::string path = dir_ + "/" + f;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;  // unpinned meanwhile
      return Status::FromErrno("open pin file " + path, errno);
    }
    PACSET_ASSIGN_OR_RETURN(bool free, TryLockExclusive(fd.get(), path));
    if (free) {
      ::unlink(path.c_str());  // its process died
    } else {
      live.insert({name, gen});
    }
  }
  return live;
}

namespace {

// File systems whose every change is made by this kernel, so inotify sees
// it. Not network or cluster file systems (NFS, CIFS, Ceph, FUSE, ...),
// where another host's writes raise no event.
bool ChangedOnlyByThisKernel(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return false;
  switch (static_cast<uint64_t>(fs.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // XFS
    case 0x9123683E:  // Btrfs
    case 0xF2F52010:  // F2FS
    case 0x2FC12FC1:  // ZFS
    case 0x01021994:  // tmpfs
    case 0x794C7630:  // overlayfs (containers)
      return true;
    default:
      return false;
  }
}

}  // namespace

StatusOr<DirectoryWatch> DirectoryWatch::Open(const std::string& dir) {
  if (!ChangedOnlyByThisKernel(dir))
    return Status::NotSupported("no inotify watch of " + dir +
                                ": not a local file system (or it cannot be read)");
  UniqueFd fd(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("inotify_init1 for " + dir, errno);
  constexpr uint32_t kChanges = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE |
                                IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
                                IN_ONLYDIR;
  if (inotify_add_watch(fd.get(), dir.c_str(), kChanges) < 0)
    return Status::FromErrno("inotify watch of " + dir, errno);
  return DirectoryWatch(std::move(fd));
}

bool DirectoryWatch::Changed() {
  if (gone_) return true;
  alignas(inotify_event) char buf[4096];
  bool changed = false;
  for (;;) {
    const ssize_t n = read(fd_.get(), buf, sizeof buf);
    if (n > 0) {
      changed = true;  // any event (IN_Q_OVERFLOW: some were lost)
      for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
        inotify_event ev;
        memcpy(&ev, buf + at, sizeof ev);
        if (ev.mask & IN_IGNORED) gone_ = true;  // the directory was removed or unmounted
        at += static_cast<ssize_t>(sizeof(inotify_event) + ev.len);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN: drained. Anything else: unknown, so changed.
    return changed || !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }
}

}  // namespace store_internal
}  // namespace pacset
