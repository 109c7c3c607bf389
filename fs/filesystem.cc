// The FUSE low-level filesystem. Every handler takes its state from
// fuse_req_userdata() and replies exactly once; errors become errno only
// through StatusToErrno (fs/errno.h). No exception crosses into libfuse.
//
// Locks: mu_ guards the inode table and the catalog snapshot. It is never
// held while calling the store, the block cache or libfuse notify functions.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "fs/block_cache.h"
#include "fs/errno.h"
#include "fs/pacsetfs.h"
#include "fs/stats.h"
#include "layout/block.h"
#include "layout/pac_format.h"
#include "store/block_store.h"
#include "trace/trace_writer.h"

namespace pacset {
namespace {

constexpr fuse_ino_t kRootIno = FUSE_ROOT_ID;  // 1
constexpr fuse_ino_t kCtlDirIno = 2;
constexpr fuse_ino_t kStatsIno = 3;
constexpr fuse_ino_t kControlIno = 4;
constexpr fuse_ino_t kFirstForestIno = 16;
constexpr const char* kCtlDirName = ".pacsetfs";
constexpr double kEntryTimeout = 1.0;  // generations change; the refresher also notifies
constexpr double kAttrTimeout = 3600;  // a forest inode is one immutable generation

std::atomic<bool> g_use_syslog{false};

void Log(int level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (g_use_syslog.load()) {
    vsyslog(level, fmt, ap);
  } else {
    std::fprintf(stderr, "pacsetfs: ");
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
  }
  va_end(ap);
}

std::string FileNameOf(const std::string& forest) { return forest + ".pac"; }

bool ForestNameOf(const char* file, std::string* forest) {
  const size_t n = std::strlen(file);
  if (n <= 4 || std::strcmp(file + n - 4, ".pac") != 0) return false;
  forest->assign(file, n - 4);
  return ValidateForestName(*forest).ok();
}

uint64_t NowNs() { return MonotonicNowNs(); }

struct ForestInode {
  fuse_ino_t ino = 0;
  std::string name;
  uint32_t forest_id = 0;  // for the block cache
  ForestInfo info;
  uint64_t nlookup = 0;  // guarded by mu_
  int64_t opens = 0;     // guarded by mu_
  bool pinned = false;   // guarded by mu_
  std::shared_ptr<ForestStats> stats;
};

struct StatsHandle {
  std::string text;
};

class PacsetFs {
 public:
  explicit PacsetFs(const MountOptions& o) : opts_(o), cache_(o.cache_bytes) {
    clock_gettime(CLOCK_REALTIME, &mount_time_);
  }

  Status Start(std::unique_ptr<BlockStore> store, std::unique_ptr<TraceWriter> trace) {
    store_ = std::move(store);
    trace_ = std::shared_ptr<TraceWriter>(std::move(trace));
    trace_path_ = opts_.trace_path;
    PACSET_RETURN_IF_ERROR(RefreshCatalog(/*notify=*/false));
    return Status::Ok();
  }

  void StartThreads(fuse_session* se) {
    se_ = se;
    refresher_ = std::thread([this] { RefreshLoop(); });
    pusher_ = std::thread([this] { PushLoop(); });
  }

  void StopThreads() {
    {
      std::lock_guard<std::mutex> lock(bg_mu_);
      stop_ = true;
    }
    bg_cv_.notify_all();
    if (refresher_.joinable()) refresher_.join();
    if (pusher_.joinable()) pusher_.join();
    // Release every pin this mount holds.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [ino, f] : inodes_)
      if (f->pinned) (void)store_->Unpin(f->name, f->info.generation);
  }

  Status CloseTrace() {
    auto t = Trace();
    return t ? t->Close() : Status::Ok();
  }

  // The current trace writer (tracing can be started and stopped at runtime
  // through the control file), or null.
  std::shared_ptr<TraceWriter> Trace() const { return std::atomic_load(&trace_); }

  // ---- FUSE operations ----
  void Init(fuse_conn_info* conn) {
    conn->max_readahead = opts_.max_readahead;
    // Generations never change under an inode: keep pages across opens and
    // never invalidate them because of attribute changes.
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
  }

  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    e.attr_timeout = kAttrTimeout;
    e.entry_timeout = kEntryTimeout;
    if (parent == kCtlDirIno) {
      if (std::strcmp(name, "stats") == 0)
        e.ino = kStatsIno;
      else if (std::strcmp(name, "control") == 0)
        e.ino = kControlIno;
      else
        return (void)fuse_reply_err(req, ENOENT);
      e.entry_timeout = e.attr_timeout = 3600;
      FillAttr(e.ino, nullptr, &e.attr);
      return (void)fuse_reply_entry(req, &e);
    }
    if (parent != kRootIno) return (void)fuse_reply_err(req, ENOENT);
    if (std::strcmp(name, kCtlDirName) == 0) {
      e.ino = kCtlDirIno;
      e.entry_timeout = e.attr_timeout = 3600;
      FillAttr(e.ino, nullptr, &e.attr);
      return (void)fuse_reply_entry(req, &e);
    }
    std::string forest;
    if (!ForestNameOf(name, &forest)) return (void)fuse_reply_err(req, ENOENT);
    MaybeRefreshForLookup();
    std::shared_ptr<ForestInode> f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = catalog_.find(forest);
      if (it == catalog_.end()) return (void)fuse_reply_err(req, ENOENT);
      f = InodeForLocked(it->second);
      f->nlookup++;
    }
    e.ino = f->ino;
    FillAttr(f->ino, f.get(), &e.attr);
    fuse_reply_entry(req, &e);
  }

  void Forget(fuse_ino_t ino, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = inodes_.find(ino);
    if (it == inodes_.end()) return;
    auto& f = it->second;
    f->nlookup = f->nlookup > n ? f->nlookup - n : 0;
    MaybeReleaseLocked(f);
  }

  void GetAttr(fuse_req_t req, fuse_ino_t ino) {
    struct stat st;
    std::shared_ptr<ForestInode> f;
    if (ino >= kFirstForestIno) {
      f = Find(ino);
      if (!f) return (void)fuse_reply_err(req, ESTALE);
    } else if (ino != kRootIno && ino != kCtlDirIno && ino != kStatsIno && ino != kControlIno) {
      return (void)fuse_reply_err(req, ENOENT);
    }
    FillAttr(ino, f.get(), &st);
    fuse_reply_attr(req, &st, ino >= kFirstForestIno ? kAttrTimeout : 1.0);
  }

  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
    if (ino != kRootIno && ino != kCtlDirIno) return (void)fuse_reply_err(req, ENOTDIR);
    std::vector<std::pair<std::string, fuse_ino_t>> entries = {{".", ino}, {"..", kRootIno}};
    if (ino == kCtlDirIno) {
      entries.push_back({"stats", kStatsIno});
      entries.push_back({"control", kControlIno});
    } else {
      entries.push_back({kCtlDirName, kCtlDirIno});
      if (off == 0) MaybeRefreshForLookup();
      std::lock_guard<std::mutex> lock(mu_);
      fuse_ino_t fake = 1u << 30;
      for (const auto& [name, info] : catalog_) {
        auto g = by_gen_.find({name, info.generation});
        entries.push_back({FileNameOf(name), g != by_gen_.end() ? g->second : fake++});
      }
    }
    std::string buf;
    for (size_t i = static_cast<size_t>(off); i < entries.size(); ++i) {
      struct stat st;
      std::memset(&st, 0, sizeof(st));
      st.st_ino = entries[i].second;
      st.st_mode = (entries[i].second == kRootIno || entries[i].second == kCtlDirIno ||
                    entries[i].first == "." || entries[i].first == "..")
                       ? S_IFDIR
                       : S_IFREG;
      const size_t need = fuse_add_direntry(req, nullptr, 0, entries[i].first.c_str(), nullptr, 0);
      if (buf.size() + need > size) break;
      const size_t at = buf.size();
      buf.resize(at + need);
      fuse_add_direntry(req, buf.data() + at, need, entries[i].first.c_str(), &st,
                        static_cast<off_t>(i + 1));
    }
    fuse_reply_buf(req, buf.data(), buf.size());
  }

  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    const int acc = fi->flags & O_ACCMODE;
    if (ino == kStatsIno) {
      if (acc != O_RDONLY) return (void)fuse_reply_err(req, EACCES);
      auto* h = new StatsHandle{StatsJson()};
      fi->fh = reinterpret_cast<uint64_t>(h);
      fi->direct_io = 1;  // size unknown in advance
      return (void)fuse_reply_open(req, fi);
    }
    if (ino == kControlIno) {
      if (acc != O_WRONLY) return (void)fuse_reply_err(req, EACCES);
      fi->direct_io = 1;
      return (void)fuse_reply_open(req, fi);
    }
    if (ino < kFirstForestIno) return (void)fuse_reply_err(req, EISDIR);
    if (acc != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
    std::shared_ptr<ForestInode> f = Find(ino);
    if (!f) return (void)fuse_reply_err(req, ESTALE);
    bool first_open = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first_open = f->opens++ == 0;
      if (!f->pinned) {
        // Pinning under mu_ is fine: it is a local file lock or one redis
        // command, bounded by the store timeouts.
        Status s = store_->Pin(f->name, f->info.generation);
        if (!s.ok()) {
          f->opens--;
          Log(LOG_ERR, "cannot pin forest '%s' generation %llu: %s", f->name.c_str(),
              static_cast<unsigned long long>(f->info.generation), s.ToString().c_str());
          return (void)fuse_reply_err(req, StatusToErrno(s));
        }
        f->pinned = true;
      }
    }
    f->stats->opens.fetch_add(1, std::memory_order_relaxed);
    fi->keep_cache = 1;
    fi->fh = ino;
    fuse_reply_open(req, fi);
    if (first_open && opts_.prefetch_bins) Enqueue(f, kPrefetchBins);
  }

  void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    if (ino == kStatsIno) delete reinterpret_cast<StatsHandle*>(fi->fh);
    if (ino >= kFirstForestIno) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = inodes_.find(ino);
      if (it != inodes_.end()) {
        it->second->opens--;
        MaybeReleaseLocked(it->second);
      }
    }
    fuse_reply_err(req, 0);
  }

  void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    if (ino == kStatsIno) {
      auto* h = reinterpret_cast<StatsHandle*>(fi->fh);
      if (static_cast<size_t>(off) >= h->text.size()) return (void)fuse_reply_buf(req, nullptr, 0);
      return (void)fuse_reply_buf(req, h->text.data() + off,
                                  std::min(size, h->text.size() - static_cast<size_t>(off)));
    }
    std::shared_ptr<ForestInode> f = Find(ino);
    if (!f) return (void)fuse_reply_err(req, ESTALE);
    const uint64_t file_size = f->info.size_bytes;
    if (off < 0) return (void)fuse_reply_err(req, EINVAL);
    if (static_cast<uint64_t>(off) >= file_size) return (void)fuse_reply_buf(req, nullptr, 0);
    const uint64_t end = std::min<uint64_t>(file_size, static_cast<uint64_t>(off) + size);
    const uint32_t bs = f->info.block_size;
    const uint64_t first = static_cast<uint64_t>(off) / bs, last = (end - 1) / bs;
    const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
    f->stats->reads.fetch_add(1, std::memory_order_relaxed);
    std::vector<BlockData> blocks;
    std::vector<iovec> iov;
    std::vector<uint64_t> fresh;  // blocks that came from the store
    for (uint64_t b = first; b <= last; ++b) {
      BlockCache::Source src;
      const uint64_t t0 = NowNs();
      auto data = GetBlock(*f, b, &src);
      const uint64_t t1 = NowNs();
      const uint64_t lo = std::max<uint64_t>(static_cast<uint64_t>(off), b * bs);
      const uint64_t hi = std::min<uint64_t>(end, (b + 1) * bs);
      TraceAccess(*f, b, src, static_cast<uint32_t>(hi - lo), pid, t1 - t0, data.ok());
      if (!data.ok()) {
        f->stats->errors.fetch_add(1, std::memory_order_relaxed);
        return (void)fuse_reply_err(req, StatusToErrno(data.status()));
      }
      if (src == BlockCache::Source::kStore) fresh.push_back(b);
      iov.push_back({const_cast<char*>((*data)->data()) + (lo - b * bs), hi - lo});
      blocks.push_back(std::move(data).value());
    }
    f->stats->read_bytes.fetch_add(end - static_cast<uint64_t>(off), std::memory_order_relaxed);
    fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
    if (opts_.push_blocks)
      for (uint64_t b : fresh) Enqueue(f, b);
  }

  void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size) {
    if (ino != kControlIno) return (void)fuse_reply_err(req, EROFS);
    std::string cmd(buf, size);
    while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == ' ')) cmd.pop_back();
    Status s = Control(cmd);
    if (!s.ok()) {
      Log(LOG_WARNING, "control '%s': %s", cmd.c_str(), s.ToString().c_str());
      return (void)fuse_reply_err(req, StatusToErrno(s));
    }
    fuse_reply_write(req, size);
  }

  void StatFs(fuse_req_t req) {
    struct statvfs st;
    std::memset(&st, 0, sizeof(st));
    st.f_bsize = 4096;
    st.f_frsize = 4096;
    st.f_namemax = 255;
    uint64_t bytes = 0, files = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [n, info] : catalog_) {
        bytes += info.size_bytes;
        ++files;
      }
    }
    st.f_blocks = bytes / 4096;
    st.f_files = files;
    fuse_reply_statfs(req, &st);
  }

 private:
  static constexpr uint64_t kPrefetchBins = UINT64_MAX;

  void FillAttr(fuse_ino_t ino, const ForestInode* f, struct stat* st) {
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

  std::shared_ptr<ForestInode> Find(fuse_ino_t ino) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = inodes_.find(ino);
    return it == inodes_.end() ? nullptr : it->second;
  }

  std::shared_ptr<ForestInode> InodeForLocked(const ForestInfo& info) {
    auto g = by_gen_.find({info.name, info.generation});
    if (g != by_gen_.end()) return inodes_[g->second];
    auto f = std::make_shared<ForestInode>();
    f->ino = next_ino_++;
    f->name = info.name;
    f->info = info;
    auto id = forest_ids_.find(info.name);
    if (id == forest_ids_.end())
      id = forest_ids_.emplace(info.name, static_cast<uint32_t>(forest_ids_.size() + 1)).first;
    f->forest_id = id->second;
    f->stats = stats_.For(info.name);
    f->stats->generation.store(info.generation, std::memory_order_relaxed);
    inodes_[f->ino] = f;
    by_gen_[{info.name, info.generation}] = f->ino;
    return f;
  }

  bool IsCurrentLocked(const ForestInode& f) const {
    auto it = catalog_.find(f.name);
    return it != catalog_.end() && it->second.generation == f.info.generation;
  }

  // Unpins a generation nobody has open; forgets the inode once the kernel
  // has forgotten it too.
  void MaybeReleaseLocked(const std::shared_ptr<ForestInode>& f) {
    if (f->opens > 0) return;
    if (f->pinned && !IsCurrentLocked(*f)) {
      (void)store_->Unpin(f->name, f->info.generation);
      f->pinned = false;
      cache_.DropGeneration(f->forest_id, f->info.generation);
    }
    if (f->nlookup == 0) {
      if (f->pinned) {
        (void)store_->Unpin(f->name, f->info.generation);
        f->pinned = false;
      }
      by_gen_.erase({f->name, f->info.generation});
      inodes_.erase(f->ino);
    }
  }

  // Fetches with a deadline: retry transient failures with backoff, retry a
  // corrupt block once (it may have been damaged in flight), then give up.
  Status FetchBlock(const ForestInode& f, uint64_t block, std::string* out) {
    const auto start = std::chrono::steady_clock::now();
    // While the store is known to be down, fail at once: the kernel retries a
    // failed page read, and every worker thread would otherwise wait out the
    // deadline again.
    if (start.time_since_epoch().count() < store_down_until_.load(std::memory_order_relaxed))
      return Status::Unavailable("store " + opts_.store_uri + " is unreachable (retrying shortly)");
    const auto deadline = start + std::chrono::milliseconds(opts_.store_timeout_ms);
    auto backoff = std::chrono::milliseconds(10);
    bool retried_corruption = false;
    while (true) {
      Status s = store_->Get(f.info, block, out);
      if (s.ok()) return s;
      if (s.IsCorruption()) {
        f.stats->corrupt_blocks.fetch_add(1, std::memory_order_relaxed);
        if (retried_corruption) {
          Log(LOG_ERR, "%s", s.ToString().c_str());
          return s;
        }
        retried_corruption = true;
        continue;
      }
      if (s.code() == StatusCode::kNotFound) return Status::Corruption(s.message());
      if (std::chrono::steady_clock::now() + backoff >= deadline) {
        Log(LOG_ERR, "forest '%s' block %llu: giving up after %d ms: %s", f.name.c_str(),
            static_cast<unsigned long long>(block), opts_.store_timeout_ms, s.ToString().c_str());
        const auto quiet = std::chrono::milliseconds(std::min(opts_.store_timeout_ms, 1000));
        store_down_until_.store(
            (std::chrono::steady_clock::now() + quiet).time_since_epoch().count(),
            std::memory_order_relaxed);
        return Status::DeadlineExceeded(s.ToString());
      }
      f.stats->store_retries.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
  }

  StatusOr<BlockData> GetBlock(const ForestInode& f, uint64_t block, BlockCache::Source* src) {
    const BlockKey key{f.forest_id, f.info.generation, block};
    uint64_t fetch_ns = 0;
    auto r = cache_.GetOrFetch(
        key,
        [&](std::string* out) {
          const uint64_t t0 = NowNs();
          Status s = FetchBlock(f, block, out);
          fetch_ns = NowNs() - t0;
          return s;
        },
        src);
    switch (*src) {
      case BlockCache::Source::kStore:
        if (r.ok()) {
          f.stats->blocks_fetched.fetch_add(1, std::memory_order_relaxed);
          f.stats->fetched_bytes.fetch_add((*r)->size(), std::memory_order_relaxed);
          f.stats->fetch_latency.Add(fetch_ns);
        }
        break;
      case BlockCache::Source::kCache:
        f.stats->cache_hits.fetch_add(1, std::memory_order_relaxed);
        break;
      case BlockCache::Source::kJoined:
        f.stats->joined.fetch_add(1, std::memory_order_relaxed);
        break;
    }
    return r;
  }

  void TraceAccess(const ForestInode& f, uint64_t block, BlockCache::Source src, uint32_t bytes,
                   uint32_t pid, uint64_t latency_ns, bool ok, bool prefetch = false) {
    auto trace = Trace();
    if (!trace) return;
    TraceRecord r;
    r.type = TraceRecordType::kBlockAccess;
    r.source = prefetch                            ? TraceSource::kPrefetch
               : src == BlockCache::Source::kStore ? TraceSource::kStore
               : src == BlockCache::Source::kCache ? TraceSource::kCache
                                                   : TraceSource::kJoined;
    r.flags = ok ? 0 : kTraceFlagError;
    r.forest = trace->Forest(
        {f.name, f.info.generation, f.info.block_size, f.info.block_count, f.info.header_checksum});
    trace->NoteThread(pid);
    r.time_ns = NowNs();
    r.generation = f.info.generation;
    r.block = block;
    r.bytes = bytes;
    r.pid = pid;
    r.latency_ns = static_cast<uint32_t>(std::min<uint64_t>(latency_ns, UINT32_MAX));
    trace->Record(r);
  }

  // ---- catalog ----
  Status RefreshCatalog(bool notify) {
    PACSET_RETURN_IF_ERROR(store_->Refresh());
    PACSET_ASSIGN_OR_RETURN(std::vector<ForestInfo> list, store_->List());
    std::vector<std::string> changed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::map<std::string, ForestInfo> next;
      for (auto& info : list) next[info.name] = info;
      for (const auto& [name, info] : next) {
        auto it = catalog_.find(name);
        if (it == catalog_.end() || it->second.generation != info.generation)
          changed.push_back(name);
      }
      for (const auto& [name, info] : catalog_)
        if (!next.count(name)) changed.push_back(name);
      catalog_.swap(next);
      last_refresh_ = std::chrono::steady_clock::now();
      // Old generations nobody has open can go now.
      std::vector<std::shared_ptr<ForestInode>> all;
      for (auto& [ino, f] : inodes_) all.push_back(f);
      for (auto& f : all) MaybeReleaseLocked(f);
    }
    if (notify && se_) {
      for (const auto& name : changed) {
        const std::string file = FileNameOf(name);
        fuse_lowlevel_notify_inval_entry(se_, kRootIno, file.c_str(), file.size());
      }
    }
    return Status::Ok();
  }

  void MaybeRefreshForLookup() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (std::chrono::steady_clock::now() - last_refresh_ < std::chrono::milliseconds(100)) return;
    }
    Status s = RefreshCatalog(/*notify=*/false);
    if (!s.ok()) Log(LOG_WARNING, "catalog refresh failed: %s", s.ToString().c_str());
  }

  void RefreshLoop() {
    std::unique_lock<std::mutex> lock(bg_mu_);
    while (!stop_) {
      bg_cv_.wait_for(lock, std::chrono::milliseconds(opts_.catalog_refresh_ms));
      if (stop_) break;
      lock.unlock();
      Status s = RefreshCatalog(/*notify=*/true);
      if (!s.ok()) Log(LOG_WARNING, "catalog refresh failed: %s", s.ToString().c_str());
      lock.lock();
    }
  }

  // ---- pushing blocks into the page cache (own thread: notify_store may
  // wait for page locks held by reads that our workers are serving) ----
  void Enqueue(const std::shared_ptr<ForestInode>& f, uint64_t block) {
    std::lock_guard<std::mutex> lock(bg_mu_);
    if (push_queue_.size() >= 4096) return;  // best effort
    push_queue_.push_back({f, block});
    bg_cv_.notify_all();
  }

  void Push(const ForestInode& f, uint64_t block, const BlockData& data) {
    fuse_bufvec bv = FUSE_BUFVEC_INIT(data->size());
    bv.buf[0].mem = const_cast<char*>(data->data());
    const int rc = fuse_lowlevel_notify_store(se_, f.ino, block * f.info.block_size, &bv,
                                              static_cast<fuse_buf_copy_flags>(0));
    if (rc == 0) f.stats->pushed.fetch_add(1, std::memory_order_relaxed);
  }

  void PrefetchBins(const std::shared_ptr<ForestInode>& f) {
    BlockCache::Source src;
    auto b0 = GetBlock(*f, 0, &src);
    if (!b0.ok()) return;
    auto h = PacHeader::DecodeFrom((*b0)->data(), f->info.block_size - kBlockTrailerSize, f->name);
    if (!h.ok()) return;
    const uint64_t n =
        std::min<uint64_t>(h->node_first_block + h->bin_block_count, f->info.block_count);
    for (uint64_t b = 0; b < n; ++b) {
      const uint64_t t0 = NowNs();
      auto d = GetBlock(*f, b, &src);
      TraceAccess(*f, b, src, 0, static_cast<uint32_t>(getpid()), NowNs() - t0, d.ok(), true);
      if (!d.ok()) return;
      f->stats->prefetched.fetch_add(1, std::memory_order_relaxed);
      Push(*f, b, *d);
    }
  }

  void PushLoop() {
    std::unique_lock<std::mutex> lock(bg_mu_);
    while (true) {
      bg_cv_.wait(lock, [&] { return stop_ || !push_queue_.empty(); });
      if (stop_) break;
      auto [f, block] = push_queue_.front();
      push_queue_.pop_front();
      lock.unlock();
      if (block == kPrefetchBins) {
        PrefetchBins(f);
      } else {
        // Usually a cache hit (it was just fetched); not counted as a read.
        auto d = cache_.GetOrFetch({f->forest_id, f->info.generation, block},
                                   [&](std::string* out) { return FetchBlock(*f, block, out); });
        if (d.ok()) Push(*f, block, *d);
      }
      lock.lock();
    }
  }

  // ---- control file ----
  Status Control(const std::string& cmd) {
    if (cmd.rfind("drop", 0) == 0) {
      std::string name = cmd.size() > 4 ? cmd.substr(5) : "*";
      if (name.empty()) name = "*";
      std::vector<std::shared_ptr<ForestInode>> targets;
      uint32_t id = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (name != "*") {
          if (!catalog_.count(name) && !forest_ids_.count(name))
            return Status::NotFound("no forest named '" + name + "'");
          auto it = forest_ids_.find(name);
          if (it != forest_ids_.end()) id = it->second;
        }
        for (auto& [ino, f] : inodes_)
          if (name == "*" || f->name == name) targets.push_back(f);
      }
      // Kernel pages first (this unmaps them from every process), then ours.
      for (auto& f : targets) fuse_lowlevel_notify_inval_inode(se_, f->ino, 0, 0);
      if (name == "*") {
        cache_.Drop(0);
      } else if (id != 0) {
        cache_.Drop(id);
      }
      if (auto trace = Trace()) {
        TraceRecord r;
        r.type = TraceRecordType::kDropCache;
        r.forest = name == "*" ? 0 : trace->ForestId(name);
        r.time_ns = NowNs();
        trace->Record(r);
      }
      Log(LOG_INFO, "dropped caches for %s", name == "*" ? "all forests" : name.c_str());
      return Status::Ok();
    }
    if (cmd.rfind("trace start ", 0) == 0) {
      const std::string path = cmd.substr(12);
      if (path.empty() || path[0] != '/')
        return Status::InvalidArgument("trace start needs an absolute path");
      PACSET_ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(path, opts_.trace_queue_records));
      std::shared_ptr<TraceWriter> next(std::move(writer));
      auto prev = std::atomic_exchange(&trace_, next);
      {
        std::lock_guard<std::mutex> lock(mu_);
        trace_path_ = path;
      }
      if (prev) (void)prev->Close();
      Log(LOG_INFO, "tracing block accesses to %s", path.c_str());
      return Status::Ok();
    }
    if (cmd == "trace stop") {
      auto prev = std::atomic_exchange(&trace_, std::shared_ptr<TraceWriter>());
      if (!prev) return Status::Ok();
      Status s = prev->Close();
      Log(LOG_INFO, "tracing stopped");
      return s;
    }
    return Status::InvalidArgument(
        "unknown control command '" + cmd +
        "' (expected: drop NAME, drop *, trace start /PATH, trace stop)");
  }

  std::string StatsJson() {
    nlohmann::json extra = {
        {"mountpoint", opts_.mountpoint},
        {"store", opts_.store_uri},
        {"cache", {{"bytes", cache_.bytes()}, {"capacity", cache_.capacity()}}},
    };
    if (auto trace = Trace()) {
      std::lock_guard<std::mutex> lock(mu_);
      extra["trace"] = {
          {"path", trace_path_}, {"written", trace->written()}, {"dropped", trace->dropped()}};
    }
    return stats_.ToJson(extra.dump());
  }

  MountOptions opts_;
  timespec mount_time_{};
  std::unique_ptr<BlockStore> store_;
  std::shared_ptr<TraceWriter> trace_;  // atomic_load / atomic_exchange only
  std::string trace_path_;              // guarded by mu_
  BlockCache cache_;
  MountStats stats_;
  fuse_session* se_ = nullptr;

  std::mutex mu_;
  std::map<std::string, ForestInfo> catalog_;
  std::chrono::steady_clock::time_point last_refresh_{};
  std::unordered_map<fuse_ino_t, std::shared_ptr<ForestInode>> inodes_;
  std::map<std::pair<std::string, uint64_t>, fuse_ino_t> by_gen_;
  std::map<std::string, uint32_t> forest_ids_;
  fuse_ino_t next_ino_ = kFirstForestIno;

  std::atomic<int64_t> store_down_until_{0};  // steady_clock ticks

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool stop_ = false;
  std::deque<std::pair<std::shared_ptr<ForestInode>, uint64_t>> push_queue_;
  std::thread refresher_, pusher_;
};

PacsetFs* FsOf(fuse_req_t req) { return static_cast<PacsetFs*>(fuse_req_userdata(req)); }

const fuse_lowlevel_ops kOps = [] {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = [](void* userdata, fuse_conn_info* conn) {
    static_cast<PacsetFs*>(userdata)->Init(conn);
  };
  ops.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    FsOf(req)->Lookup(req, parent, name);
  };
  ops.forget = [](fuse_req_t req, fuse_ino_t ino, uint64_t n) {
    FsOf(req)->Forget(ino, n);
    fuse_reply_none(req);
  };
  ops.forget_multi = [](fuse_req_t req, size_t count, fuse_forget_data* forgets) {
    for (size_t i = 0; i < count; ++i) FsOf(req)->Forget(forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
  };
  ops.getattr = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    FsOf(req)->GetAttr(req, ino);
  };
  ops.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
    FsOf(req)->ReadDir(req, ino, size, off);
  };
  ops.open = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    FsOf(req)->Open(req, ino, fi);
  };
  ops.release = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    FsOf(req)->Release(req, ino, fi);
  };
  ops.read = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    FsOf(req)->Read(req, ino, size, off, fi);
  };
  ops.write = [](fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t,
                 fuse_file_info*) { FsOf(req)->Write(req, ino, buf, size); };
  ops.statfs = [](fuse_req_t req, fuse_ino_t) { FsOf(req)->StatFs(req); };
  return ops;
}();

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

Status ParseMountOptionString(const std::string& list, MountOptions* o) {
  static const char* kIgnored[] = {"dev",   "nodev",  "suid",     "nosuid", "exec",    "noexec",
                                   "ro",    "rw",     "defaults", "auto",   "noauto",  "user",
                                   "users", "nofail", "_netdev",  "atime",  "noatime", "relatime",
                                   "async", "sync",   "nouser",   "owner",  "group"};
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t c = list.find(',', pos);
    if (c == std::string::npos) c = list.size();
    const std::string opt = list.substr(pos, c - pos);
    pos = c + 1;
    if (opt.empty()) continue;
    const size_t eq = opt.find('=');
    const std::string key = opt.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : opt.substr(eq + 1);
    auto number = [&](uint64_t* out) -> Status {
      char* end = nullptr;
      unsigned long long v = std::strtoull(val.c_str(), &end, 10);
      uint64_t mult = 1;
      std::string suffix = end ? end : "";
      if (suffix == "K" || suffix == "KiB" || suffix == "k")
        mult = 1024;
      else if (suffix == "M" || suffix == "MiB")
        mult = 1 << 20;
      else if (suffix == "G" || suffix == "GiB")
        mult = 1ull << 30;
      else if (!suffix.empty())
        return Status::InvalidArgument("option " + key + ": '" + val + "' is not a number");
      if (val.empty()) return Status::InvalidArgument("option " + key + " needs a value");
      *out = v * mult;
      return Status::Ok();
    };
    uint64_t v = 0;
    if (std::find(std::begin(kIgnored), std::end(kIgnored), key) != std::end(kIgnored) ||
        key.rfind("x-", 0) == 0 || key == "comment") {
      continue;
    } else if (key == "allow_other") {
      o->allow_other = true;
    } else if (key == "auto_unmount") {
      o->auto_unmount = true;
    } else if (key == "no_auto_unmount") {
      o->auto_unmount = false;
    } else if (key == "store") {
      o->store_uri = val;
    } else if (key == "cache_size") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->cache_bytes = v;
    } else if (key == "trace") {
      o->trace_path = val;
    } else if (key == "store_timeout") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->store_timeout_ms = static_cast<int>(v);
    } else if (key == "catalog_refresh") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->catalog_refresh_ms = static_cast<int>(std::max<uint64_t>(v, 10));
    } else if (key == "push_blocks") {
      o->push_blocks = true;
    } else if (key == "no_push_blocks") {
      o->push_blocks = false;
    } else if (key == "prefetch_bins") {
      o->prefetch_bins = true;
    } else if (key == "readahead") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->max_readahead = static_cast<uint32_t>(std::min<uint64_t>(v, 1 << 20));
    } else if (key == "threads") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->max_threads = static_cast<int>(std::clamp<uint64_t>(v, 1, 1024));
    } else if (key == "debug") {
      o->debug = true;
      o->foreground = true;
    } else {
      return Status::InvalidArgument("unknown mount option '" + key + "'");
    }
  }
  return Status::Ok();
}

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
  fuse_session* se = fuse_session_new(&fargs, &kOps, sizeof(kOps), fs.get());
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
  if (!opts.foreground) {
    g_use_syslog = true;
    openlog("pacsetfs", LOG_PID, LOG_DAEMON);
  }
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
  const std::string path = mountpoint + "/" + kCtlDirName + "/control";
  std::ofstream out(path);
  if (!out)
    return Status::FromErrno("cannot open " + path + " (is a pacsetfs mounted there?)", errno);
  out << "drop " << (name.empty() ? "*" : name) << "\n";
  out.flush();
  if (!out) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound("no forest named '" + name + "' on " + mountpoint);
    return Status::FromErrno("drop caches on " + mountpoint, err);
  }
  return Status::Ok();
}

}  // namespace pacset
