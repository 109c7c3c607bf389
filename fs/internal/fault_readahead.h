// The daemon's read-ahead for page-faulting readers: programs that map a
// forest file and walk it (numpy.memmap, the independent reader of
// tests/spec/, any mmap engine), one page fault per block.
//
// Why: kernel readahead is off on a mount (a fault reads exactly its page,
// fs/DESIGN.md "Reads"), so such a reader waits for one FUSE round trip per
// block it touches, one after another, while the same reader of a local
// file gets the kernel's read-around on each miss (the device's readahead:
// 8 MiB on the benchmark VM, so a cold row reads the whole file in a few
// large reads and hardly waits). A row's walk touches a few percent of the
// blocks, scattered (the pacset layout orders residual subtrees by weight,
// not by tree: one tree after another jumps back and forth), and rows differ
// (fs/DESIGN.md, "Page-faulting readers"). What the layout does say
// (layout/FORMAT.md §4):
//
//   * the metadata blocks come first: read exactly (an engine opening a
//     forest reads them, then gathers what it needs: it must not pull more);
//   * the bins follow, read by every row: the first fault there reads the
//     whole bin region (up to Options::max_bins_bytes), once per drop;
//   * then the residual node region and, after it, the leaf ids: the first
//     fault in a chunk of Options::chunk_bytes (aligned to the start of its
//     region, never crossing into the next) reads the whole chunk, once per
//     drop — the kernel's read-around, within the layout's regions — in a
//     file of at most Options::max_file_bytes. A row touches about every
//     1 MiB of a file (fs/DESIGN.md), so chunks read the whole file for one
//     row: worth it while that costs about what the row's faults would
//     (256 MiB on the benchmark VM, ~0.3 s against ~1,000 faults), a waste
//     for a forest larger than memory, whose faults past the bins are read
//     exactly.
// The caller runs a plan after it has replied to the fault (the reader does
// not wait for it) and pushes the blocks into the page cache
// (Notifier::Push), so the reader's next faults there cost no request.
//
// Bounded against local users (with allow_other every user may read):
// what a plan reads is counted, from planning until its push is done or
// dropped, against a cap per user (Options::max_bytes_per_user) and a total
// (max_bytes) that every user but root and the mounting user share; those
// two have a budget of the total of their own, so a flood from others never
// takes their read-ahead away. A plan over a cap is not made (the fault is
// still served, exactly, and the chunk may be planned at a later fault). A
// plan reads at most one chunk (or the bins), each chunk once per drop, so a
// reader makes the daemon read no more than the file between two drops; what
// it fetched lives in the daemon's bounded block cache.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fs/internal/inodes.h"
#include "util/mutex.h"

namespace pacset {
namespace fs_internal {

class FaultReadahead {
 public:
  struct Options {
    uint64_t chunk_bytes = 1u << 20;  // 0: no read-ahead at all
    uint64_t max_bins_bytes = 16u << 20;
    uint64_t max_file_bytes = 256u << 20;  // larger files: the bins only
    uint64_t max_bytes_per_user = 32u << 20;
    uint64_t max_bytes = 128u << 20;
    uint32_t mounting_uid = 0;  // with root: uncapped per user, a budget of their own
  };

  // The blocks [first, first + count) to read ahead, and what they hold of
  // the caps until the last copy of `hold` is gone (keep it with the push).
  struct Plan {
    uint64_t first = 0;
    uint64_t count = 0;
    std::shared_ptr<const void> hold;
  };

  explicit FaultReadahead(const Options& o) : opts_(o) {}
  FaultReadahead(const FaultReadahead&) = delete;
  FaultReadahead& operator=(const FaultReadahead&) = delete;

  // Learns the layout of inode `ino` (a generation: it never changes) from
  // its block 0 as the store gave it (verified). Does nothing when it is
  // known already or the header does not fit block 0's payload; a header
  // that does not decode leaves the inode without read-ahead.
  void Learn(fuse_ino_t ino, const std::string& block0, uint32_t block_size, uint64_t block_count)
      EXCLUDES(mu_);
  bool Knows(fuse_ino_t ino) const EXCLUDES(mu_);

  // What to read ahead after serving blocks [first, last] of `ino` to user
  // `uid`; count 0 for nothing. `drops` is Notifier::drops(): after a drop
  // every chunk and the bins are cold again.
  Plan PlanFor(fuse_ino_t ino, uint32_t uid, uint64_t first, uint64_t last, uint64_t drops)
      EXCLUDES(mu_);

  // Bytes planned and not yet released, in total and of one user.
  uint64_t held_bytes() const EXCLUDES(mu_);
  uint64_t held_bytes_of(uint32_t uid) const EXCLUDES(mu_);
  // For the stats file: held now, the most one capped user and all capped
  // users together ever held, plans refused over a cap.
  struct Totals {
    uint64_t held_bytes = 0;
    uint64_t peak_bytes_of_one_user = 0;
    uint64_t peak_bytes_capped = 0;
    uint64_t refused = 0;
  };
  Totals totals() const EXCLUDES(mu_);

 private:
  struct Layout {
    uint64_t bins_first = 0, bins_end = 0;  // [node_first_block, + bin_block_count)
    uint64_t node_end = 0;                  // end of the node region
    uint64_t block_count = 0;
    uint32_t block_size = 0;
    uint64_t drops = 0;             // what is read below is since this drop
    bool bins_read = false;         // the bins were planned
    bool chunks = true;             // the file is small enough for chunks
    std::vector<bool> chunks_read;  // the residual region's chunks, then the rest's
  };
  // What plans hold of the caps; shared with their holds, which may
  // outlive this object in a queued push. Its lock is taken under mu_.
  struct Budget {
    Mutex mu;
    std::unordered_map<uint32_t, uint64_t> held_of GUARDED_BY(mu);  // capped users only
    uint64_t held_capped GUARDED_BY(mu) = 0;                        // every capped user
    uint64_t held_uncapped GUARDED_BY(mu) = 0;                      // root and the mounting user
    uint64_t peak_of_one_user GUARDED_BY(mu) = 0;
    uint64_t peak_capped GUARDED_BY(mu) = 0;
    uint64_t refused GUARDED_BY(mu) = 0;
  };
  static constexpr size_t kMaxLayouts = 4096;
  static constexpr uint64_t kMaxChunks = uint64_t{1} << 20;  // per inode; more: larger chunks

  uint64_t ChunkBlocks(const Layout& l) const;
  // A plan of [first, end) for uid within the caps, or an empty one.
  Plan Grant(uint32_t uid, uint64_t first, uint64_t end, uint32_t block_size);

  const Options opts_;
  const std::shared_ptr<Budget> budget_ = std::make_shared<Budget>();
  mutable Mutex mu_;
  std::unordered_map<fuse_ino_t, Layout> layouts_ GUARDED_BY(mu_);
};

}  // namespace fs_internal
}  // namespace pacset
