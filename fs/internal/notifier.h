// The notifier thread: every notification pacsetfs sends the kernel about
// file contents comes from this one thread, never from a request thread.
//
//   * pushes freshly fetched blocks whole into the page cache
//     (fuse_lowlevel_notify_store), so a reader's next faults in a block cost
//     no request; blocks a gather fetched are pushed once gathers go quiet
//     (PushAfterGathers: the engine that asked has them already);
//   * prefetches a forest's metadata and bin blocks when it is first opened
//     (-o prefetch_bins);
//   * invalidates the pages of inodes for `drop` (notify_inval_inode).
//
// Why a thread of its own: both notifications wait for page locks, and a
// page stays locked while a read of it is in flight, which needs a request
// thread to finish. Sent from a request thread, they deadlock once every
// request thread waits (with -o threads=1, at the first read in flight).
//
// Thread-safety: every method may be called from any thread. None throws.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "fs/internal/block_reader.h"
#include "fs/internal/inodes.h"
#include "fs/internal/tracing.h"
#include "util/mutex.h"

namespace pacset {
namespace fs_internal {

class Notifier {
 public:
  // Borrows everything; `se` may be null (nothing is sent to a kernel then).
  Notifier(fuse_session* se, BlockReader* reader, const Tracing* tracing)
      : se_(se), reader_(reader), tracing_(tracing) {}
  ~Notifier() { Stop(); }

  void Start() EXCLUDES(mu_);
  // Stops the thread. Queued pushes are dropped; queued invalidations still
  // run (their `then` replies to a request).
  void Stop() EXCLUDES(mu_);

  // How many drops (Invalidate) were queued so far. A request handler reads
  // it before it fetches the blocks it will push, and passes it to Push: a
  // drop that came in between (after the client had its reply, before the
  // handler queued the push) found no push to discard, so the push is
  // discarded when it is queued.
  uint64_t drops() const noexcept { return drops_.load(std::memory_order_acquire); }
  // Best effort: dropped when 4096 pushes are already queued, or when a
  // drop was queued since `drops_before` (drops()).
  // Pushes blocks [block, block + count) (one notification for the run).
  // `hold` is kept until the push is done or dropped (what a read-ahead
  // holds of its caps: FaultReadahead::Plan).
  void Push(const std::shared_ptr<ForestInode>& f, uint64_t block, uint64_t count,
            uint64_t drops_before, std::shared_ptr<const void> hold = nullptr) noexcept
      EXCLUDES(mu_);
  // Push, but the push (and the work queued behind it) waits while any
  // gather is served and until kGatherQuietMs after the last one, at most
  // kPushDeferMaxMs. For blocks a gather fetched: its client has them
  // already, and a cold request's next gathers would otherwise share the
  // cores with one notification per block (fs/DESIGN.md, "The gather file":
  // "Pushes wait for quiet gathers").
  void PushAfterGathers(const std::shared_ptr<ForestInode>& f, uint64_t block, uint64_t count,
                        uint64_t drops_before) noexcept EXCLUDES(mu_);
  // Brackets the serving of one gather read (GatherScope).
  void GatherStarted() noexcept { gathers_.fetch_add(1, std::memory_order_relaxed); }
  void GatherEnded() noexcept;
  class GatherScope {
   public:
    explicit GatherScope(Notifier* n) : n_(n) {  // may be null: nothing to tell
      if (n_) n_->GatherStarted();
    }
    ~GatherScope() {
      if (n_) n_->GatherEnded();
    }
    GatherScope(const GatherScope&) = delete;
    GatherScope& operator=(const GatherScope&) = delete;

   private:
    Notifier* const n_;
  };
  // Whether a gather is being served or one ended within `ms` (an engine
  // that gathers is at work: it names the blocks it needs itself).
  bool GatheredWithin(uint64_t ms) const noexcept {
    if (gathers_.load(std::memory_order_acquire) > 0) return true;
    const uint64_t end = last_gather_end_ns_.load(std::memory_order_relaxed);
    return end != 0 && MonotonicNowNs() < end + ms * 1000000;
  }
  static constexpr uint64_t kGatherQuietMs = 2;
  static constexpr uint64_t kPushDeferMaxMs = 1000;

  void PrefetchBins(const std::shared_ptr<ForestInode>& f) noexcept EXCLUDES(mu_);
  // Drops every page of `inodes` from the page cache (even from live
  // mappings), then calls `then` on the notifier thread. Never dropped:
  // `then` runs exactly once, also when Stop comes first. Pushes of those
  // inodes still queued are dropped (a push after the drop would undo it),
  // and the drop goes ahead of pushes waiting for gathers to go quiet.
  void Invalidate(std::vector<std::shared_ptr<ForestInode>> inodes, std::function<void()> then)
      EXCLUDES(mu_);

 private:
  struct Work {
    enum class Kind { kPush, kPrefetchBins, kInvalidate } kind;
    std::shared_ptr<ForestInode> inode;                // kPush, kPrefetchBins
    uint64_t block = 0;                                // kPush
    uint64_t count = 1;                                // kPush
    std::vector<std::shared_ptr<ForestInode>> inodes;  // kInvalidate
    std::function<void()> then;                        // kInvalidate
    uint64_t defer_until_ns = 0;         // PushAfterGathers: wait for quiet gathers until then
    uint64_t drops_before = 0;           // kPush: drops() before its blocks were fetched
    std::shared_ptr<const void> hold{};  // kPush: released with the work
  };
  // Whether `w` (at the front of the queue) waits now; if so, how long to
  // sleep before looking again.
  bool MustWait(const Work& w, std::chrono::milliseconds* sleep) const;
  void EnqueueBestEffort(Work w) noexcept EXCLUDES(mu_);
  void Loop() EXCLUDES(mu_);
  void Run(Work& w) noexcept;
  void PushToKernel(const ForestInode& f, uint64_t block, const BlockData& data);
  void PushRun(const ForestInode& f, uint64_t block, uint64_t count);
  void DoPrefetchBins(const std::shared_ptr<ForestInode>& f);

  fuse_session* const se_;
  BlockReader* const reader_;
  const Tracing* const tracing_;

  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  size_t best_effort_queued_ GUARDED_BY(mu_) = 0;
  std::deque<Work> queue_ GUARDED_BY(mu_);
  std::thread thread_;
  std::atomic<uint64_t> drops_{0};  // incremented under mu_ (Invalidate)
  std::atomic<int> gathers_{0};     // gathers being served
  std::atomic<uint64_t> last_gather_end_ns_{0};
};

}  // namespace fs_internal
}  // namespace pacset
