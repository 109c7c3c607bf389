// The push thread: puts freshly fetched blocks whole into the kernel's page
// cache (fuse_lowlevel_notify_store), so a reader's next faults in a block
// cost no request, and prefetches a forest's metadata and bin blocks when it
// is first opened (-o prefetch_bins).
//
// Its own thread because notify_store may wait for page locks that in-flight
// reads hold, and those reads need a worker thread to finish.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "fs/internal/block_reader.h"
#include "fs/internal/inodes.h"
#include "fs/internal/tracing.h"
#include "util/mutex.h"

namespace pacset {
namespace fs_internal {

class Pusher {
 public:
  // Borrows everything; `se` may be null (nothing is pushed then).
  Pusher(fuse_session* se, BlockReader* reader, const Tracing* tracing)
      : se_(se), reader_(reader), tracing_(tracing) {}
  ~Pusher() { Stop(); }

  void Start() EXCLUDES(mu_);
  // Stops the thread; queued work is dropped.
  void Stop() EXCLUDES(mu_);

  // Best effort: dropped when 4096 pushes are already queued.
  void Push(const std::shared_ptr<ForestInode>& f, uint64_t block) EXCLUDES(mu_);
  void PrefetchBins(const std::shared_ptr<ForestInode>& f) EXCLUDES(mu_);

 private:
  static constexpr uint64_t kPrefetchBins = UINT64_MAX;  // a queue entry's "block"
  void Enqueue(const std::shared_ptr<ForestInode>& f, uint64_t block) EXCLUDES(mu_);
  void Loop() EXCLUDES(mu_);
  void PushToKernel(const ForestInode& f, uint64_t block, const BlockData& data);
  void DoPrefetchBins(const std::shared_ptr<ForestInode>& f);

  fuse_session* const se_;
  BlockReader* const reader_;
  const Tracing* const tracing_;

  Mutex mu_;
  CondVar cv_{&mu_};
  bool stop_ GUARDED_BY(mu_) = false;
  std::deque<std::pair<std::shared_ptr<ForestInode>, uint64_t>> queue_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace fs_internal
}  // namespace pacset
