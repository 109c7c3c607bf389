#include "fs/internal/pusher.h"

#include <unistd.h>

#include <algorithm>

#include "layout/block.h"
#include "layout/pac_format.h"
#include "trace/trace_format.h"

namespace pacset {
namespace fs_internal {

void Pusher::Start() {
  {
    MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Pusher::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Pusher::Push(const std::shared_ptr<ForestInode>& f, uint64_t block) { Enqueue(f, block); }

void Pusher::PrefetchBins(const std::shared_ptr<ForestInode>& f) { Enqueue(f, kPrefetchBins); }

void Pusher::Enqueue(const std::shared_ptr<ForestInode>& f, uint64_t block) {
  MutexLock lock(&mu_);
  if (queue_.size() >= 4096) return;  // best effort
  queue_.push_back({f, block});
  cv_.SignalAll();
}

void Pusher::PushToKernel(const ForestInode& f, uint64_t block, const BlockData& data) {
  if (!se_) return;
  fuse_bufvec bv = FUSE_BUFVEC_INIT(data->size());
  bv.buf[0].mem = const_cast<char*>(data->data());
  const int rc = fuse_lowlevel_notify_store(se_, f.ino, block * f.info.block_size, &bv,
                                            static_cast<fuse_buf_copy_flags>(0));
  if (rc == 0) f.stats->pushed.fetch_add(1, std::memory_order_relaxed);
}

void Pusher::DoPrefetchBins(const std::shared_ptr<ForestInode>& f) {
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

void Pusher::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stop_ && queue_.empty()) cv_.Wait();
    if (stop_) break;
    auto [f, block] = queue_.front();
    queue_.pop_front();
    mu_.Unlock();
    if (block == kPrefetchBins) {
      DoPrefetchBins(f);
    } else {
      // Usually a cache hit (it was just fetched); not counted as a read.
      auto d = reader_->GetUncounted(*f, block);
      if (d.ok()) PushToKernel(*f, block, *d);
    }
    mu_.Lock();
  }
}

}  // namespace fs_internal
}  // namespace pacset
