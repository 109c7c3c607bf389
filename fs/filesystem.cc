#include "fs/internal/filesystem.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "fs/internal/log.h"

namespace pacset {
namespace fs_internal {

PacsetFs::PacsetFs(const MountOptions& o)
    : opts_(o),
      cache_(o.cache_bytes),
      tracing_(o.trace_queue_records),
      faults_({o.fault_readahead, std::max<uint64_t>(o.fault_readahead, 16u << 20),
               o.fault_readahead_file_max, o.fault_readahead_per_user, o.fault_readahead_total,
               static_cast<uint32_t>(getuid())}),
      gathers_({o.max_gather_handles_per_user, o.max_gather_handles, o.gather_memory_per_user,
                o.gather_memory},
               static_cast<uint32_t>(getuid())) {
  clock_gettime(CLOCK_REALTIME, &mount_time_);
}

PacsetFs::~PacsetFs() = default;

Status PacsetFs::Start(std::unique_ptr<BlockStore> store, std::unique_ptr<TraceWriter> trace) {
  store_ = std::move(store);
  table_ = std::make_unique<ForestTable>(store_.get(), &cache_, &stats_);
  reader_ = std::make_unique<BlockReader>(store_.get(), &cache_, RedactStoreUri(opts_.store_uri),
                                          opts_.store_timeout_ms);
  if (trace) tracing_.Adopt(std::move(trace), opts_.trace_path);
  Status s = table_->Refresh().status();
  (void)table_->TakeChangedNames();  // the kernel knows no names yet
  return s;
}

void PacsetFs::StartThreads(fuse_session* se) {
  se_ = se;
  notifier_ = std::make_unique<Notifier>(se, reader_.get(), &tracing_);
  notifier_->Start();
  refresher_ = std::thread([this] { RefreshLoop(); });
}

void PacsetFs::StopThreads() {
  {
    MutexLock lock(&refresh_mu_);
    stop_ = true;
  }
  refresh_cv_.SignalAll();
  if (refresher_.joinable()) refresher_.join();
  if (notifier_) notifier_->Stop();
  // Release every pin this mount holds.
  if (table_) table_->UnpinAll();
}

// Looks for new generations every catalog_refresh ms; a name whose generation
// changed (in this refresh or in one a lookup ran meanwhile) gets its
// directory entry invalidated, so the next open resolves to the new inode.
void PacsetFs::RefreshLoop() {
  MutexLock lock(&refresh_mu_);
  while (!stop_) {
    refresh_cv_.WaitFor(&refresh_mu_, std::chrono::milliseconds(opts_.catalog_refresh_ms));
    if (stop_) break;
    refresh_mu_.Unlock();
    Status refreshed = Status::Internal("catalog refresh threw");
    std::vector<std::string> changed;
    try {
      refreshed = table_->Refresh().status();
      changed = table_->TakeChangedNames();
    } catch (...) {
      // Keep refreshing: the next round may succeed.
    }
    if (!refreshed.ok())
      Log(LOG_WARNING, "catalog refresh failed: %s", refreshed.ToString().c_str());
    if (se_) {
      for (const auto& name : changed) {
        const std::string file = FileNameOf(name);
        fuse_lowlevel_notify_inval_entry(se_, kRootIno, file.c_str(), file.size());
      }
    }
    refresh_mu_.Lock();
  }
}

void PacsetFs::FillAttr(fuse_ino_t ino, const ForestInode* f, struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = ino;
  st->st_uid = getuid();
  st->st_gid = getgid();
  st->st_nlink = 1;
  st->st_blksize = 4096;
  st->st_mtim = st->st_ctim = st->st_atim = mount_time_;
  if (ino == kRootIno || ino == kCtlDirIno) {
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
  } else if (ino == kStatsIno) {
    st->st_mode = S_IFREG | 0444;
  } else if (ino == kControlIno) {
    st->st_mode = S_IFREG | 0200;
  } else if (ino == kGatherIno) {
    st->st_mode = S_IFREG | 0666;  // gives only what the forest files give (protocol/gather.h)
  } else if (f) {
    st->st_mode = S_IFREG | 0444;
    st->st_size = static_cast<off_t>(f->info.size_bytes);
    st->st_blocks = static_cast<blkcnt_t>(f->info.size_bytes / 512);
    st->st_blksize = static_cast<blksize_t>(f->info.block_size);  // the unit of I/O
    st->st_mtim.tv_sec = f->info.created_unix_ns / 1000000000;
    st->st_mtim.tv_nsec = f->info.created_unix_ns % 1000000000;
    st->st_ctim = st->st_atim = st->st_mtim;
  }
}

std::string PacsetFs::StatsJson() {
  nlohmann::json extra = {
      {"mountpoint", opts_.mountpoint},
      {"store", RedactStoreUri(opts_.store_uri)},
      {"cache", {{"bytes", cache_.bytes()}, {"capacity", cache_.capacity()}}},
  };
  const GatherHandles::Totals gathers = gathers_.totals();
  extra["gather"] = {{"handles", gathers.all.handles},
                     {"request_bytes", gathers.all.bytes},
                     {"refused_opens", gathers.refused_opens},
                     {"refused_requests", gathers.refused_requests}};
  const FaultReadahead::Totals ahead = faults_.totals();
  extra["fault_readahead"] = {{"held_bytes", ahead.held_bytes},
                              {"peak_bytes_of_one_user", ahead.peak_bytes_of_one_user},
                              {"peak_bytes_capped", ahead.peak_bytes_capped},
                              {"refused", ahead.refused}};
  if (auto trace = tracing_.Current()) {
    extra["trace"] = {
        {"path", tracing_.path()}, {"written", trace->written()}, {"dropped", trace->dropped()}};
  }
  // Paths and names are bytes, not necessarily UTF-8: replaced, never thrown.
  return stats_.ToJson(extra.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace fs_internal
}  // namespace pacset
