// The daemon's block cache: verified blocks of immutable generations, kept
// under a memory bound, with single-flight fetching.
//
// The kernel may ask for a block's pages one by one and from several threads
// at once; GetOrFetch makes sure each block is fetched from the store once
// per cold access: concurrent callers for a block that is being fetched wait
// for that fetch instead of starting their own. Failed fetches are not
// cached (the next access tries again).
//
// Memory: at most `capacity_bytes` of block data are kept (least recently
// used blocks are evicted first), plus blocks that readers still hold
// through shared_ptr and the blocks being fetched.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "util/mutex.h"
#include "util/status.h"

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
  explicit BlockCache(size_t capacity_bytes) : capacity_(capacity_bytes) {
    // Room for the bound's worth of 4 KiB blocks: a cold read of a forest
    // would otherwise rehash the table again and again as it fills.
    entries_.reserve(std::min<size_t>(capacity_bytes / 4096, size_t{1} << 20));
  }

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
  struct Entry {
    BlockData data;
    std::list<BlockKey>::iterator lru;
  };
  struct Flight {  // guarded by mu_
    bool done = false;
    Status status;
    BlockData data;
  };
  void InsertLocked(const BlockKey& key, BlockData data) REQUIRES(mu_);
  template <typename Pred>
  void DropIfLocked(Pred pred) REQUIRES(mu_);

  const size_t capacity_;
  mutable Mutex mu_;
  CondVar cv_;  // a flight is done
  size_t bytes_ GUARDED_BY(mu_) = 0;
  std::list<BlockKey> lru_ GUARDED_BY(mu_);  // front = most recent
  std::unordered_map<BlockKey, Entry, BlockKeyHash> entries_ GUARDED_BY(mu_);
  std::unordered_map<BlockKey, std::shared_ptr<Flight>, BlockKeyHash> flights_ GUARDED_BY(mu_);
};

}  // namespace pacset
