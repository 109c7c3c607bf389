// The block source over a PacFile (engine/block_source.h NewPacFileSource),
// as its fetchers see it. Where each job lives:
//   engine/pac_file_source.cc      choosing how to read, Ready, the pools,
//                                  a fetched block's check
//   engine/pac_file_fetchers.cc    the fetchers: a ring per request, or jobs
//                                  of the read threads (a gather on a mount)
//   engine/pac_file_warm_image.cc  promoting a range to the warm image
//   engine/internal/               the parts: rings (block_ring.h), read
//                                  threads (read_threads.h) and their
//                                  results (completions.h), the fetched
//                                  copies (arrived_blocks.h), residency
//                                  (residency.h), buffers (buffer_pool.h)
// Why it reads the way it does: engine/DESIGN.md, "Reading a mapped file".
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/block_source.h"
#include "engine/internal/block_ring.h"
#include "engine/internal/buffer_pool.h"
#include "engine/internal/completions.h"
#include "engine/internal/read_threads.h"
#include "engine/internal/residency.h"
#include "layout/pac_file.h"
#include "protocol/gather.h"
#include "util/free_list.h"
#include "util/mutex.h"

namespace pacset::internal {

// Thread-safety: as BlockSource.
class PacFileSource final : public BlockSource {
 public:
  PacFileSource(const PacFile& file, bool verify, uint32_t max_in_flight, BlockIo io);
  ~PacFileSource() override;

  uint32_t block_size() const override { return bs_; }
  uint64_t block_count() const override { return blocks_; }
  const char* Ready(uint64_t b) override;
  std::unique_ptr<BlockFetcher> NewFetcher() override;
  const char* WarmImage(uint64_t first, uint64_t count, uint64_t work, bool read_missing) override;
  const char* io_name() const override;
  uint32_t default_max_in_flight() const override { return max_threads_; }
  uint64_t sequential_read_walks_factor() const override;

  // For its fetchers (engine/pac_file_fetchers.cc).
  const PacFile& file() const { return file_; }
  // Whether blocks go through the mount's gather file, and how many to a
  // gather.
  bool gather() const { return gather_; }
  size_t gather_batch() const { return gather_batch_; }
  BufferPool* buffers() { return buffers_.get(); }
  // A ring for a request: a pooled one, or a new one (null if the kernel
  // refuses it now).
  std::unique_ptr<BlockRing> TakeRing();
  // Back to the pool once its reads are done: a fetcher may be destroyed
  // with reads in flight, whose buffers the kernel still writes into.
  void GiveBackRing(std::unique_ptr<BlockRing> ring);
  // Reads `blocks` for `done`: one job of the read threads (a gather of all
  // of them on a pacsetfs mount, else a pread each), at once for an
  // in-memory file.
  void Submit(std::vector<uint64_t> blocks, const std::shared_ptr<Completions>& done);
  // Block b after a read of `res` bytes (or -errno) into `buf`: verified and
  // marked Ready. A short, failed or not yet made read (res < 0) is read
  // with pread, whose status names the block and the cause (a file
  // truncated since it was opened, EIO on a mount).
  Status Finish(uint64_t b, int res, char* buf);
  // A fetcher's view of what is resident, taken window by window.
  ResidencySnapshot Snapshot() const { return ResidencySnapshot(base_, file_.size(), bs_, page_); }
  // Block b was not resident at the fetcher's snapshot of its part of the
  // mapped file, Ready (verified once) or not: when memory is short the
  // kernel evicts verified blocks too, and walking the mapping into one is
  // a page fault, one 4 KiB disk read at a time; fetched, it is read in
  // parallel with the request's other misses (one-row serving of the
  // 682-tree forest with 1/8 of it in memory: engine/DESIGN.md, "When
  // memory is short").
  // A Ready block the snapshot missed is asked about again (one mincore):
  // resident now means this request fetched it since the snapshot (no
  // second fetch), not resident means it was evicted since verified.
  bool Missing(uint64_t b, ResidencySnapshot* snapshot) const {
    if (!mapped_ || !snapshot->Missing(b)) return false;
    const uint64_t len = std::min<uint64_t>(bs_, file_.size() - b * bs_);
    return !IsReady(b) || !Resident(b * bs_, len);
  }

 private:
  bool IsReady(uint64_t b) const {
    return (ready_[b / 64].load(std::memory_order_acquire) >> (b % 64)) & 1;
  }
  void MarkReady(uint64_t b) {
    ready_[b / 64].fetch_or(uint64_t{1} << (b % 64), std::memory_order_release);
  }
  // True when every page of [offset, offset + len) of the mapping is in the
  // page cache.
  bool Resident(uint64_t offset, uint64_t len) const {
    return PagesResident(base_, file_.size(), page_, offset, len);
  }
  // A gather channel for a request: a pooled one or a new one (null when the
  // gather file cannot be opened now; the blocks are then read one by one).
  std::unique_ptr<GatherChannel> TakeChannel();
  void GiveBackChannel(std::unique_ptr<GatherChannel> c);
  // Reads `blocks` (at most a buffer's worth) into a buffer of the pool,
  // verifies each and hands them to `done`: through a gather channel of the
  // pool on a pacsetfs mount, where a failed gather is read again block by
  // block (each error names its block), else with a pread each.
  void RunJob(const std::vector<uint64_t>& blocks, Completions* done);
  // Makes blocks [first, end) ready: reads them in large sequential reads
  // (from the page cache or the disk) and verifies them (if verify_); blocks
  // already resident need no read when nothing is verified. False on a read
  // error or a corrupt block (which a walk that needs it then reports).
  bool ReadRange(uint64_t first, uint64_t end);

  const PacFile& file_;
  const char* const base_;
  const uint32_t bs_;
  const uint64_t blocks_;
  const uint64_t seed_;  // the file's block seed (PacHeader::block_seed)
  const bool verify_;
  uint32_t max_threads_;  // the bound on blocks in flight per request (set in the constructor)
  const bool mapped_;
  uint64_t page_ = 4096;
  std::unique_ptr<std::atomic<uint64_t>[]> ready_;  // bit b: block b verified and resident

  // The largest promoted range: all its blocks are ready. Ranges are
  // immutable once published and live as long as the source.
  struct Range {
    uint64_t first, end;
  };
  std::atomic<const Range*> warm_{nullptr};
  std::atomic<uint64_t> pending_work_{0};
  std::atomic<bool> corrupt_seen_{false};
  Mutex warm_mu_;
  std::vector<std::unique_ptr<Range>> ranges_ GUARDED_BY(warm_mu_);

  // io_uring: the depth of each request's ring and the rings kept for the
  // next requests; uring_: rings are used (the kernel gave us the first).
  static constexpr size_t kPooledRings = 8;
  uint32_t ring_depth_ = 0;
  bool uring_ = false;
  FreeList<std::unique_ptr<BlockRing>> rings_{kPooledRings};
  // The gather file (a pacsetfs mount): gather_ when fetchers use it, and
  // the channels kept for the next requests.
  bool gather_ = false;
  size_t gather_batch_ = 0;
  FreeList<std::unique_ptr<GatherChannel>> channels_{kPooledRings};
  // The forest file's own gathers (version 2; shared by the read threads),
  // when the daemon answers them: then no gather file is opened.
  std::unique_ptr<ForestGather> forest_gather_;

  std::unique_ptr<BufferPool> buffers_;  // for the read threads' jobs
  // Last, and stopped first in the destructor: its jobs use all of the above.
  std::unique_ptr<ReadThreads> threads_;
};

}  // namespace pacset::internal
