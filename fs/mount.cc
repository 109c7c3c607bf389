// Mount lifecycle: checks before mounting, the store, the FUSE session,
// daemonizing, serving until unmounted; unmounting; helper processes.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "fs/control.h"
#include "fs/internal/filesystem.h"
#include "fs/internal/log.h"
#include "fs/pacsetfs.h"
#include "store/block_store.h"
#include "trace/trace_writer.h"

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

int RunCommand(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : path.substr(0, slash);
  struct stat st;
  return !path.empty() && stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Status RunMount(const MountOptions& in) {
  MountOptions opts = in;
  if (opts.store_uri.empty()) opts.store_uri = DefaultStoreUri();
  char real[PATH_MAX];
  if (IsStaleMount(opts.mountpoint)) {
    // A previous daemon died without unmounting: clear the dead mount first.
    Log(LOG_WARNING, "%s is a stale mount (daemon gone); unmounting it", opts.mountpoint.c_str());
    if (umount2(opts.mountpoint.c_str(), MNT_DETACH) != 0)
      RunCommand({"fusermount3", "-uz", opts.mountpoint});
    if (IsStaleMount(opts.mountpoint))
      return Status::IOError(opts.mountpoint + " is a stale mount that cannot be cleared");
  }
  if (!realpath(opts.mountpoint.c_str(), real))
    return Status::FromErrno("mount point " + opts.mountpoint, errno);
  opts.mountpoint = real;
  struct stat st;
  if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::InvalidArgument("mount point " + opts.mountpoint + " is not a directory");

  // Check the store before daemonizing so errors reach the terminal; it is
  // opened again afterwards (RocksDB's threads do not survive fork()).
  StoreOptions so;
  so.read_only = true;
  // One store call must fit well inside the fetch deadline.
  so.io_timeout_ms = std::clamp(opts.store_timeout_ms / 2, 100, 5000);
  so.connect_timeout_ms = so.io_timeout_ms;
  {
    auto probe = OpenBlockStore(opts.store_uri, so);
    if (probe.status().IsNotFound() && LocalStoreParentExists(opts.store_uri)) {
      // A mount at boot may come before the first import: create the empty
      // store (as `pacset import` would) and serve an empty directory; forests
      // appear as they are imported.
      StoreOptions create = so;
      create.read_only = false;
      PACSET_RETURN_IF_ERROR(OpenBlockStore(opts.store_uri, create).status());
      Log(LOG_INFO, "created an empty store at %s", opts.store_uri.c_str());
      probe = OpenBlockStore(opts.store_uri, so);
    }
    if (!probe.ok()) return probe.status();
    PACSET_RETURN_IF_ERROR((*probe)->List().status().WithContext("store " + opts.store_uri));
  }

  std::vector<std::string> args = {"pacsetfs", "-o",
                                   "fsname=pacsetfs:" + opts.store_uri + ",subtype=pacsetfs"};
  if (opts.allow_other) args.insert(args.end(), {"-o", "allow_other"});
  if (opts.auto_unmount) args.insert(args.end(), {"-o", "auto_unmount"});
  if (opts.debug) args.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  auto fs = std::make_unique<PacsetFs>(opts);
  fuse_session* se =
      fuse_session_new(&fargs, &PacsetFs::Ops(), sizeof(fuse_lowlevel_ops), fs.get());
  if (!se) return Status::InvalidArgument("libfuse rejected the mount options");
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return Status::Internal("cannot install signal handlers");
  }
  if (fuse_session_mount(se, opts.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Status::IOError("cannot mount on " + opts.mountpoint + " (is /dev/fuse available?)");
  }
  if (!opts.foreground) fs_internal::LogToSyslog();
  fuse_daemonize(opts.foreground ? 1 : 0);

  Status status;
  auto store = OpenBlockStore(opts.store_uri, so);
  std::unique_ptr<TraceWriter> trace;
  if (store.ok() && !opts.trace_path.empty()) {
    auto t = TraceWriter::Open(opts.trace_path, opts.trace_queue_records);
    if (t.ok())
      trace = std::move(t).value();
    else
      status = t.status();
  }
  if (!store.ok()) status = store.status();
  if (status.ok()) status = fs->Start(std::move(store).value(), std::move(trace));
  if (status.ok()) {
    fs->StartThreads(se);
    Log(LOG_INFO, "serving %s on %s", opts.store_uri.c_str(), opts.mountpoint.c_str());
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(opts.max_threads));
    fuse_loop_cfg_set_idle_threads(cfg, static_cast<unsigned>(std::max(2, opts.max_threads / 2)));
    const int rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
    fs->StopThreads();
    if (rc != 0 && rc != SIGTERM && rc != SIGINT && rc != SIGHUP)
      status = Status::IOError("FUSE session ended with error " + std::to_string(rc));
    Status ts = fs->CloseTrace();
    if (status.ok()) status = ts;
  } else {
    Log(LOG_ERR, "cannot serve %s: %s", opts.mountpoint.c_str(), status.ToString().c_str());
  }
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  fs.reset();
  return status;
}

Status Unmount(const std::string& mountpoint) {
  if (geteuid() == 0) {
    if (umount2(mountpoint.c_str(), 0) == 0) return Status::Ok();
    if (errno == EBUSY) return Status::FromErrno("cannot unmount " + mountpoint, errno);
  }
  const int rc = RunCommand({"fusermount3", "-u", mountpoint});
  if (rc == 0) return Status::Ok();
  if (IsStaleMount(mountpoint) && RunCommand({"fusermount3", "-uz", mountpoint}) == 0)
    return Status::Ok();
  return Status::IOError("cannot unmount " + mountpoint + " (not a pacsetfs mount, or busy)");
}

Status DropCaches(const std::string& mountpoint, const std::string& name) {
  return SendControlCommand(mountpoint, ControlCommand::Drop(name.empty() ? "*" : name));
}

}  // namespace pacset
