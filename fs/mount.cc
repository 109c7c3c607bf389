// Mount lifecycle: checks before mounting, the store, the FUSE session,
// daemonizing, serving until unmounted; unmounting; helper processes.
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fs/internal/filesystem.h"
#include "fs/internal/fusermount.h"
#include "fs/internal/log.h"
#include "fs/internal/serve.h"
#include "fs/pacsetfs.h"
#include "protocol/control.h"
#include "store/block_store.h"
#include "trace/trace_writer.h"
#include "util/file_io.h"
#include "util/parallel.h"
#include "util/subprocess.h"

namespace pacset {
namespace {

using fs_internal::Log;
using fs_internal::PacsetFs;

// statfs always reaches the daemon (stat may be answered from the kernel's
// attribute cache), so ENOTCONN here means the daemon is gone.
bool IsStaleMount(const std::string& path) {
  struct statvfs st;
  return statvfs(path.c_str(), &st) != 0 && errno == ENOTCONN;
}

// rocksdb:PATH or dir:PATH whose parent directory exists (so a typo in a
// path is still an error rather than a new store somewhere unexpected).
bool LocalStoreParentExists(const std::string& uri) {
  std::string path;
  if (uri.rfind("rocksdb:", 0) == 0)
    path = uri.substr(8);
  else if (uri.rfind("dir:", 0) == 0)
    path = uri.substr(4);
  else
    return false;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string parent = DirName(path);
  struct stat st;
  return !path.empty() && stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A value inside a -o list: libfuse splits the list at unescaped commas, so
// a comma in a store path would otherwise add mount options of its own.
std::string EscapeOptionValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The mount options, as libfuse and fusermount3 both take them after -o.
std::string MountOptionList(const MountOptions& opts) {
  // default_permissions: the kernel enforces the modes pacsetfs reports (the
  // control file is 0200, its owner's), on top of the daemon's own checks.
  std::string list = "fsname=" + EscapeOptionValue("pacsetfs:" + RedactStoreUri(opts.store_uri)) +
                     ",subtype=pacsetfs,default_permissions";
  if (opts.read_only) list += ",ro";
  if (opts.allow_other) list += ",allow_other";
  if (opts.auto_unmount) list += ",auto_unmount";
  return list;
}

std::vector<std::string> FuseArgs(const MountOptions& opts) {
  std::vector<std::string> args = {"pacsetfs", "-o", MountOptionList(opts)};
  if (opts.debug) args.push_back("-d");
  return args;
}

// Mounts the session: with auto_unmount through fusermount3 started without
// a fork (fs/internal/fusermount.h), whose watch *watch then holds; else as
// libfuse does (as root a mount(2) of its own).
Status MountSession(fuse_session* se, const MountOptions& opts,
                    std::optional<fs_internal::FusermountWatch>* watch) {
  const Status failed =
      Status::IOError("cannot mount on " + opts.mountpoint + " (is /dev/fuse available?)");
  if (!opts.auto_unmount)
    return fuse_session_mount(se, opts.mountpoint.c_str()) == 0 ? Status::Ok() : failed;
  // The flags libfuse would add: nosuid and nodev, rw unless ro.
  const std::string list =
      std::string(opts.read_only ? "" : "rw,") + "nosuid,nodev," + MountOptionList(opts);
  int fuse_fd = -1;
  PACSET_ASSIGN_OR_RETURN(auto w,
                          fs_internal::FusermountWatch::Mount(opts.mountpoint, list, &fuse_fd));
  watch->emplace(std::move(w));
  // libfuse takes the descriptor over and closes it with the session.
  const std::string at = "/dev/fd/" + std::to_string(fuse_fd);
  if (fuse_session_mount(se, at.c_str()) != 0) {
    close(fuse_fd);
    watch->reset();
    return failed;
  }
  return Status::Ok();
}

// The first line of `path`, without its line end.
StatusOr<std::string> ReadPasswordFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("password file " + path, errno);
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf));
  const int err = errno;
  close(fd);
  if (n < 0) return Status::FromErrno("password file " + path, err);
  std::string pw(buf, static_cast<size_t>(n));
  pw = pw.substr(0, pw.find_first_of("\r\n"));
  if (pw.empty()) return Status::InvalidArgument("password file " + path + " is empty");
  return pw;
}

// The store to serve, opened read-only. A missing local store is created
// empty first: a mount at boot may come before the first import; forests
// appear as they are imported.
StatusOr<std::unique_ptr<BlockStore>> OpenServedStore(const MountOptions& opts,
                                                      const StoreOptions& so) {
  const std::string shown = RedactStoreUri(opts.store_uri);
  auto store = OpenBlockStore(opts.store_uri, so);
  if (store.status().IsNotFound() && LocalStoreParentExists(opts.store_uri)) {
    StoreOptions create = so;
    create.read_only = false;
    PACSET_RETURN_IF_ERROR(OpenBlockStore(opts.store_uri, create).status());
    Log(LOG_INFO, "created an empty store at %s", shown.c_str());
    store = OpenBlockStore(opts.store_uri, so);
  }
  if (!store.ok()) return store.status();
  PACSET_RETURN_IF_ERROR((*store)->List().status().WithContext("store " + shown));
  return store;
}

// How a daemon tells the process that started it that the mount is up, or
// why it failed: one message on a pipe ("0" or "CODE MESSAGE"), then EOF.
class Readiness {
 public:
  explicit Readiness(int fd) : fd_(fd) {}
  ~Readiness() { Report(Status::Internal("the daemon stopped before it was ready")); }
  bool pending() const { return fd_ >= 0; }
  void Report(const Status& s) {
    if (fd_ < 0) return;
    const std::string msg =
        s.ok() ? "0" : std::to_string(static_cast<int>(s.code())) + " " + s.message();
    (void)!write(fd_, msg.data(), msg.size());
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Waits for the daemon's Readiness message.
Status AwaitDaemon(int fd, pid_t daemon) {
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) msg.append(buf, static_cast<size_t>(n));
  close(fd);
  if (msg == "0") return Status::Ok();
  int wstatus = 0;
  (void)WaitForChild(daemon, &wstatus);
  if (msg.empty())
    return Status::Internal("the daemon died before mounting (" +
                            (WIFSIGNALED(wstatus)
                                 ? "signal " + std::to_string(WTERMSIG(wstatus))
                                 : "exit status " + std::to_string(WEXITSTATUS(wstatus))) +
                            ")");
  const size_t space = msg.find(' ');
  const int code = std::atoi(msg.substr(0, space).c_str());
  return Status(static_cast<StatusCode>(code),
                space == std::string::npos ? "" : msg.substr(space + 1));
}

// Once the mount is up, a daemon leaves the terminal: log to syslog, no
// standard streams, no working directory that would keep a file system busy.
void Detach() {
  fs_internal::LogToSyslog();
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO) close(null);
  }
  (void)!chdir("/");
}

// A RocksDB store keeps every table file open (max_open_files = -1), twice
// (store/internal/uring_file_system.h): a store of a few hundred GB has more
// table files than the usual soft limit of 1024 descriptors allows.
void RaiseOpenFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// Opens the store, mounts, and serves until unmounted. `ready` (a daemon's)
// hears whether the mount came up.
Status Serve(const MountOptions& opts, const StoreOptions& so, Readiness* ready) {
  RaiseOpenFileLimit();
  return fs_internal::ServeStore(
      opts, [&opts, &so] { return OpenServedStore(opts, so); },
      [ready] {
        if (ready) {
          ready->Report(Status::Ok());
          Detach();
        }
      });
}

// Before the daemon starts any thread (glibc fixes its arena limit once the
// eighth arena exists).
void TuneMallocForTheCache(size_t cache_bytes) {
  // Cold reads fill the block cache with fresh 4 KiB..1 MiB blocks from up
  // to max_threads worker threads, each with a malloc arena of its own up to
  // glibc's limit (8 per CPU). Each arena keeps up to M_TRIM_THRESHOLD of
  // freed memory, so the daemon could hold the cache's bound once per arena:
  // a 16 MiB cache peaked at 41-50 MiB of RssAnon against 31-38 with two
  // arenas (tests/fs/scale_test.py, 2 CPUs), no slower. One arena per CPU
  // (2..8), and the cache's bound shared among them.
  const int arenas = std::clamp(ResolveThreads(0), 2, 8);
  mallopt(M_ARENA_MAX, arenas);
  // Grown a little at a time, every arena's heap took an mprotect call per
  // few blocks (a tenth of the daemon's CPU while reading a whole forest,
  // perf). 1 MiB steps.
  mallopt(M_TOP_PAD, 1 << 20);
  // Memory the cache frees (eviction, `drop`, a new generation) stays in
  // the arenas for the next blocks, up to the cache's own bound: returned to
  // the kernel, every page of it was faulted in (and zeroed) again by the
  // next cold reads — with 64 KiB blocks a third of a running daemon's CPU
  // for a cold row (perf: memset and page faults), which took 210 ms against
  // 130 ms with the memory kept (fs/DESIGN.md). Setting the trim threshold
  // fixes the mmap threshold too (glibc stops adapting it): blocks up to
  // 8 MiB come from the arenas, not from an mmap and munmap each.
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::clamp<size_t>(
                                cache_bytes / static_cast<size_t>(arenas), 128u << 10, 1u << 30)));
  mallopt(M_MMAP_THRESHOLD, 8 << 20);
}

}  // namespace

namespace fs_internal {

Status ServeStore(const MountOptions& opts, std::unique_ptr<BlockStore> store,
                  const std::function<void()>& on_mounted) {
  auto held = std::make_shared<std::unique_ptr<BlockStore>>(std::move(store));
  return ServeStore(
      opts, [held] { return StatusOr<std::unique_ptr<BlockStore>>(std::move(*held)); }, on_mounted);
}

Status ServeStore(const MountOptions& opts, const StoreOpener& open_store,
                  const std::function<void()>& on_mounted) {
  // A fresh daemon's store open (a RocksDB plugin loaded and its tables
  // opened: ~10 ms) and the kernel mount (fusermount3, mount(2): ~3 ms) run
  // side by side; requests wait in the kernel until the session loop starts.
  TuneMallocForTheCache(opts.cache_bytes);
  StatusOr<std::unique_ptr<BlockStore>> opened = Status::Internal("the store was not opened");
  std::thread opener([&opened, &open_store] { opened = open_store(); });
  struct Joiner {
    std::thread* t;
    ~Joiner() {
      if (t->joinable()) t->join();
    }
  } joiner{&opener};
  auto store_opened = [&]() -> Status {
    opener.join();
    return opened.status();
  };

  auto fs = std::make_unique<PacsetFs>(opts);
  std::vector<std::string> args = FuseArgs(opts);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_session* se =
      fuse_session_new(&fargs, &PacsetFs::Ops(), sizeof(fuse_lowlevel_ops), fs.get());
  fuse_opt_free_args(&fargs);  // what libfuse added to them; the session keeps copies
  if (!se) return Status::InvalidArgument("libfuse rejected the mount options");
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return Status::Internal("cannot install signal handlers");
  }
  // fusermount3's watch, if it mounted: ended at every return below, after
  // fuse_session_destroy closed the mount's descriptor, so that it unmounts.
  std::optional<fs_internal::FusermountWatch> watch;
  if (Status mounted = MountSession(se, opts, &watch); !mounted.ok()) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    // The store's error first: it says more than a failed mount.
    PACSET_RETURN_IF_ERROR(store_opened());
    return mounted;
  }
  // The trace file only once the store is open: a mount that fails leaves none.
  std::unique_ptr<TraceWriter> trace;
  Status started = store_opened();
  if (started.ok() && !opts.trace_path.empty()) {
    auto t = TraceWriter::Open(opts.trace_path, opts.trace_queue_records);
    started = t.status();
    if (t.ok()) trace = std::move(*t);
  }
  if (started.ok()) started = fs->Start(std::move(*opened), std::move(trace));
  if (!started.ok()) {
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return started;
  }
  on_mounted();

  Status status;
  fs->StartThreads(se);
  Log(LOG_INFO, "serving %s on %s", RedactStoreUri(opts.store_uri).c_str(),
      opts.mountpoint.c_str());
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(opts.max_threads));
  // Idle workers stay: a cold burst needs them all again, and libfuse would
  // otherwise end the ones above the idle limit after every burst and start
  // new ones at the next.
  fuse_loop_cfg_set_idle_threads(cfg, static_cast<unsigned>(opts.max_threads));
  const int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  fs->StopThreads();
  if (rc != 0 && rc != SIGTERM && rc != SIGINT && rc != SIGHUP)
    status = Status::IOError("FUSE session ended with error " + std::to_string(rc));
  Status ts = fs->CloseTrace();
  if (status.ok()) status = ts;
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  fs.reset();
  return status;
}

}  // namespace fs_internal

Status RunMount(const MountOptions& in) {
  MountOptions opts = in;
  if (opts.store_uri.empty()) opts.store_uri = DefaultStoreUri();
  char real[PATH_MAX];
  if (IsStaleMount(opts.mountpoint)) {
    // A previous daemon died without unmounting: clear the dead mount first.
    Log(LOG_WARNING, "%s is a stale mount (daemon gone); unmounting it", opts.mountpoint.c_str());
    if (umount2(opts.mountpoint.c_str(), MNT_DETACH) != 0)
      RunQuietly({fs_internal::FusermountProgram(), "-uz", opts.mountpoint});
    if (IsStaleMount(opts.mountpoint))
      return Status::IOError(opts.mountpoint + " is a stale mount that cannot be cleared");
  }
  if (!realpath(opts.mountpoint.c_str(), real))
    return Status::FromErrno("mount point " + opts.mountpoint, errno);
  opts.mountpoint = real;
  struct stat st;
  if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::InvalidArgument("mount point " + opts.mountpoint + " is not a directory");
  if (!opts.trace_path.empty() && !MakeAbsolute(&opts.trace_path))
    return Status::FromErrno("getcwd", errno);

  StoreOptions so;
  so.read_only = true;
  // One store call must fit well inside the fetch deadline.
  so.io_timeout_ms = std::clamp(opts.store_timeout_ms / 2, 100, 5000);
  so.connect_timeout_ms = so.io_timeout_ms;
  // The daemon caches verified blocks itself: a RocksDB block cache would
  // hold another copy of each, and would keep a `drop` from making a forest
  // cold.
  so.rocksdb_block_cache_bytes = 0;
  // Nor need the page cache hold the store's files: scattered blocks are read
  // past it (StoreOptions::direct_reads; fs/DESIGN.md, "Store reads past the
  // page cache").
  so.direct_reads = opts.direct_store_reads;
  if (!opts.password_file.empty()) {
    PACSET_ASSIGN_OR_RETURN(so.password, ReadPasswordFile(opts.password_file));
  }
  if (opts.foreground) return Serve(opts, so, nullptr);

  // In the background, the daemon is a child that opens the store itself:
  // nothing here may open it before fork() (RocksDB's thread pools would be
  // inherited without their threads, and the daemon crash at exit). Errors
  // up to the mount still reach this terminal through the pipe.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return Status::FromErrno("fork", errno);
  }
  if (pid == 0) {
    close(pipefd[0]);
    setsid();
    Readiness ready(pipefd[1]);
    Status s = Serve(opts, so, &ready);
    if (ready.pending()) {
      ready.Report(s);
    } else if (!s.ok()) {
      Log(LOG_ERR, "%s: %s", opts.mountpoint.c_str(), s.ToString().c_str());
    }
    std::exit(s.ok() ? 0 : 1);
  }
  close(pipefd[1]);
  return AwaitDaemon(pipefd[0], pid);
}

Status Unmount(const std::string& mountpoint) {
  if (geteuid() == 0) {
    if (umount2(mountpoint.c_str(), 0) == 0) return Status::Ok();
    if (errno == EBUSY) return Status::FromErrno("cannot unmount " + mountpoint, errno);
  }
  const int rc = RunQuietly({fs_internal::FusermountProgram(), "-u", mountpoint});
  if (rc == 0) return Status::Ok();
  if (IsStaleMount(mountpoint) &&
      RunQuietly({fs_internal::FusermountProgram(), "-uz", mountpoint}) == 0)
    return Status::Ok();
  return Status::IOError("cannot unmount " + mountpoint + " (not a pacsetfs mount, or busy)");
}

Status DropCaches(const std::string& where, const std::string& name) {
  // MOUNTPOINT/NAME.pac, the file a user has at hand, names its forest.
  std::string mountpoint = where, forest = name;
  struct stat st;
  constexpr std::string_view kPac = ".pac";
  const bool file = stat(where.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                    where.size() > kPac.size() &&
                    where.compare(where.size() - kPac.size(), kPac.size(), kPac) == 0;
  if (file) {
    const size_t slash = where.rfind('/');
    mountpoint = slash == std::string::npos ? "." : slash == 0 ? "/" : where.substr(0, slash);
    const size_t start = slash == std::string::npos ? 0 : slash + 1;
    const std::string file_forest = where.substr(start, where.size() - kPac.size() - start);
    if (!forest.empty() && forest != file_forest)
      return Status::InvalidArgument(where + " is forest '" + file_forest + "', not '" + forest +
                                     "'");
    forest = file_forest;
  }
  Status s = SendControlCommand(mountpoint, ControlCommand::Drop(forest.empty() ? "*" : forest));
  if (file && s.IsNotFound())  // a .pac file elsewhere, not the mount's
    return Status::NotFound(where + " is not a forest file of a pacsetfs mount (" + s.message() +
                            ")");
  return s;
}

}  // namespace pacset
