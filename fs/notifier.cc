#include "fs/internal/notifier.h"

#include <unistd.h>

#include <algorithm>

#include "layout/block.h"
#include "layout/pac_format.h"
#include "trace/trace_format.h"

namespace pacset {
namespace fs_internal {

void Notifier::Start() {
  {
    MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Notifier::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  // Whatever is left: invalidations still owe their requests a reply.
  std::deque<Work> left;
  {
    MutexLock lock(&mu_);
    left.swap(queue_);
    best_effort_queued_ = 0;
  }
  for (Work& w : left)
    if (w.kind == Work::Kind::kInvalidate) Run(w);
}

void Notifier::Push(const std::shared_ptr<ForestInode>& f, uint64_t block, uint64_t count,
                    uint64_t drops_before, std::shared_ptr<const void> hold) noexcept {
  Work w{Work::Kind::kPush, f, block, count, {}, {}};
  w.drops_before = drops_before;
  w.hold = std::move(hold);
  EnqueueBestEffort(std::move(w));
}

void Notifier::PushAfterGathers(const std::shared_ptr<ForestInode>& f, uint64_t block,
                                uint64_t count, uint64_t drops_before) noexcept {
  Work w{Work::Kind::kPush, f, block, count, {}, {}};
  w.defer_until_ns = MonotonicNowNs() + kPushDeferMaxMs * 1000000;
  w.drops_before = drops_before;
  EnqueueBestEffort(std::move(w));
}

void Notifier::GatherEnded() noexcept {
  last_gather_end_ns_.store(MonotonicNowNs(), std::memory_order_relaxed);
  gathers_.fetch_sub(1, std::memory_order_release);
}

bool Notifier::MustWait(const Work& w, std::chrono::milliseconds* sleep) const {
  if (w.defer_until_ns == 0) return false;
  const uint64_t now = MonotonicNowNs();
  if (now >= w.defer_until_ns) return false;
  const bool serving = gathers_.load(std::memory_order_acquire) > 0;
  const uint64_t quiet_at =
      last_gather_end_ns_.load(std::memory_order_relaxed) + kGatherQuietMs * 1000000;
  if (!serving && now >= quiet_at) return false;
  // Polled: a gather ending does not signal (it would take mu_ every time).
  const uint64_t until =
      std::min(w.defer_until_ns, serving ? now + kGatherQuietMs * 1000000 : quiet_at);
  *sleep = std::chrono::milliseconds(std::max<uint64_t>(1, (until - now + 999999) / 1000000));
  return true;
}

void Notifier::PrefetchBins(const std::shared_ptr<ForestInode>& f) noexcept {
  Work w{Work::Kind::kPrefetchBins, f, 0, 1, {}, {}};
  EnqueueBestEffort(std::move(w));
}

void Notifier::EnqueueBestEffort(Work w) noexcept {
  try {
    MutexLock lock(&mu_);
    if (best_effort_queued_ >= 4096) return;  // best effort
    // A drop since its blocks were fetched: pushing them would undo it.
    if (w.kind == Work::Kind::kPush && w.drops_before != drops_.load(std::memory_order_relaxed))
      return;
    queue_.push_back(std::move(w));
    ++best_effort_queued_;
  } catch (...) {
    return;  // out of memory: a push is only an optimisation
  }
  cv_.SignalAll();
}

void Notifier::Invalidate(std::vector<std::shared_ptr<ForestInode>> inodes,
                          std::function<void()> then) {
  {
    MutexLock lock(&mu_);
    drops_.fetch_add(1, std::memory_order_acq_rel);  // pushes of earlier fetches, queued later
    const size_t before = queue_.size();
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [&](const Work& w) {
                                  return w.kind == Work::Kind::kPush &&
                                         std::find(inodes.begin(), inodes.end(), w.inode) !=
                                             inodes.end();
                                }),
                 queue_.end());
    best_effort_queued_ -= before - queue_.size();
    // Ahead of pushes waiting for gathers to go quiet (of other inodes now):
    // a drop does not wait for them.
    auto at = std::find_if(queue_.begin(), queue_.end(),
                           [](const Work& w) { return w.defer_until_ns != 0; });
    queue_.insert(at,
                  Work{Work::Kind::kInvalidate, nullptr, 0, 1, std::move(inodes), std::move(then)});
  }
  cv_.SignalAll();
}

void Notifier::PushToKernel(const ForestInode& f, uint64_t block, const BlockData& data) {
  if (!se_) return;
  fuse_bufvec bv = FUSE_BUFVEC_INIT(data->size());
  bv.buf[0].mem = const_cast<char*>(data->data());
  const int rc = fuse_lowlevel_notify_store(se_, f.ino, block * f.info.block_size, &bv,
                                            static_cast<fuse_buf_copy_flags>(0));
  if (rc == 0) f.stats->pushed.fetch_add(1, std::memory_order_relaxed);
}

// One notification for a run of blocks (a window read ahead): the kernel
// takes one copy of the run instead of a round trip per block.
void Notifier::PushRun(const ForestInode& f, uint64_t block, uint64_t count) {
  if (count == 1) {
    // Usually a cache hit (it was just fetched); not counted as a read.
    auto d = reader_->GetUncounted(f, block);
    if (d.ok()) PushToKernel(f, block, *d);
    return;
  }
  if (!se_) return;
  std::string run;
  run.reserve(count * f.info.block_size);
  for (uint64_t b = block; b < block + count; ++b) {
    auto d = reader_->GetUncounted(f, b);
    if (!d.ok()) break;
    run += **d;
  }
  if (run.empty()) return;
  fuse_bufvec bv = FUSE_BUFVEC_INIT(run.size());
  bv.buf[0].mem = run.data();
  const int rc = fuse_lowlevel_notify_store(se_, f.ino, block * f.info.block_size, &bv,
                                            static_cast<fuse_buf_copy_flags>(0));
  if (rc == 0) f.stats->pushed.fetch_add(run.size() / f.info.block_size, std::memory_order_relaxed);
}

void Notifier::DoPrefetchBins(const std::shared_ptr<ForestInode>& f) {
  BlockCache::Source src;
  auto b0 = reader_->Get(*f, 0, &src);
  if (!b0.ok()) return;
  auto h = PacHeader::DecodeFrom((*b0)->data(), f->info.block_size - kBlockTrailerSize, f->name);
  if (!h.ok()) return;
  const uint64_t n =
      std::min<uint64_t>(h->node_first_block + h->bin_block_count, f->info.block_count);
  for (uint64_t b = 0; b < n; ++b) {
    const uint64_t t0 = MonotonicNowNs();
    auto d = reader_->Get(*f, b, &src);
    tracing_->RecordAccess(*f, b, src, 0, static_cast<uint32_t>(getpid()), MonotonicNowNs() - t0,
                           d.ok(), /*prefetch=*/true);
    if (!d.ok()) return;
    f->stats->prefetched.fetch_add(1, std::memory_order_relaxed);
    PushToKernel(*f, b, *d);
  }
}

void Notifier::Run(Work& w) noexcept {
  try {
    switch (w.kind) {
      case Work::Kind::kPush:
        PushRun(*w.inode, w.block, w.count);
        break;
      case Work::Kind::kPrefetchBins:
        DoPrefetchBins(w.inode);
        break;
      case Work::Kind::kInvalidate:
        if (se_)
          for (auto& f : w.inodes) fuse_lowlevel_notify_inval_inode(se_, f->ino, 0, 0);
        break;
    }
  } catch (...) {
    // Pushes and prefetches are optimisations; an invalidation's `then` still runs.
  }
  if (w.then) {
    try {
      w.then();
    } catch (...) {
      // `then` replies to a request and is written not to throw.
    }
  }
}

void Notifier::Loop() {
  mu_.Lock();
  while (true) {
    while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
    if (stop_) break;
    std::chrono::milliseconds sleep{0};
    if (MustWait(queue_.front(), &sleep)) {
      cv_.WaitFor(&mu_, sleep);
      continue;
    }
    Work w = std::move(queue_.front());
    queue_.pop_front();
    if (w.kind != Work::Kind::kInvalidate) --best_effort_queued_;
    mu_.Unlock();
    Run(w);
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace fs_internal
}  // namespace pacset
