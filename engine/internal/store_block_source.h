// The engine's blocks straight from a block store (engine/block_source.h):
// a BlockSource over one forest generation of a BlockStore, with a bounded
// in-process cache. Used by StoreForest (engine/store_forest.h).
//
// Fetching: a request's Fetch calls only collect block numbers; its Wait
// reads all of them with one MultiGet (one pipelined round trip to redis), split into
// up to BlockStore::read_parallelism() MultiGets at once for stores whose
// MultiGet reads one block after another (dir, rocksdb; store/parallel_reads.h).
// BlockStore verifies every block it returns; a bad block is the store's
// kCorruption naming forest, generation and block.
//
// Cache: verified blocks under a byte bound, CLOCK eviction. Ready is a
// lock-free lookup in a two-level table (leaves of 512 entries made on
// first use), so a warm walk pays two loads per block it enters. Freeing is
// epoch-based: each fetcher announces a new epoch at every Fetch and Wait
// (where the BlockSource contract lets earlier Ready pointers go); a block
// taken out of the table is freed only once every fetcher active when it
// was taken out has announced since. A block that arrived in a round is not
// evicted before the fetchers active then have moved on, so the cache may
// briefly hold more than its bound (at most the rounds in progress).
//
// Thread-safety: as BlockSource; a fetcher is used by one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/block_source.h"
#include "store/block_store.h"
#include "store/parallel_reads.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace pacset {
namespace store_internal {

struct StoreReadCounters {
  std::atomic<uint64_t> multigets{0};  // MultiGet calls on the store (redis: round trips)
  std::atomic<uint64_t> rounds{0};     // Waits that read from the store
  std::atomic<uint64_t> blocks{0};     // blocks read from the store
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> evicted{0};  // blocks evicted from the cache
};

class StoreBlockSource final : public BlockSource {
 public:
  // `store` outlives the source. `cache_bytes` bounds the cached blocks
  // (0: nothing stays cached beyond the rounds that use it).
  StoreBlockSource(BlockStore* store, ForestInfo forest, uint64_t cache_bytes);
  ~StoreBlockSource() override;

  uint32_t block_size() const override { return bs_; }
  uint64_t block_count() const override { return forest_.block_count; }
  const char* Ready(uint64_t b) override;
  // Whether block `b` is in the cache now (as Ready, without marking it used).
  bool Cached(uint64_t b) const;
  std::unique_ptr<BlockFetcher> NewFetcher() override;
  // Never an image: blocks live in separate buffers.
  const char* WarmImage(uint64_t, uint64_t, uint64_t, bool) override { return nullptr; }

  // Reads `blocks` from the store (parallel MultiGets where the store wants
  // them) into `out`; counts them. For metadata at open and for fetchers.
  Status Read(const std::vector<uint64_t>& blocks, std::vector<std::string>* out);

  const StoreReadCounters& counters() const { return counters_; }
  uint64_t cached_bytes() const;

 private:
  class Fetcher;
  struct Leaf;
  struct Retired {
    const std::string* bytes;
    uint64_t epoch;  // epoch_ when it left the table
  };
  struct Slot {
    std::atomic<uint64_t> epoch{0};  // 0: free
  };

  Leaf* LeafOf(uint64_t b) const;
  Leaf* LeafForInsert(uint64_t b) REQUIRES(mu_);
  // A new epoch value for `slot`: pointers Ready gave its fetcher before are
  // no longer used.
  void Announce(Slot* slot) { slot->epoch.store(epoch_.fetch_add(1) + 1); }
  Slot* Register() EXCLUDES(mu_);
  void Unregister(Slot* slot) EXCLUDES(mu_);
  uint64_t MinActiveEpochLocked() const REQUIRES(mu_);
  // Makes `blocks` (with their bytes) Ready and keeps them at least until
  // the fetchers active now announce again; evicts to the bound.
  void Insert(const std::vector<uint64_t>& blocks, std::vector<std::string>* data) EXCLUDES(mu_);
  // Re-protects blocks that are cached already; false for those that are not.
  void Touch(const std::vector<uint64_t>& blocks, std::vector<uint64_t>* missing) EXCLUDES(mu_);
  void EvictLocked() REQUIRES(mu_);
  void FreeRetiredLocked() REQUIRES(mu_);

  const ForestInfo forest_;
  const uint32_t bs_;
  const uint64_t capacity_;
  ParallelReads reads_;
  // Two-level block table: top_[b / kLeafBlocks] -> leaf (made on first insert).
  std::unique_ptr<std::atomic<Leaf*>[]> top_;
  const uint64_t top_size_;
  std::atomic<uint64_t> epoch_{1};
  StoreReadCounters counters_;

  // mu_ is never held across a store call.
  mutable Mutex mu_;  // also guards Leaf::keep_until
  std::vector<std::unique_ptr<Leaf>> leaves_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Slot>> slots_ GUARDED_BY(mu_);
  std::vector<Slot*> free_slots_ GUARDED_BY(mu_);
  std::vector<uint64_t> resident_ GUARDED_BY(mu_);  // CLOCK ring of cached blocks
  size_t hand_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  std::vector<Retired> retired_ GUARDED_BY(mu_);
};

}  // namespace store_internal
}  // namespace pacset
