// The read-ahead a plain read of a forest file starts after its reply, for
// page-faulting readers (fs/internal/fault_readahead.h).
#include <algorithm>
#include <vector>

#include "fs/internal/filesystem.h"
#include "trace/trace_format.h"

namespace pacset {
namespace fs_internal {
namespace {

// Blocks of a read-ahead read (and pushed) together.
constexpr uint64_t kReadAheadPiece = 128;
// No read-ahead this long after a gather was served.
constexpr uint64_t kNoReadAheadAfterGatherMs = 1000;

}  // namespace

void PacsetFs::ReadAhead(const std::shared_ptr<ForestInode>& f, uint32_t uid, uint32_t pid,
                         uint64_t first, uint64_t last, const BlockData* block0,
                         uint64_t drops_before) noexcept {
  try {
    if (block0 != nullptr && *block0)
      faults_.Learn(f->ino, **block0, f->info.block_size, f->info.block_count);
    // Not while an engine gathers (protocol/gather.h): it names the blocks
    // it needs, and its own faults (a block evicted after its residency
    // snapshot) must not pull chunks into its rounds.
    if (notifier_->GatheredWithin(kNoReadAheadAfterGatherMs)) return;
    FaultReadahead::Plan plan = faults_.PlanFor(f->ino, uid, first, last, drops_before);
    if (plan.count == 0) return;
    // In pieces, each pushed as soon as it is read: a fault that lands in a
    // block being read ahead waits for its piece (single flight), not for
    // the whole chunk, and the reader finds the first pieces while the
    // rest are read.
    for (uint64_t at = plan.first; at < plan.first + plan.count; at += kReadAheadPiece) {
      std::vector<uint64_t> wanted;
      for (uint64_t b = at; b < std::min(at + kReadAheadPiece, plan.first + plan.count); ++b)
        wanted.push_back(b);
      std::vector<BlockData> data;
      std::vector<Status> status;
      std::vector<BlockCache::Source> src;
      const uint64_t t0 = MonotonicNowNs();
      // None needed: a block that fails is not retried (the fault that needs
      // it tries again) and is not cached.
      reader_->GetMany(*f, wanted, 0, &data, &status, &src);
      const uint64_t latency = MonotonicNowNs() - t0;
      std::vector<uint64_t> fresh;
      for (size_t i = 0; i < wanted.size(); ++i) {
        tracing_.RecordAccess(*f, wanted[i], src[i], 0, pid, latency, status[i].ok(),
                              /*prefetch=*/true);
        if (status[i].ok() && src[i] == BlockCache::Source::kStore) {
          f->stats->prefetched.fetch_add(1, std::memory_order_relaxed);
          fresh.push_back(wanted[i]);
        }
      }
      for (size_t i = 0; i < fresh.size();) {  // ascending: push runs, each holding the plan
        size_t j = i + 1;
        while (j < fresh.size() && fresh[j] == fresh[j - 1] + 1) ++j;
        notifier_->Push(f, fresh[i], j - i, drops_before, plan.hold);
        i = j;
      }
    }
  } catch (...) {
    // Read-ahead is an optimisation: the faults it would have saved still work.
  }
}

}  // namespace fs_internal
}  // namespace pacset
