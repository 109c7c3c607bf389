// The results of one fetcher's reads by the read threads
// (engine/internal/read_threads.h), in the buffers they were read into.
// Shared between the fetcher and the threads (std::shared_ptr), so a fetcher
// can go away while its reads are still running.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/internal/arrived_blocks.h"
#include "engine/internal/buffer_pool.h"
#include "util/mutex.h"
#include "util/status.h"

namespace pacset::internal {

// Thread-safe: Done from any thread, Wait from the fetcher's.
class Completions {
 public:
  explicit Completions(uint32_t block_size) : bs_(block_size) {}

  // The blocks of one job with status[i], block i read into `buf` at
  // i * block_size: under one lock and one wake-up.
  void Done(const std::vector<uint64_t>& blocks, std::vector<Status>* status,
            BufferPool::Buffer buf) EXCLUDES(mu_);

  // Waits until a block arrived or a read failed; appends the blocks that
  // arrived to `out` and hands their buffers to `keep`. The first error of
  // any job, once there is one.
  Status Wait(std::vector<uint64_t>* out, ArrivedBlocks* keep) EXCLUDES(mu_);

 private:
  const uint32_t bs_;
  Mutex mu_;
  CondVar cv_;
  // (block, its bytes in bufs_)
  std::vector<std::pair<uint64_t, const char*>> arrived_ GUARDED_BY(mu_);
  std::vector<BufferPool::Buffer> bufs_ GUARDED_BY(mu_);
  Status error_ GUARDED_BY(mu_);
};

}  // namespace pacset::internal
