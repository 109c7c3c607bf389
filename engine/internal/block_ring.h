// One request's reads in flight through an io_uring (util/uring_reads.h
// ReadRing), each into a buffer of its own: the blocks a fetcher asked for,
// read on the request's own thread with no thread switch per block
// (engine/DESIGN.md, "Reading a mapped file").
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/internal/arrived_blocks.h"
#include "util/populated_memory.h"
#include "util/uring_reads.h"

namespace pacset::internal {

// Not thread-safe: one request's at a time (a source pools them).
class BlockRing {
 public:
  // Null when the kernel refuses io_uring (too old, or a seccomp filter).
  static std::unique_ptr<BlockRing> Make(uint32_t depth, uint32_t block_size);
  BlockRing(const BlockRing&) = delete;
  BlockRing& operator=(const BlockRing&) = delete;

  // No free buffer: Queue must wait for a Reap.
  bool Full() const { return free_.empty(); }
  // Copies of the blocks that arrived at the last Wait of the request that
  // holds this ring (pooled with it, so its pages are touched once).
  ArrivedBlocks& arrived() { return arrived_; }
  uint64_t submitted() const { return ring_->submitted(); }
  uint64_t queued() const { return ring_->queued(); }

  // Queues a read of block b (a block's bytes at `offset` of `fd`) into a
  // free buffer; sent with the next Submit. Requires !Full().
  void Queue(int fd, uint64_t b, uint64_t offset);
  // Sends the queued reads; with `wait`, also waits for one completion.
  // Returns the reads sent, or -errno.
  int Submit(bool wait) { return ring_->Submit(wait); }
  // Calls done(block, bytes read or -errno, buffer) for each finished read;
  // the buffer is free again after the call.
  template <typename Fn>
  void Reap(Fn done) {
    for (;;) {
      const size_t n = ring_->Reap(reaped_.data(), reaped_.size());
      for (size_t i = 0; i < n; ++i) {
        const auto slot = static_cast<uint32_t>(reaped_[i].tag);
        done(block_[slot], reaped_[i].res, Buffer(slot));
        free_.push_back(slot);
      }
      if (n < reaped_.size()) return;
    }
  }
  // Waits for every submitted read (their buffers are ours until then).
  // Returns early when the ring breaks; submitted() then stays above 0.
  void Drain();

 private:
  BlockRing(std::unique_ptr<ReadRing> ring, uint32_t depth, uint32_t block_size);
  char* Buffer(uint32_t slot) { return bufs_.get() + uint64_t{slot} * bs_; }

  const uint32_t bs_;
  PopulatedBuffer bufs_;
  std::vector<uint64_t> block_;  // slot -> the block read into it
  std::vector<uint32_t> free_;
  std::vector<ReadRing::Completion> reaped_;  // room for one Reap of the whole ring
  ArrivedBlocks arrived_;
  std::unique_ptr<ReadRing> ring_;  // last: gone before the buffers it reads into
};

}  // namespace pacset::internal
