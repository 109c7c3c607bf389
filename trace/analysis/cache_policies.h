// Block-cache policies simulated over recorded traffic: which policy the
// daemon's block cache (fs/block_cache.h) should run, chosen by the hit
// ratio each one reaches on a trace, cache size by cache size.
//
// A trace sees what readers asked pacsetfs for (FORMAT.md section 3): for
// 4 KiB blocks, the misses of the readers' page cache, which is exactly the
// stream of lookups the daemon's cache answers. Replaying that stream
// through a model of a policy tells how many of the lookups it would have
// answered (hits) and how many would have gone to the store (misses).
//
// Policies (all count capacity in blocks of one forest):
//  - kLru: least recently used (the daemon's policy until issue 35).
//  - kWTinyLfu: the daemon's policy (fs/block_cache.h), replayed through the
//    daemon's own code (util/w_tinylfu.h). W-TinyLFU (Einziger et al.): a 1% LRU window in front of
//    a segmented LRU (80% protected), and a block leaves the window for the main cache only if a
//    count-min sketch (4-bit counters, 4 per cached block, halved every 10 x capacity accesses)
//    says it is used more often than the block it would evict. Keeps frequently used blocks through
//    scans.
//  - kS3Fifo: S3-FIFO (Yang et al., SOSP'23): a 10% FIFO for new blocks, a
//    90% main FIFO with 2-bit use counts (reinserted while used), and a
//    ghost FIFO of recently evicted keys that admits returning blocks
//    straight to main. Scan-resistant, no list moves on a hit.
//  - kBinLru: LRU that keeps "protected" blocks (the metadata and the bins
//    of a .pac file, layout/FORMAT.md section 4: blocks [0, node_first_block
//    + bin_block_count)) in a segment of their own, up to a share of the
//    capacity; other blocks are evicted first.
//  - kOptimal: Belady's MIN (evict the block used farthest in the future),
//    offline only: the upper bound no online policy beats.
//
// Predicting the daemon's store fetches for a trace at `-o cache_size=C`
// (blocks of one size B):
//   auto stream = ReadBlockAccesses(trace, forest);
//   CacheModelOptions o;
//   o.capacity_blocks = C / B;
//   auto r = SimulateCachePolicy(*stream, CachePolicy::kWTinyLfu, o);
//   r->misses();  // the store fetches (blocks_fetched in `pacsetfs stats`)
// The simulation is the daemon's policy exactly, except for the sketch's
// hash (the daemon hashes its own forest ids) and the order in which
// concurrent readers' lookups and inserts interleave.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "util/status.h"

namespace pacset {

enum class CachePolicy { kLru, kWTinyLfu, kS3Fifo, kBinLru, kOptimal };

const char* CachePolicyName(CachePolicy p);  // "lru", "w-tinylfu", "s3-fifo", "bin-lru", "optimal"
StatusOr<CachePolicy> ParseCachePolicy(const std::string& name);
// Every online policy, then kOptimal.
std::vector<CachePolicy> AllCachePolicies();

struct CacheModelOptions {
  size_t capacity_blocks = 0;
  // kBinLru: the blocks to protect, and the most of the capacity they may
  // take (the rest of the cache always has room for other blocks).
  std::function<bool(uint64_t key)> is_protected;
  double protected_share = 0.5;
};

// An online cache of block keys. Not thread-safe (a simulation).
class CacheModel {
 public:
  virtual ~CacheModel() = default;
  // One lookup: true on a hit; on a miss the block is fetched and admitted
  // (or not, as the policy decides).
  virtual bool Access(uint64_t key) = 0;
  virtual size_t size() const = 0;  // blocks held
  virtual void Clear() = 0;         // every block dropped (drop-cache)
};

// kInvalidArgument for kOptimal (offline only) or a zero capacity.
StatusOr<std::unique_ptr<CacheModel>> NewCacheModel(CachePolicy policy,
                                                    const CacheModelOptions& options);

// The block lookups of one forest of a trace, in order: what a block cache
// in front of the store would see.
struct BlockAccessStream {
  std::string forest;
  // Block index in the low 44 bits, the generation's order of appearance
  // above (one forest's generations never share a key).
  std::vector<uint64_t> keys;
  // Positions in `keys` where the caches were dropped (pacsetfs
  // drop-cache): a simulation empties its cache there.
  std::vector<size_t> drops;
  uint32_t block_size = 0;   // from the trace's forest info (0: unknown)
  uint64_t block_count = 0;  // of the last generation seen
};

// Reads forest `forest` ("" = the only one) of `trace_path`: every block
// access (store, cache, joined and the daemon's prefetch: each one is a
// lookup of the daemon's cache) and the drop-cache points.
StatusOr<BlockAccessStream> ReadBlockAccesses(const std::string& trace_path,
                                              const std::string& forest);

struct PolicyOutcome {
  CachePolicy policy = CachePolicy::kLru;
  size_t capacity_blocks = 0;
  uint64_t accesses = 0;
  uint64_t hits = 0;
  uint64_t misses() const { return accesses - hits; }  // the store fetches
  double hit_ratio() const { return accesses ? static_cast<double>(hits) / accesses : 0; }
};

// Replays `stream` through `policy` with `options` (capacity included),
// emptying the cache at every drop point. kOptimal is computed offline.
StatusOr<PolicyOutcome> SimulateCachePolicy(const BlockAccessStream& stream, CachePolicy policy,
                                            const CacheModelOptions& options);

// `pacset-trace cache-policies TRACE [--model PAC] [--fractions ...]`: hit
// ratio of every policy at cache sizes given as fractions of the forest's
// blocks (the .pac's block count, else the trace's). --model gives the
// protected region of kBinLru (metadata and bins).
struct CachePoliciesCliOptions {
  std::string trace;
  std::string forest;
  std::string model;  // the traced .pac (optional)
  std::vector<double> fractions = {1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2, 1.0};
  std::vector<std::string> policies;  // empty: all
  double protected_share = 0.5;
  bool json = false;
};
Status RunCachePoliciesCommand(const CachePoliciesCliOptions& options, std::ostream& out);

}  // namespace pacset
