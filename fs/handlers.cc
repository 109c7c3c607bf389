// The FUSE request handlers. Every handler takes its state from
// fuse_req_userdata(), replies exactly once, and turns a Status into an errno
// only through StatusToErrno (fs/errno.h).
#include <malloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <vector>

#include "fs/errno.h"
#include "fs/internal/filesystem.h"
#include "fs/internal/log.h"
#include "protocol/gather.h"
#include "trace/trace_format.h"

namespace pacset {
namespace fs_internal {
namespace {

constexpr double kEntryTimeout = 1.0;  // generations change; the refresher also notifies
constexpr double kAttrTimeout = 3600;  // a forest inode is one immutable generation
// A gather read fetches at most this much of its request beyond what it
// answers (GatherRead).
constexpr uint64_t kGatherAheadBytes = 16 << 20;

PacsetFs* FsOf(fuse_req_t req) { return static_cast<PacsetFs*>(fuse_req_userdata(req)); }

}  // namespace

void PacsetFs::Init(fuse_conn_info* conn) {
  conn->max_readahead = opts_.max_readahead;
  // Generations never change under an inode: keep pages across opens and
  // never invalidate them because of attribute changes.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  // Concurrent reads: with readahead off, every page-cache miss of a read
  // or a fault is a one-page readahead, which the kernel sends as a
  // background request when reads are asynchronous; it keeps at most
  // max_background of them in flight (kernel default 12), and an engine
  // keeps 32 blocks in flight per process. Room for every worker twice over,
  // so the queue, not the kernel, holds the next requests.
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  const unsigned background = std::clamp(2 * opts_.max_threads, 64, 4096);
  conn->max_background = background;
  conn->congestion_threshold = background * 3 / 4;
}

void PacsetFs::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.attr_timeout = kAttrTimeout;
  e.entry_timeout = kEntryTimeout;
  if (parent == kCtlDirIno) {
    if (std::strcmp(name, "stats") == 0)
      e.ino = kStatsIno;
    else if (std::strcmp(name, "control") == 0)
      e.ino = kControlIno;
    else if (std::strcmp(name, kGatherFileName) == 0)
      e.ino = kGatherIno;
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
  table_->RefreshIfOlder(std::chrono::milliseconds(100));
  std::shared_ptr<ForestInode> f = table_->Lookup(forest);
  if (!f) return (void)fuse_reply_err(req, ENOENT);
  e.ino = f->ino;
  FillAttr(f->ino, f.get(), &e.attr);
  fuse_reply_entry(req, &e);
}

void PacsetFs::Forget(fuse_ino_t ino, uint64_t n) { table_->Forget(ino, n); }

void PacsetFs::GetAttr(fuse_req_t req, fuse_ino_t ino) {
  struct stat st;
  std::shared_ptr<ForestInode> f;
  if (ino >= kFirstForestIno) {
    f = table_->Find(ino);
    if (!f) return (void)fuse_reply_err(req, ESTALE);
  } else if (ino != kRootIno && ino != kCtlDirIno && ino != kStatsIno && ino != kControlIno &&
             ino != kGatherIno) {
    return (void)fuse_reply_err(req, ENOENT);
  }
  FillAttr(ino, f.get(), &st);
  fuse_reply_attr(req, &st, ino >= kFirstForestIno ? kAttrTimeout : 1.0);
}

void PacsetFs::ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
  if (ino != kRootIno && ino != kCtlDirIno) return (void)fuse_reply_err(req, ENOTDIR);
  std::vector<std::pair<std::string, fuse_ino_t>> entries = {{".", ino}, {"..", kRootIno}};
  if (ino == kCtlDirIno) {
    entries.push_back({"stats", kStatsIno});
    entries.push_back({"control", kControlIno});
    entries.push_back({kGatherFileName, kGatherIno});
  } else {
    entries.push_back({kCtlDirName, kCtlDirIno});
    if (off == 0) table_->RefreshIfOlder(std::chrono::milliseconds(100));
    for (auto& e : table_->DirEntries()) entries.push_back(std::move(e));
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

// Only the user who mounted (whose uid the daemon runs as) and root may use
// the control file: with allow_other every local user reaches the mount.
// default_permissions makes the kernel check the file's mode (0200, owned by
// that user) too; this check does not depend on it.
bool PacsetFs::MayControl(fuse_req_t req) const {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return ctx->uid == 0 || ctx->uid == getuid();
}

void PacsetFs::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const int acc = fi->flags & O_ACCMODE;
  if (ino == kStatsIno) {
    if (acc != O_RDONLY) return (void)fuse_reply_err(req, EACCES);
    // The text is generated once per open, so that reads at any offset see
    // one snapshot. Shared: a read replies from it while the kernel may
    // already let the reader close the file, and the release may drop the
    // handle before that reply's writev returns.
    const uint32_t uid = fuse_req_ctx(req)->uid;
    const bool capped = uid != 0 && uid != getuid();
    int refused = 0;
    if (capped) {
      MutexLock lock(&stats_mu_);
      auto held = stats_handles_of_.find(uid);
      if (held != stats_handles_of_.end() && held->second >= kMaxStatsHandlesPerUser)
        refused = EMFILE;
      else if (capped_stats_handles_ >= kMaxStatsHandles)
        refused = ENFILE;
    }
    if (refused) return (void)fuse_reply_err(req, refused);
    auto text = std::make_shared<const std::string>(StatsJson());
    {
      MutexLock lock(&stats_mu_);
      fi->fh = ++next_stats_fh_;
      stats_handles_.emplace(fi->fh, StatsHandle{std::move(text), uid, capped});
      if (capped) {
        ++stats_handles_of_[uid];
        ++capped_stats_handles_;
      }
    }
    fi->direct_io = 1;  // size unknown in advance
    // The open was interrupted: the kernel will never send its release.
    if (fuse_reply_open(req, fi) != 0) CloseStats(fi->fh);
    return;
  }
  if (ino == kGatherIno) {
    if (acc != O_RDWR) return (void)fuse_reply_err(req, EACCES);
    // Capped per user and in total (fs/internal/gather_handles.h): EMFILE, ENFILE.
    if (const int err = gathers_.Open(fuse_req_ctx(req)->uid, &fi->fh); err != 0)
      return (void)fuse_reply_err(req, err);
    fi->direct_io = 1;  // each read is the daemon's answer to the handle's request
    if (fuse_reply_open(req, fi) != 0) (void)gathers_.Close(fi->fh);
    return;
  }
  if (ino == kControlIno) {
    if (acc != O_WRONLY) return (void)fuse_reply_err(req, EACCES);
    if (opts_.read_only) return (void)fuse_reply_err(req, EROFS);
    if (!MayControl(req)) return (void)fuse_reply_err(req, EACCES);
    fi->direct_io = 1;
    return (void)fuse_reply_open(req, fi);
  }
  if (ino < kFirstForestIno) return (void)fuse_reply_err(req, EISDIR);
  if (acc != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  std::shared_ptr<ForestInode> f = table_->Find(ino);
  if (!f) return (void)fuse_reply_err(req, ESTALE);
  // The page cache and notify_store work in pages: a block smaller than a
  // page cannot be served as one (`pacset predict --store` reads it).
  if (const long page = sysconf(_SC_PAGESIZE); f->info.block_size < page) {
    const Status refused = Status::NotSupported(
        "forest '" + f->name + "' has " + std::to_string(f->info.block_size) +
        "-byte blocks, smaller than a page (" + std::to_string(page) +
        " bytes): a mount cannot serve it; use pacset predict --store, or import it with "
        "--block-size 4KiB or more");
    Log(LOG_ERR, "%s", refused.ToString().c_str());
    return (void)fuse_reply_err(req, StatusToErrno(refused));
  }
  const uint32_t uid = fuse_req_ctx(req)->uid;
  bool first_open = false;
  Status s = table_->Open(f, uid, &first_open);
  // kNotFound: the generation was collected between the lookup and this pin
  // (a re-import's garbage collection). ESTALE makes the kernel look the name
  // up again (LOOKUP_REVAL) and open the current generation.
  if (s.IsNotFound()) return (void)fuse_reply_err(req, ESTALE);
  if (!s.ok()) return (void)fuse_reply_err(req, StatusToErrno(s));
  f->stats->opens.fetch_add(1, std::memory_order_relaxed);
  fi->keep_cache = 1;
  // Reads go by inode; the handle keeps who opened it, for its release (which
  // the kernel sends without the credentials of anyone).
  fi->fh = uid;
  if (fuse_reply_open(req, fi) != 0) {
    // The open was interrupted: the kernel will never send its release.
    try {
      table_->Release(ino, uid);
    } catch (...) {
      Log(LOG_ERR, "open of inode %llu: cannot undo a failed open",
          static_cast<unsigned long long>(ino));
    }
    return;
  }
  if (first_open && opts_.prefetch_bins) notifier_->PrefetchBins(f);
}

std::shared_ptr<const std::string> PacsetFs::StatsText(uint64_t fh) {
  MutexLock lock(&stats_mu_);
  auto it = stats_handles_.find(fh);
  return it == stats_handles_.end() ? nullptr : it->second.text;
}

void PacsetFs::CloseStats(uint64_t fh) {
  MutexLock lock(&stats_mu_);
  auto it = stats_handles_.find(fh);
  if (it == stats_handles_.end()) return;
  if (it->second.capped) {
    --capped_stats_handles_;
    if (--stats_handles_of_[it->second.uid] == 0) stats_handles_of_.erase(it->second.uid);
  }
  stats_handles_.erase(it);
}

void PacsetFs::Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino == kStatsIno) CloseStats(fi->fh);
  const bool trim = ino == kGatherIno && gathers_.Close(fi->fh);
  if (ino >= kFirstForestIno) table_->Release(ino, static_cast<uint32_t>(fi->fh));
  fuse_reply_err(req, 0);
  // After many gather handles closed, their requests' memory goes back to the
  // kernel, which malloc's arenas would otherwise keep (GatherHandles::Close).
  if (trim) malloc_trim(0);
}

void PacsetFs::Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  if (ino == kStatsIno) {
    const std::shared_ptr<const std::string> text = StatsText(fi->fh);
    if (!text) return (void)fuse_reply_err(req, EBADF);
    if (static_cast<size_t>(off) >= text->size()) return (void)fuse_reply_buf(req, nullptr, 0);
    return (void)fuse_reply_buf(req, text->data() + off,
                                std::min(size, text->size() - static_cast<size_t>(off)));
  }
  if (ino == kGatherIno) return GatherRead(req, size, off, fi->fh);
  std::shared_ptr<ForestInode> f = table_->Find(ino);
  if (!f) return (void)fuse_reply_err(req, ESTALE);
  const uint64_t file_size = f->info.size_bytes;
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  if (static_cast<uint64_t>(off) >= file_size || size == 0)
    return (void)fuse_reply_buf(req, nullptr, 0);
  const uint64_t end = std::min<uint64_t>(file_size, static_cast<uint64_t>(off) + size);
  const uint32_t bs = f->info.block_size;
  const uint64_t first = static_cast<uint64_t>(off) / bs, last = (end - 1) / bs;
  const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  const uint32_t uid = fuse_req_ctx(req)->uid;
  f->stats->reads.fetch_add(1, std::memory_order_relaxed);
  // The read's blocks and, for a sequential reader, the window ahead of it
  // (fs/internal/readahead.h): those not cached come in one store call.
  const uint64_t fetch_end =
      opts_.push_blocks
          ? std::min(file_size, sequential_.FetchEnd(ino, pid, static_cast<uint64_t>(off), end))
          : end;
  const uint64_t fetch_last = (fetch_end - 1) / bs;
  std::vector<uint64_t> wanted;
  wanted.reserve(fetch_last - first + 1);
  for (uint64_t b = first; b <= fetch_last; ++b) wanted.push_back(b);
  std::vector<BlockData> data;
  std::vector<Status> status;
  std::vector<BlockCache::Source> src;
  const uint64_t drops_before = notifier_->drops();  // before the fetch: see Notifier::drops
  const uint64_t t0 = MonotonicNowNs();
  reader_->GetMany(*f, wanted, last - first + 1, &data, &status, &src);
  const uint64_t latency = MonotonicNowNs() - t0;
  std::vector<iovec> iov;
  iov.reserve(last - first + 1);
  // Blocks that came from the store and that this read did not cover whole:
  // the reply puts the pages it covers into the page cache, so pushing a
  // block the read covered would only copy it there a second time (with
  // page-sized blocks, every block).
  std::vector<uint64_t> fresh;
  int err = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const uint64_t b = wanted[i];
    if (b > last) {  // read ahead: not this read's, pushed if it was fetched
      tracing_.RecordAccess(*f, b, src[i], 0, pid, latency, status[i].ok(), /*prefetch=*/true);
      if (status[i].ok() && src[i] == BlockCache::Source::kStore) {
        f->stats->prefetched.fetch_add(1, std::memory_order_relaxed);
        fresh.push_back(b);
      }
      continue;
    }
    const uint64_t lo = std::max<uint64_t>(static_cast<uint64_t>(off), b * bs);
    const uint64_t hi = std::min<uint64_t>(end, (b + 1) * bs);
    tracing_.RecordAccess(*f, b, src[i], static_cast<uint32_t>(hi - lo), pid, latency,
                          status[i].ok());
    if (!status[i].ok()) {
      if (err == 0) err = StatusToErrno(status[i]);
      continue;
    }
    if (src[i] == BlockCache::Source::kStore && (lo > b * bs || hi < (b + 1) * bs))
      fresh.push_back(b);
    iov.push_back({const_cast<char*>(data[i]->data()) + (lo - b * bs), hi - lo});
  }
  if (err != 0) {
    f->stats->errors.fetch_add(1, std::memory_order_relaxed);
    fuse_reply_err(req, err);
  } else {
    f->stats->read_bytes.fetch_add(end - static_cast<uint64_t>(off), std::memory_order_relaxed);
    fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
  }
  if (opts_.push_blocks) {
    for (size_t i = 0; i < fresh.size();) {  // `fresh` is ascending: push runs
      size_t j = i + 1;
      while (j < fresh.size() && fresh[j] == fresh[j - 1] + 1) ++j;
      notifier_->Push(f, fresh[i], j - i, drops_before);
      i = j;
    }
    // A page-faulting reader (fs/internal/fault_readahead.h): read ahead
    // along the layout now that the reader has its page. Not for a
    // sequential reader, whose window came with this read.
    if (err == 0 && fetch_end == end) {
      const BlockData* block0 = first == 0 ? &data[0] : nullptr;
      ReadAhead(f, uid, pid, first, last, block0, drops_before);
    }
  }
}

void PacsetFs::GatherWrite(fuse_req_t req, const char* buf, size_t size, uint64_t fh) {
  // Malformed requests are not logged: any local user may write here.
  StatusOr<GatherRequest> r = ParseGatherRequest(buf, size);
  if (!r.ok()) return (void)fuse_reply_err(req, EINVAL);
  // Only blocks its writer could read through the forest file now
  // (ForestTable::FindGatherable): by the uid, not the pid, which is the
  // writing thread's and says nothing of who holds the forest open.
  std::shared_ptr<ForestInode> f = table_->FindGatherable(r->inode, fuse_req_ctx(req)->uid);
  if (!f) return (void)fuse_reply_err(req, ESTALE);
  for (uint64_t b : r->blocks)
    if (b >= f->info.block_count) return (void)fuse_reply_err(req, EINVAL);
  auto g = std::make_shared<const GatherHandles::Request>(
      GatherHandles::Request{std::move(f), std::move(r->blocks)});
  // EBADF, or ENOMEM over the memory caps (fs/internal/gather_handles.h).
  if (const int err = gathers_.SetRequest(fh, std::move(g)); err != 0)
    return (void)fuse_reply_err(req, err);
  fuse_reply_write(req, size);
}

void PacsetFs::GatherRead(fuse_req_t req, size_t size, off_t off, uint64_t fh) {
  const Notifier::GatherScope serving(notifier_.get());  // pushes wait for quiet gathers
  std::shared_ptr<const GatherHandles::Request> g;
  if (!gathers_.Get(fh, &g)) return (void)fuse_reply_err(req, EBADF);
  if (!g) return (void)fuse_reply_err(req, EINVAL);
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  // The reader too must still be able to read the forest file (the request
  // may be older than a removal, and the reader another user than the writer).
  if (!table_->FindGatherable(g->forest->ino, fuse_req_ctx(req)->uid))
    return (void)fuse_reply_err(req, ESTALE);
  const ForestInode& f = *g->forest;
  const uint64_t bs = f.info.block_size, total = g->blocks.size() * bs;
  if (static_cast<uint64_t>(off) >= total || size == 0)
    return (void)fuse_reply_buf(req, nullptr, 0);
  const uint64_t end = std::min<uint64_t>(total, static_cast<uint64_t>(off) + size);
  const uint64_t first = static_cast<uint64_t>(off) / bs, last = (end - 1) / bs;
  // Each distinct block of this read once (a request may repeat one), in
  // file order: wanted[0, needed).
  auto distinct = [&](uint64_t from, uint64_t to) {  // request blocks [from, to)
    std::vector<uint64_t> v(g->blocks.begin() + from, g->blocks.begin() + to);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  std::vector<uint64_t> wanted = distinct(first, last + 1);
  const size_t needed = wanted.size();
  // The kernel splits a reply larger than one FUSE request (1 MiB) into
  // reads that come one after another: the first one also fetches the rest
  // of the request (up to kGatherAheadBytes), so that all its blocks are in
  // flight together and the later reads are answered from the cache.
  if (off == 0 && end < total) {
    const uint64_t ahead_end = std::min<uint64_t>(
        g->blocks.size(), last + 1 + std::max<uint64_t>(1, kGatherAheadBytes / bs));
    for (uint64_t b : distinct(last + 1, ahead_end))
      if (!std::binary_search(wanted.begin(), wanted.begin() + needed, b)) wanted.push_back(b);
  }
  const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  f.stats->gathers.fetch_add(1, std::memory_order_relaxed);
  std::vector<BlockData> data;
  std::vector<Status> status;
  std::vector<BlockCache::Source> src;
  const uint64_t drops_before = notifier_->drops();  // before the fetch: see Notifier::drops
  const uint64_t t0 = MonotonicNowNs();
  reader_->GetMany(f, wanted, needed, &data, &status, &src);
  const uint64_t latency = MonotonicNowNs() - t0;
  std::vector<uint64_t> fresh;  // fetched from the store: pushed into the page cache
  for (size_t i = 0; i < wanted.size(); ++i) {
    const bool ahead = i >= needed;  // answered by a later read, which records its access
    tracing_.RecordAccess(f, wanted[i], src[i], ahead ? 0 : static_cast<uint32_t>(bs), pid, latency,
                          status[i].ok(), /*prefetch=*/ahead);
    if (ahead && src[i] == BlockCache::Source::kStore && status[i].ok())
      f.stats->prefetched.fetch_add(1, std::memory_order_relaxed);
    if (!status[i].ok()) {
      if (ahead) continue;  // best effort: the read that needs it tries again
      f.stats->errors.fetch_add(1, std::memory_order_relaxed);
      return (void)fuse_reply_err(req, StatusToErrno(status[i]));
    }
    if (src[i] == BlockCache::Source::kStore) fresh.push_back(wanted[i]);
  }
  std::sort(fresh.begin(), fresh.end());
  std::vector<iovec> iov;
  iov.reserve(last - first + 1);
  for (uint64_t i = first; i <= last; ++i) {
    const size_t k = static_cast<size_t>(
        std::lower_bound(wanted.begin(), wanted.begin() + needed, g->blocks[i]) - wanted.begin());
    const uint64_t lo = std::max<uint64_t>(static_cast<uint64_t>(off), i * bs) - i * bs;
    const uint64_t hi = std::min<uint64_t>(end, (i + 1) * bs) - i * bs;
    iov.push_back({const_cast<char*>(data[k]->data()) + lo, hi - lo});
  }
  f.stats->read_bytes.fetch_add(end - static_cast<uint64_t>(off), std::memory_order_relaxed);
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
  if (opts_.push_blocks) {
    for (size_t i = 0; i < fresh.size();) {  // ascending: push runs
      size_t j = i + 1;
      while (j < fresh.size() && fresh[j] == fresh[j - 1] + 1) ++j;
      notifier_->PushAfterGathers(g->forest, fresh[i], j - i, drops_before);
      i = j;
    }
  }
}

// Version 2 of the gather protocol (protocol/gather.h): the request on the
// forest file's own handle, the blocks back through its page cache.
void PacsetFs::Ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, fuse_file_info* fi,
                     unsigned flags, const void* in_buf, size_t in_bufsz) {
  // Never ENOSYS: the kernel would take it as "no ioctls at all".
  if (ino < kFirstForestIno || cmd != kForestGatherIoctl || (flags & FUSE_IOCTL_DIR))
    return (void)fuse_reply_err(req, ENOTTY);
  // Malformed requests are not logged: any local user may send them.
  StatusOr<GatherRequest> r = ParseForestGather(static_cast<const char*>(in_buf), in_bufsz);
  if (!r.ok()) return (void)fuse_reply_err(req, EINVAL);
  // Only for the user who opened this handle (its fh is the opener's uid):
  // a descriptor passed to another user gathers nothing for them.
  if (fuse_req_ctx(req)->uid != static_cast<uint32_t>(fi->fh))
    return (void)fuse_reply_err(req, EACCES);
  std::shared_ptr<ForestInode> f = table_->Find(ino);
  if (!f) return (void)fuse_reply_err(req, ESTALE);
  for (uint64_t b : r->blocks)
    if (b >= f->info.block_count) return (void)fuse_reply_err(req, EINVAL);
  if (r->blocks.empty()) return (void)fuse_reply_ioctl(req, 0, nullptr, 0);  // the probe
  const Notifier::GatherScope serving(notifier_.get());  // deferred pushes wait meanwhile
  std::vector<uint64_t> wanted = r->blocks;              // each distinct block once, in file order
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  const uint64_t bs = f->info.block_size;
  f->stats->gathers.fetch_add(1, std::memory_order_relaxed);
  std::vector<BlockData> data;
  std::vector<Status> status;
  std::vector<BlockCache::Source> src;
  const uint64_t drops_before = notifier_->drops();  // before the fetch: see Notifier::drops
  const uint64_t t0 = MonotonicNowNs();
  reader_->GetMany(*f, wanted, wanted.size(), &data, &status, &src);
  const uint64_t latency = MonotonicNowNs() - t0;
  int err = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    tracing_.RecordAccess(*f, wanted[i], src[i], static_cast<uint32_t>(bs), pid, latency,
                          status[i].ok());
    if (!status[i].ok() && err == 0) err = StatusToErrno(status[i]);
  }
  if (err != 0) {
    f->stats->errors.fetch_add(1, std::memory_order_relaxed);
    return (void)fuse_reply_err(req, err);
  }
  f->stats->read_bytes.fetch_add(r->blocks.size() * bs, std::memory_order_relaxed);
  // The push is the reply's payload. A push waits for the lock of a page
  // that a read has in flight, which a worker must serve: at most
  // max_threads - 1 workers push at once, so one is always free for reads
  // (fs/DESIGN.md, "One round trip"); past that, or after a drop (which a
  // push would undo), nothing is pushed and the client reads the blocks
  // through the file as any reader.
  std::vector<bool> pushed(wanted.size(), false);
  const int pushers = pushing_.fetch_add(1, std::memory_order_acq_rel);
  if (pushers < opts_.max_threads - 1 && notifier_->drops() == drops_before && se_) {
    std::string run;  // a run of adjacent blocks goes in one notification
    for (size_t i = 0; i < wanted.size();) {
      size_t j = i + 1;
      while (j < wanted.size() && wanted[j] == wanted[j - 1] + 1) ++j;
      const char* at = data[i]->data();
      size_t len = data[i]->size();
      if (j - i > 1) {
        run.clear();
        for (size_t k = i; k < j; ++k) run += *data[k];
        at = run.data();
        len = run.size();
      }
      fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
      bv.buf[0].mem = const_cast<char*>(at);
      const bool ok = fuse_lowlevel_notify_store(se_, f->ino, wanted[i] * bs, &bv,
                                                 static_cast<fuse_buf_copy_flags>(0)) == 0;
      for (size_t k = i; k < j; ++k) pushed[k] = ok;
      i = j;
    }
  }
  pushing_.fetch_sub(1, std::memory_order_acq_rel);
  uint64_t pushed_blocks = 0, answered = 0;
  for (size_t i = 0; i < wanted.size(); ++i) pushed_blocks += pushed[i];
  for (uint64_t b : r->blocks)
    answered += pushed[std::lower_bound(wanted.begin(), wanted.end(), b) - wanted.begin()];
  f->stats->pushed.fetch_add(pushed_blocks, std::memory_order_relaxed);
  fuse_reply_ioctl(req, static_cast<int>(answered), nullptr, 0);
}

void PacsetFs::Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size,
                     fuse_file_info* fi) {
  if (ino == kGatherIno) return GatherWrite(req, buf, size, fi->fh);
  if (ino != kControlIno || opts_.read_only) return (void)fuse_reply_err(req, EROFS);
  if (!MayControl(req)) return (void)fuse_reply_err(req, EACCES);
  std::string text(buf, size);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  auto cmd = ParseControlCommand(text);
  auto done = [req, size, text](Status s) {
    if (s.ok()) return (void)fuse_reply_write(req, size);
    Log(LOG_WARNING, "control '%s': %s", text.c_str(), s.ToString().c_str());
    fuse_reply_err(req, StatusToErrno(s));
  };
  if (!cmd.ok()) return done(cmd.status());
  Control(*cmd, std::move(done));
}

void PacsetFs::StatFs(fuse_req_t req) {
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  st.f_bsize = 4096;
  st.f_frsize = 4096;
  st.f_namemax = 255;
  uint64_t bytes = 0, files = 0;
  table_->Totals(&files, &bytes);
  st.f_blocks = bytes / 4096;
  st.f_files = files;
  fuse_reply_statfs(req, &st);
}

namespace {

// Runs a handler so that no exception reaches libfuse (which would abort the
// daemon and leave a dead mount): whatever the handler throws becomes ENOMEM
// (std::bad_alloc) or EIO, replied here. Handlers reply as their last step
// (what follows a reply is noexcept), so a throw means nothing was replied.
template <typename Handler>
void Guarded(fuse_req_t req, const char* op, Handler&& handler) noexcept {
  int err = 0;
  try {
    handler();
    return;
  } catch (const std::bad_alloc&) {
    err = ENOMEM;
  } catch (const std::exception& e) {
    Log(LOG_ERR, "%s: internal error: %s", op, e.what());
    err = EIO;
  } catch (...) {
    Log(LOG_ERR, "%s: internal error", op);
    err = EIO;
  }
  fuse_reply_err(req, err);
}

// forget must not be replied to with an error: it gets no reply at all.
template <typename Handler>
void GuardedNoReply(fuse_req_t req, Handler&& handler) noexcept {
  try {
    handler();
  } catch (...) {
    Log(LOG_ERR, "forget: internal error (the inode may stay cached)");
  }
  fuse_reply_none(req);
}

}  // namespace

const fuse_lowlevel_ops& PacsetFs::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof(o));
    o.init = [](void* userdata, fuse_conn_info* conn) {
      try {
        static_cast<PacsetFs*>(userdata)->Init(conn);
      } catch (...) {
        Log(LOG_ERR, "init: internal error");
      }
    };
    o.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
      Guarded(req, "lookup", [&] { FsOf(req)->Lookup(req, parent, name); });
    };
    o.forget = [](fuse_req_t req, fuse_ino_t ino, uint64_t n) {
      GuardedNoReply(req, [&] { FsOf(req)->Forget(ino, n); });
    };
    o.forget_multi = [](fuse_req_t req, size_t count, fuse_forget_data* forgets) {
      GuardedNoReply(req, [&] {
        for (size_t i = 0; i < count; ++i) FsOf(req)->Forget(forgets[i].ino, forgets[i].nlookup);
      });
    };
    o.getattr = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
      Guarded(req, "getattr", [&] { FsOf(req)->GetAttr(req, ino); });
    };
    o.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
      Guarded(req, "readdir", [&] { FsOf(req)->ReadDir(req, ino, size, off); });
    };
    o.open = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
      Guarded(req, "open", [&] { FsOf(req)->Open(req, ino, fi); });
    };
    o.release = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
      Guarded(req, "release", [&] { FsOf(req)->Release(req, ino, fi); });
    };
    o.read = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
      Guarded(req, "read", [&] { FsOf(req)->Read(req, ino, size, off, fi); });
    };
    o.write = [](fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t,
                 fuse_file_info* fi) {
      Guarded(req, "write", [&] { FsOf(req)->Write(req, ino, buf, size, fi); });
    };
    o.ioctl = [](fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info* fi,
                 unsigned flags, const void* in_buf, size_t in_bufsz, size_t) {
      Guarded(req, "ioctl", [&] { FsOf(req)->Ioctl(req, ino, cmd, fi, flags, in_buf, in_bufsz); });
    };
    o.statfs = [](fuse_req_t req, fuse_ino_t) {
      Guarded(req, "statfs", [&] { FsOf(req)->StatFs(req); });
    };
    return o;
  }();
  return ops;
}

}  // namespace fs_internal
}  // namespace pacset
