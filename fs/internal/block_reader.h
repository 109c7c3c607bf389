// Blocks for readers: from the daemon's cache, or fetched from the store with
// single flight, retries and a deadline.
//
// A fetch retries transient store errors with exponential backoff (10 ms ..
// 500 ms) until the per-fetch deadline (MountOptions::store_timeout_ms), and a
// corrupt block once (it may have been damaged in flight). Past the deadline
// the store counts as down for a second (or the deadline, if shorter): fetches
// then fail at once instead of tying up every worker thread again.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fs/block_cache.h"
#include "fs/internal/inodes.h"
#include "store/block_store.h"
#include "store/parallel_reads.h"
#include "util/status.h"

namespace pacset {
namespace fs_internal {

class BlockReader {
 public:
  // Borrows `store` and `cache`. `store_name` names the store in errors.
  BlockReader(BlockStore* store, BlockCache* cache, std::string store_name, int store_timeout_ms)
      : store_(store),
        cache_(cache),
        store_name_(std::move(store_name)),
        store_timeout_ms_(store_timeout_ms),
        reads_(store) {}

  // Block `block` of `f`, counted in f's stats by where it came from.
  StatusOr<BlockData> Get(const ForestInode& f, uint64_t block, BlockCache::Source* src);
  // Blocks `blocks` of `f` like Get, those not cached fetched together
  // (BlockStore::GetMany, split into parts read at once: ParallelReads). Of the first `needed`
  // blocks, one that fails in the batch is fetched again on its own, with Get's retries, deadline
  // and log line, and fails alone; the rest are read ahead, best effort (a
  // failure is not retried, so it never holds up the blocks that are needed,
  // and not cached, so the next access tries again). One entry per block in
  // `data` (null on failure), `status`, `src`.
  void GetMany(const ForestInode& f, const std::vector<uint64_t>& blocks, size_t needed,
               std::vector<BlockData>* data, std::vector<Status>* status,
               std::vector<BlockCache::Source>* src);
  // Like Get, without counting (background pushes of blocks just fetched).
  StatusOr<BlockData> GetUncounted(const ForestInode& f, uint64_t block);

 private:
  Status Fetch(const ForestInode& f, uint64_t block, std::string* out);
  // Counts one block in f's stats by where it came from (`data` null: failed).
  static void Count(const ForestInode& f, BlockCache::Source src, const std::string* data,
                    uint64_t fetch_ns);

  BlockStore* const store_;
  BlockCache* const cache_;
  const std::string store_name_;
  const int store_timeout_ms_;
  std::atomic<int64_t> store_down_until_{0};  // steady_clock ticks
  ParallelReads reads_;  // a batch's store calls, several at once for dir and rocksdb
};

}  // namespace fs_internal
}  // namespace pacset
