// The FUSE low-level filesystem of one mount. Code, by job:
//   fs/filesystem.cc     this class: start, threads, attributes, stats file
//   fs/handlers.cc       the FUSE request handlers (fuse_lowlevel_ops)
//   fs/forest_table.cc   catalog and generations (inodes, pins)
//   fs/block_reader.cc   blocks from the cache or the store (retries, deadline)
//   fs/notifier.cc       the thread that notifies the kernel (push, prefetch, drop)
//   fs/daemon_control.cc what the daemon does for each control command
//   protocol/control.cc        the control-file protocol (parser and client)
//   protocol/gather.cc         the gather file's protocol and client (protocol/gather.h)
//   fs/gather_handles.cc the gather file's open handles and their caps
//   fs/mount_options.cc  -o parsing;  fs/mount.cc  mount lifecycle
// Design notes, lock order and threads: fs/DESIGN.md.
#pragma once

#include <time.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "fs/block_cache.h"
#include "fs/internal/block_reader.h"
#include "fs/internal/fault_readahead.h"
#include "fs/internal/forest_table.h"
#include "fs/internal/gather_handles.h"
#include "fs/internal/inodes.h"
#include "fs/internal/notifier.h"
#include "fs/internal/readahead.h"
#include "fs/internal/tracing.h"
#include "fs/pacsetfs.h"
#include "fs/stats.h"
#include "protocol/control.h"
#include "store/block_store.h"
#include "trace/trace_writer.h"
#include "util/mutex.h"
#include "util/status.h"

namespace pacset {
namespace fs_internal {

class PacsetFs {
 public:
  explicit PacsetFs(const MountOptions& o);
  ~PacsetFs();

  // Takes the store and the trace opened at mount time (may be null) and
  // loads the catalog.
  Status Start(std::unique_ptr<BlockStore> store, std::unique_ptr<TraceWriter> trace);
  // The catalog refresher and the notifier thread; `se` for notifications.
  void StartThreads(fuse_session* se);
  // Stops both threads and unpins everything.
  void StopThreads();
  Status CloseTrace() { return tracing_.Stop(); }

  // The handler table for fuse_session_new (userdata: a PacsetFs*).
  static const fuse_lowlevel_ops& Ops();

  // ---- request handlers (fs/handlers.cc); each replies exactly once ----
  void Init(fuse_conn_info* conn);
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Forget(fuse_ino_t ino, uint64_t n);
  void GetAttr(fuse_req_t req, fuse_ino_t ino);
  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off);
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, fuse_file_info* fi);
  void StatFs(fuse_req_t req);
  // The forest file's gather request (protocol/gather.h, version 2).
  void Ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, fuse_file_info* fi, unsigned flags,
             const void* in_buf, size_t in_bufsz);

  // ---- the control file (fs/daemon_control.cc) ----
  // Carries out `cmd` and then calls `done` with the result, exactly once:
  // at once, or for a drop on the notifier thread once the pages are gone.
  void Control(const ControlCommand& cmd, std::function<void(Status)> done);

  // The text of MOUNTPOINT/.pacsetfs/stats.
  std::string StatsJson();

 private:
  bool MayControl(fuse_req_t req) const;
  void FillAttr(fuse_ino_t ino, const ForestInode* f, struct stat* st) const;
  void RefreshLoop() EXCLUDES(refresh_mu_);
  // The stats text an open of the stats file saw, by its file handle; null
  // for a handle that is not open.
  std::shared_ptr<const std::string> StatsText(uint64_t fh) EXCLUDES(stats_mu_);
  // Forgets stats handle fh and its user's count.
  void CloseStats(uint64_t fh) EXCLUDES(stats_mu_);
  // The gather file (protocol/gather.h): a write sets the handle's request, a read
  // returns its blocks.
  void GatherWrite(fuse_req_t req, const char* buf, size_t size, uint64_t fh);
  void GatherRead(fuse_req_t req, size_t size, off_t off, uint64_t fh);
  // After a read of blocks [first, last] of `f` by thread `pid` of user
  // `uid` is replied (fs/handlers_read_ahead.cc): learns the layout from
  // `block0` (block 0 when the read had it, else null), then fetches what
  // FaultReadahead plans and pushes the blocks that came from the store.
  // Best effort, never throws.
  void ReadAhead(const std::shared_ptr<ForestInode>& f, uint32_t uid, uint32_t pid, uint64_t first,
                 uint64_t last, const BlockData* block0, uint64_t drops_before) noexcept;

  const MountOptions opts_;
  timespec mount_time_{};
  std::unique_ptr<BlockStore> store_;
  BlockCache cache_;
  MountStats stats_;
  Tracing tracing_;
  SequentialReads sequential_;
  FaultReadahead faults_;
  std::unique_ptr<ForestTable> table_;
  std::unique_ptr<BlockReader> reader_;
  std::unique_ptr<Notifier> notifier_;
  fuse_session* se_ = nullptr;

  Mutex refresh_mu_;
  CondVar refresh_cv_;
  bool stop_ GUARDED_BY(refresh_mu_) = false;
  std::thread refresher_;

  // Open handles of the stats file: the text generated at open, shared with
  // replies in flight. Owned here, not by the handle, because the kernel
  // need not send every release before an unmount ends the session.
  // The stats file: one snapshot per open handle, so that its reads agree.
  // A user other than root and the mounting one holds at most
  // kMaxStatsHandlesPerUser of them (EMFILE), all such users together
  // kMaxStatsHandles (ENFILE): every handle holds a few KB of text.
  static constexpr uint32_t kMaxStatsHandlesPerUser = 64;
  static constexpr uint32_t kMaxStatsHandles = 1024;
  struct StatsHandle {
    std::shared_ptr<const std::string> text;
    uint32_t uid;
    bool capped;  // counted against the caps (not root, not the mounting user)
  };
  Mutex stats_mu_;
  uint64_t next_stats_fh_ GUARDED_BY(stats_mu_) = 0;
  std::unordered_map<uint64_t, StatsHandle> stats_handles_ GUARDED_BY(stats_mu_);
  std::unordered_map<uint32_t, uint32_t> stats_handles_of_ GUARDED_BY(stats_mu_);  // capped uids
  uint32_t capped_stats_handles_ GUARDED_BY(stats_mu_) = 0;

  // Open handles of the gather file, the request each holds, and the caps
  // per user and in total; owned here for the same reason.
  GatherHandles gathers_;
  // Workers pushing a forest gather's blocks now (Ioctl): at most
  // max_threads - 1, so that one is always free to serve the reads whose
  // page locks a push waits for.
  std::atomic<int> pushing_{0};
};

}  // namespace fs_internal
}  // namespace pacset
