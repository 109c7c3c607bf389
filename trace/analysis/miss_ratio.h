// Miss-ratio curves: for every cache size, the fraction of block accesses an
// LRU cache of that size would miss (`pacset-trace mrc --policy lru`; the
// default curve, of the daemon's W-TinyLFU, is simulated by policy_curve.h
// and carried in the same MissRatioCurve). The curve answers "how much memory does this
// traffic need": the smallest cache that serves 90/99/99.9% of accesses.
//
// Which accesses: the daemon's block cache (fs/block_cache.h) is looked up
// once per block of every read, gather and readahead window, and the trace
// has one access record per lookup (prefetch records included: readahead and
// gather-ahead blocks go through the cache too). A `drop` empties it. So the
// curve is built over every access record (failed ones excepted: a failed
// fetch is not cached), and predicts the daemon's store fetches for a replay
// of the same reads at another `cache_size`. Not in the trace: the page
// cache's hits (they never reach the daemon) and the daemon's own re-reads
// of blocks it pushes into the page cache (`push_blocks`; they touch the
// LRU order, and fill the reader's page cache, which then answers reads a
// smaller daemon cache would have fetched: predictions hold with
// `-o no_push_blocks`; with pushes the daemon fetches fewer than predicted).
//
// The cache is bounded in bytes and holds whole blocks, least recently used
// evicted first, so it always holds the longest most-recent prefix of the
// recency stack that fits: an access hits a cache of C bytes iff the bytes of
// the distinct blocks used since the block's previous access, its own
// included (its *stack distance*), are at most C (for C at least the largest
// block: the daemon never caches a block larger than itself, and evicts
// nothing for it; with one block size, exact at every C). One pass computes every
// access's stack distance (a Fenwick tree over the last-access times of the
// live blocks, compacted as it fills: O(N log D) time, O(D) memory for N
// accesses of D distinct blocks), and the curve is their distribution.
// One exception: a drop of one forest while others are cached. LRU with
// deletions is not a stack algorithm (blocks of the other forests evicted
// before the drop count as cached after it, up to the bytes freed), so the
// all-forests curve may then undercount misses a little; each forest's own
// curve stays exact (a drop of all forests, as `record --cold` does, too).
//
// Sampled pass (SHARDS, Waldspurger et al., FAST '15): only blocks whose
// hash falls under `rate` are tracked; distances among them, divided by the
// rate, estimate the true distances. Memory O(rate x (D + N)). The miss
// ratio at c is estimated either as sampled misses / sampled accesses (a
// ratio estimator) or as sampled misses / (rate x N), N = all accesses
// (SHARDS-adj's scaling: a hot block in or out of the sample moves it by its
// misses, not its accesses); the pass keeps the one whose bound at a quarter
// of the footprint is smaller. Error bound, per cache size c (MissRatioPoint):
//  - vertical: blocks are in or out of the sample independently, so with
//    probability >= 1 - delta (delta = 1% per estimator) the estimate at c is
//    within eps(c) = sqrt(ln(2/delta) * S / (2 rate)) / B of the ratio the
//    same distances give on the whole trace (Hoeffding over the blocks'
//    terms: a_b = m_b - ratio(c) n_b and B = sampled accesses for the ratio
//    estimator, a_b = m_b and B = rate x N for the other; m_b, n_b = the
//    block's misses at c and accesses; S = sum of a_b^2 over the sampled
//    blocks, an estimate of rate x the sum over all);
//  - horizontal: an estimated distance of about c blocks is off by a factor
//    of at most 1 +- eta(c), eta = sqrt(3 ln(2/delta) / (rate * c_blocks))
//    (Chernoff over the distinct blocks in between).
//  So the estimate at c lies within [exact(c (1+eta)) - eps, exact(c (1-eta))
//  + eps]; tests/miss_ratio_test.cc checks it against the exact pass.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace pacset {

// SHARDS's spatial sample: a block is in it iff a hash of its key (with the
// seed) falls under the rate, so each block is in or out for the whole
// trace. The rate is rounded to a multiple of 2^-24 (rate()).
class BlockSampler {
 public:
  explicit BlockSampler(double rate = 1.0, uint64_t seed = 0);
  double rate() const { return rate_; }
  bool Contains(uint64_t key) const;

 private:
  double rate_ = 1.0;
  uint64_t seed_ = 0, threshold_ = 0;
};

// The miss ratio at one cache size, with the sampled pass's error bound.
struct MissRatioPoint {
  uint64_t cache_bytes = 0;
  double miss_ratio = 0;
  double misses = 0;      // miss_ratio x accesses (estimated by a sampled pass)
  double error = 0;       // eps(c): 0 for the exact pass
  double size_error = 0;  // eta(c): 0 for the exact pass
};

// A curve: the distribution of stack distances of a stream of accesses (an
// LRU cache), or the misses of another policy simulated at chosen sizes
// (Simulated(); trace/analysis/policy_curve.h). Sizes are in bytes (or in
// blocks for version-1 traces, whose forests carry no block size:
// `unit_bytes` = 0).
class MissRatioCurve {
 public:
  // `policy`'s curve: `points` (ascending sizes, from 0 to `lru`'s
  // footprint) simulated, in between linear; accesses, cold misses and
  // footprint are `lru`'s (no policy changes them). `rate` < 1: a sampled
  // simulation (no error bound: error and size_error are 0).
  static MissRatioCurve Simulated(const MissRatioCurve& lru, const std::string& policy, double rate,
                                  std::vector<MissRatioPoint> points);
  const std::string& policy() const { return policy_; }  // "lru", or the simulated one
  bool simulated() const { return !simulated_.empty(); }

  uint64_t accesses() const { return accesses_; }  // all accesses, sampled or not
  // Accesses that miss at every size: first accesses of a block (since the
  // start or the last drop of its forest). For a sampled pass, estimated.
  double cold_misses() const;
  // The smallest cache that misses only cold misses: the working set.
  uint64_t footprint_bytes() const { return distances_.empty() ? 0 : distances_.back().first; }
  double sample_rate() const { return rate_; }
  bool exact() const { return rate_ >= 1.0; }
  uint32_t unit_bytes() const { return unit_bytes_; }  // 1: bytes; 0: blocks

  // Accesses that an LRU cache of `cache_bytes` misses (exact: an integer).
  double Misses(uint64_t cache_bytes) const;
  double MissRatio(uint64_t cache_bytes) const;
  MissRatioPoint At(uint64_t cache_bytes) const;
  // The smallest cache whose hit ratio is at least `hit_ratio`; nullopt when
  // cold misses alone exceed 1 - hit_ratio (no cache reaches it).
  std::optional<uint64_t> BytesForHitRatio(double hit_ratio) const;
  // The curve at every size where it changes (exact pass; thinned to about
  // `max_points` for plotting and CSV), from 0 to the footprint.
  std::vector<MissRatioPoint> Points(size_t max_points) const;

  nlohmann::json ToJson(size_t max_points) const;

 private:
  friend class MissRatioBuilder;
  uint64_t accesses_ = 0;
  uint64_t sampled_accesses_ = 0;  // = accesses_ for the exact pass
  uint64_t sampled_cold_ = 0;
  double rate_ = 1.0;
  uint32_t unit_bytes_ = 1;
  uint32_t max_block_bytes_ = 0;
  uint64_t SampledHits(uint64_t cache_bytes) const;
  double ToRatio(uint64_t sampled_misses) const;
  double ErrorBound(uint64_t cache_bytes, bool by_expected_sample) const;
  bool by_expected_sample_ = false;  // which estimator a sampled pass uses
  std::string policy_ = "lru";
  std::vector<MissRatioPoint> simulated_;  // Simulated(): the points, ascending
  // (stack distance, sampled accesses with a distance <= it), ascending.
  std::vector<std::pair<uint64_t, uint64_t>> distances_;
  // Sampled pass: per sampled block, its accesses' (scaled) distances, for
  // the error bound (index into `block_distances_`, by block).
  std::vector<uint32_t> block_first_;      // offsets, one per block plus one
  std::vector<uint64_t> block_distances_;  // per block, ascending; cold = UINT64_MAX
};

// Builds one curve from a stream of accesses.
class MissRatioBuilder {
 public:
  // `rate` in (0, 1]: 1 is the exact pass. `seed` picks the sample.
  explicit MissRatioBuilder(double rate = 1.0, uint64_t seed = 0);
  ~MissRatioBuilder();
  MissRatioBuilder(const MissRatioBuilder&) = delete;
  MissRatioBuilder& operator=(const MissRatioBuilder&) = delete;
  MissRatioBuilder(MissRatioBuilder&&) noexcept;
  MissRatioBuilder Copy() const;  // explicit: the state is O(distinct blocks)

  // One access of block `key` (any 64-bit identity, e.g. a hash of forest,
  // generation and block), of `bytes` bytes (> 0; 1 to count in blocks).
  void Access(uint64_t key, uint32_t bytes);
  // Every block leaves the cache (a drop): the next access of each is cold.
  void DropAll();
  // These blocks leave the cache (a drop of one forest).
  void DropKeys(const std::vector<uint64_t>& keys);
  // The blocks in the cache of unbounded size (those accessed since their
  // last drop); for the sampled pass, the sampled ones.
  std::vector<uint64_t> LiveKeys() const;

  // The curve so far. `unit_bytes`: 1 when `bytes` were bytes, 0 for blocks.
  MissRatioCurve Finish(uint32_t unit_bytes) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

struct MissRatioOptions {
  double sample_rate = 1.0;  // (0, 1]; 1: exact
  uint64_t seed = 0;
};

struct ForestMissRatio {
  uint32_t id = 0;  // the trace's id
  std::string name;
  uint32_t block_size = 0;  // of its last generation; 0: unknown (version-1 trace)
  MissRatioCurve curve;
};

// Curves of one trace: per forest, and for all forests together (the
// daemon has one cache for all its forests).
struct MissRatioReport {
  std::string path;
  uint64_t accesses = 0;          // access records
  uint64_t failed_accesses = 0;   // not counted (a failed fetch is not cached)
  uint64_t unsized_accesses = 0;  // of forests with no forest-info record (v2): not counted
  uint64_t drops = 0;
  uint64_t dropped_events = 0;  // the daemon's queue overflowed: the curve misses them
  std::vector<ForestMissRatio> forests;
  MissRatioCurve all;  // LRU when several forests (the simulation is per forest)

  nlohmann::json ToJson(size_t max_points = 200) const;
  // The section `pacset-trace report` and `mrc` print: per forest, memory for
  // 90/99/99.9% hits and the miss ratio at a few sizes.
  std::string ToText() const;
  // cache_bytes,miss_ratio,misses,error per point of every curve (column
  // `forest`: a name, or `*` for all forests).
  std::string ToCsv(size_t max_points) const;
};

// Reads `path` once. Hostile input: memory is bounded by the records read
// (never by a count field), whatever the trace says.
StatusOr<MissRatioReport> ComputeMissRatio(const std::string& path,
                                           const MissRatioOptions& options = {});

}  // namespace pacset
