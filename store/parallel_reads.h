// Many blocks of one forest read as several store calls at once.
//
// Without io_uring a dir or RocksDB store reads a MultiGet's blocks one
// after another (a pread per block), so a batch of cold blocks waits for one
// device round trip per block; with it, RocksDB still reads a MultiGet in
// batches of 32 keys, one after another. ParallelReads
// splits a batch into up to BlockStore::read_parallelism() parts of at least
// BlockStore::blocks_read_at_once() blocks — sorted runs, so neighbouring
// blocks stay in one call, in file order — read at
// once on a small pool of threads (the caller's thread takes the first part;
// the pool grows on demand up to parallelism - 1 threads and keeps them).
// Redis (read_parallelism 1: a MultiGet is one pipelined round trip) goes
// straight through. Used by the engine's store source
// (engine/store_block_source.cc) and the daemon's block reader
// (fs/block_reader.cc).
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/block_store.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace pacset {

class ParallelReads {
 public:
  // Borrows `store`.
  explicit ParallelReads(BlockStore* store);
  ~ParallelReads();
  ParallelReads(const ParallelReads&) = delete;
  ParallelReads& operator=(const ParallelReads&) = delete;

  // How many store calls a batch of n blocks becomes: up to
  // read_parallelism(), each of at least blocks_read_at_once() blocks.
  size_t Parts(size_t n) const {
    return std::max<size_t>(1, std::min<size_t>(parallelism_, (n + at_once_ - 1) / at_once_));
  }

  // BlockStore::MultiGet over the parts (the first error in part order).
  Status MultiGet(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                  std::vector<std::string>* out);
  // BlockStore::GetMany over the parts: one outcome per block.
  void GetMany(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
               std::vector<std::string>* out, std::vector<Status>* status);

 private:
  // Runs fn(i) for i in [0, n) on up to n threads of the pool (the caller's
  // thread included) and waits for all of them.
  void RunParallel(size_t n, const std::function<void(size_t)>& fn) EXCLUDES(mu_);
  void PoolThread() EXCLUDES(mu_);
  // Splits `blocks` into Parts(size) sorted runs of (nearly) equal length,
  // none empty: ask[p] are the blocks of part p, and block i of the batch is
  // ask[at[i].first][at[i].second].
  struct Split {
    std::vector<std::vector<uint64_t>> ask;
    std::vector<std::pair<size_t, size_t>> at;
  };
  Split SplitBatch(const std::vector<uint64_t>& blocks) const;

  BlockStore* const store_;
  const uint32_t parallelism_;
  const uint32_t at_once_;

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  std::vector<std::thread> pool_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
};

}  // namespace pacset
