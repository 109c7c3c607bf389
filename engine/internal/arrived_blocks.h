// The blocks that arrived at a fetcher's last Wait (BlockFetcher::Arrived):
// a walk reads a block it just fetched from here, not through the mapping,
// whose first touch of each page is a page fault (engine/DESIGN.md,
// "Reading where the walks are").
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/internal/buffer_pool.h"
#include "util/populated_memory.h"

namespace pacset::internal {

// Blocks are copied in (Add: a ring reuses its buffers) or arrive in the
// buffers they were read into (Adopt: the read threads'), which go back to
// their pool at Clear. One fetcher's: not thread-safe.
class ArrivedBlocks {
 public:
  // Room for `capacity` copies now, its pages populated: a cold request's
  // first wait would otherwise fault them in one by one. Adopted
  // buffers go back to `pool`.
  ArrivedBlocks(uint32_t block_size, uint32_t capacity, BufferPool* pool = nullptr);
  ~ArrivedBlocks() { Clear(); }
  ArrivedBlocks(const ArrivedBlocks&) = delete;
  ArrivedBlocks& operator=(const ArrivedBlocks&) = delete;

  // Forgets every block (the next Wait starts empty).
  void Clear();
  // A copy of block `b`'s bytes.
  void Add(uint64_t b, const char* block);
  // Blocks at the given addresses, all inside `buffers` (from the pool),
  // which this keeps until Clear.
  void Adopt(const std::vector<std::pair<uint64_t, const char*>>& blocks,
             std::vector<BufferPool::Buffer>* buffers);
  // After the last Add or Adopt of a Wait; Find is valid from then on.
  void Seal();
  // Block `b`'s bytes, or nullptr when it did not arrive. Called where
  // BlockSource::Ready is (creates no objects with destructors).
  const char* Find(uint64_t b) const {
    auto it = std::lower_bound(index_.begin(), index_.end(),
                               std::pair<uint64_t, const char*>{b, nullptr});
    return it != index_.end() && it->first == b ? it->second : nullptr;
  }

 private:
  const uint32_t bs_;
  BufferPool* const pool_;
  std::vector<std::pair<uint64_t, uint64_t>> copies_;  // (block, offset in bytes_)
  PopulatedBuffer bytes_;                              // room for bytes_capacity_ bytes of copies
  uint64_t bytes_capacity_;
  std::vector<BufferPool::Buffer> adopted_;
  std::vector<std::pair<uint64_t, const char*>> index_;  // sorted at Seal
};

}  // namespace pacset::internal
