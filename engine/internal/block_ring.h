// One request's reads in flight through an io_uring (util/uring_reads.h
// ReadRing), each block into a buffer of its own: the blocks a fetcher asked
// for, read on the request's own thread with no thread switch per block
// (engine/DESIGN.md, "Reading a mapped file"). Blocks queued together that
// lie next to each other in the file go as one read (a readv into their
// buffers), up to kMaxRunBytes.
#pragma once

#include <algorithm>
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
  // Reads sent and not yet reaped (a read may hold several blocks).
  uint64_t submitted() const { return ring_->submitted(); }
  // Nonzero while anything queued is not yet sent (blocks waiting for a
  // Submit, or reads the kernel did not take).
  uint64_t queued() const { return queued_.size() + ring_->queued(); }

  // The most bytes one read of adjacent blocks takes (at least one block).
  static constexpr uint32_t kMaxRunBytes = 256 << 10;

  // Queues a read of block b (a block's bytes at `offset` of `fd`) into a
  // free buffer; sent with the next Submit. Requires !Full().
  void Queue(int fd, uint64_t b, uint64_t offset);
  // Sends the queued blocks, those adjacent in the same file as one read;
  // with `wait`, also waits for one completion. Returns the reads sent, or
  // -errno.
  int Submit(bool wait);
  // Calls done(block, bytes read into its buffer or -errno, buffer) for each
  // block of each finished read (a read that came back short gives the
  // blocks past its end fewer bytes than a block, down to 0); the buffer is
  // free again after the call.
  template <typename Fn>
  void Reap(Fn done) {
    const auto bs = static_cast<int64_t>(bs_);
    for (;;) {
      const size_t n = ring_->Reap(reaped_.data(), reaped_.size());
      for (size_t i = 0; i < n; ++i) {
        const int res = reaped_[i].res;
        int64_t left = res;  // bytes of the read not yet handed out
        for (auto slot = static_cast<uint32_t>(reaped_[i].tag); slot != kNoSlot;) {
          const uint32_t next = next_in_run_[slot];
          const int got =
              res < 0 ? res : static_cast<int>(std::min(bs, std::max<int64_t>(left, 0)));
          left -= bs;
          done(block_[slot], got, Buffer(slot));
          free_.push_back(slot);
          slot = next;
        }
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

  static constexpr uint32_t kNoSlot = UINT32_MAX;
  struct Queued {
    int fd;
    uint64_t offset;
    uint32_t slot;
  };

  const uint32_t bs_;
  PopulatedBuffer bufs_;
  std::vector<uint64_t> block_;        // slot -> the block read into it
  std::vector<uint32_t> next_in_run_;  // slot -> the next slot of its read, or kNoSlot
  std::vector<uint32_t> free_;
  std::vector<Queued> queued_;                // queued, not yet sent
  std::vector<std::vector<iovec>> run_iov_;   // tag slot -> its read's buffers, while in flight
  std::vector<ReadRing::Completion> reaped_;  // room for one Reap of the whole ring
  ArrivedBlocks arrived_;
  std::unique_ptr<ReadRing> ring_;  // last: gone before the buffers it reads into
};

}  // namespace pacset::internal
