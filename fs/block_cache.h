// The daemon's block cache: verified blocks of immutable generations, kept
// under a memory bound, with single-flight fetching.
//
// The kernel may ask for a block's pages one by one and from several threads
// at once; GetOrFetch makes sure each block is fetched from the store once
// per cold access: concurrent callers for a block that is being fetched wait
// for that fetch instead of starting their own. Failed fetches are not
// cached (the next access tries again).
//
// Memory: at most `capacity_bytes` of block data are kept, plus blocks that
// readers still hold through shared_ptr and the blocks being fetched, plus
// the policy's frequency sketch (16 bytes per 4 KiB of capacity).
//
// Which blocks stay: W-TinyLFU (util/w_tinylfu.h). A fetched block enters a
// small LRU window and stays in the main cache only if it is used more often
// than the block it would evict, so the blocks most rows read (bins, the top
// levels, popular paths) survive a burst of rows that read blocks nobody
// reads again, which under LRU flushed them. Measured on traces recorded
// through a mount (one row at a time, Fashion-MNIST forests of 200 and 682
// trees): at 1/16 to 1/4 of the forest, 10-50% more hits than LRU
// (docs/scale.md; `pacset-trace cache-policies`). The same code replays a trace in
// trace/analysis/cache_policies.h to predict this cache's store fetches.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"
#include "util/w_tinylfu.h"

namespace pacset {

struct BlockKey {
  uint32_t forest = 0;  // the daemon's id for a forest name
  uint64_t generation = 0;
  uint64_t block = 0;
  bool operator==(const BlockKey& o) const {
    return forest == o.forest && generation == o.generation && block == o.block;
  }
};

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const {
    uint64_t h = k.block * 0x9E3779B97F4A7C15ull;
    h ^= (k.generation + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    h ^= static_cast<uint64_t>(k.forest) * 0x165667B19E3779F9ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

using BlockData = std::shared_ptr<const std::string>;

class BlockCache {
 public:
  // Blocks of `typical_block_size` size the policy's sketch and window.
  explicit BlockCache(size_t capacity_bytes, size_t typical_block_size = 4096)
      : capacity_(capacity_bytes), policy_(capacity_bytes, typical_block_size) {}

  enum class Source { kCache, kStore, kJoined };  // kJoined: waited for another caller's fetch

  // Returns the block, fetching it with `fetch` (called at most once at a
  // time per key, without the cache lock held) when it is not cached.
  StatusOr<BlockData> GetOrFetch(const BlockKey& key,
                                 const std::function<Status(std::string*)>& fetch,
                                 Source* source = nullptr) EXCLUDES(mu_);

  // What GetOrFetchMany's fetch does: fetches keys[which[j]] into (*data)[j]
  // with outcome (*status)[j], for every j (both vectors come sized).
  using FetchMany =
      std::function<void(const std::vector<size_t>& which, std::vector<std::string>* data,
                         std::vector<Status>* status)>;

  // GetOrFetch for several keys at once: cached keys are returned, keys
  // another caller is fetching are joined, and the rest are fetched with ONE
  // call of `fetch` (a batch), before this waits for any joined fetch (so
  // two batches that join each other never wait for each other). Fills one
  // entry per key in `data` (null on failure), `status` and `source`.
  void GetOrFetchMany(const std::vector<BlockKey>& keys, const FetchMany& fetch,
                      std::vector<BlockData>* data, std::vector<Status>* status,
                      std::vector<Source>* source) EXCLUDES(mu_);

  // Drops every cached block of `forest` (all generations), or everything
  // when forest == 0. Fetches under way are not affected.
  void Drop(uint32_t forest) EXCLUDES(mu_);
  // Drops blocks of one generation (when it is released).
  void DropGeneration(uint32_t forest, uint64_t generation) EXCLUDES(mu_);

  size_t bytes() const EXCLUDES(mu_);
  size_t capacity() const { return capacity_; }

 private:
  struct Flight {  // guarded by mu_
    bool done = false;
    Status status;
    BlockData data;
  };
  // A lookup that found `key` cached, or not: counted by the policy.
  BlockData LookupLocked(const BlockKey& key) REQUIRES(mu_);
  void InsertLocked(const BlockKey& key, BlockData data) REQUIRES(mu_);
  template <typename Pred>
  void DropIfLocked(Pred pred) REQUIRES(mu_);

  const size_t capacity_;
  mutable Mutex mu_;
  CondVar cv_;  // a flight is done
  // The cached blocks: the policy decides which stay and holds them.
  WTinyLfu<BlockKey, BlockKeyHash, BlockData> policy_ GUARDED_BY(mu_);
  bool reserved_ GUARDED_BY(mu_) = false;          // policy_ has room for the bound (InsertLocked)
  std::vector<BlockKey> evicted_ GUARDED_BY(mu_);  // scratch
  std::unordered_map<BlockKey, std::shared_ptr<Flight>, BlockKeyHash> flights_ GUARDED_BY(mu_);
};

}  // namespace pacset
