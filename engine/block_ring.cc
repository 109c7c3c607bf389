#include "engine/internal/block_ring.h"

#include <algorithm>
#include <utility>

namespace pacset::internal {

std::unique_ptr<BlockRing> BlockRing::Make(uint32_t depth, uint32_t block_size) {
  std::unique_ptr<ReadRing> ring = ReadRing::Make(depth);
  if (!ring) return nullptr;
  return std::unique_ptr<BlockRing>(new BlockRing(std::move(ring), depth, block_size));
}

BlockRing::BlockRing(std::unique_ptr<ReadRing> ring, uint32_t depth, uint32_t block_size)
    // Populated now: the pages exist before the first reads. Otherwise the
    // kernel faults each in while it copies a read into it, which made a
    // cold request's first reads several times slower (engine/DESIGN.md,
    // "Reading where the walks are"); and populated in one call, not page by
    // page (util/populated_memory.h).
    : bs_(block_size),
      bufs_(AllocatePopulated(uint64_t{depth} * block_size)),
      block_(depth),
      next_in_run_(depth, kNoSlot),
      run_iov_(depth),
      reaped_(depth),
      arrived_(block_size, depth),
      ring_(std::move(ring)) {
  for (uint32_t i = depth; i-- > 0;) free_.push_back(i);
  queued_.reserve(depth);
}

void BlockRing::Queue(int fd, uint64_t b, uint64_t offset) {
  const uint32_t slot = free_.back();
  free_.pop_back();
  block_[slot] = b;
  queued_.push_back({fd, offset, slot});
}

int BlockRing::Submit(bool wait) {
  if (!queued_.empty()) {
    // Sorted by file and offset, each run of adjacent blocks is one read. A
    // read's buffers are chained through next_in_run_ from the slot that is
    // its tag, and its iovecs are kept under that slot until the read is
    // reaped: the kernel may take a read at a later Submit than the one
    // that queued it (a short submission).
    std::sort(queued_.begin(), queued_.end(), [](const Queued& a, const Queued& b) {
      return a.fd != b.fd ? a.fd < b.fd : a.offset < b.offset;
    });
    const size_t max_run = std::max<uint32_t>(1, kMaxRunBytes / bs_);
    for (size_t i = 0; i < queued_.size();) {
      size_t j = i + 1;
      while (j < queued_.size() && j - i < max_run && queued_[j].fd == queued_[i].fd &&
             queued_[j].offset == queued_[j - 1].offset + bs_) {
        ++j;
      }
      const uint32_t tag = queued_[i].slot;
      for (size_t k = i; k < j; ++k)
        next_in_run_[queued_[k].slot] = k + 1 < j ? queued_[k + 1].slot : kNoSlot;
      if (j - i == 1) {
        ring_->Queue(queued_[i].fd, Buffer(tag), bs_, queued_[i].offset, tag);
      } else {
        std::vector<iovec>& iov = run_iov_[tag];  // its last read was reaped: the slot was free
        iov.clear();
        for (size_t k = i; k < j; ++k) iov.push_back({Buffer(queued_[k].slot), bs_});
        ring_->QueueV(queued_[i].fd, iov.data(), static_cast<unsigned>(j - i), queued_[i].offset,
                      tag);
      }
      i = j;
    }
    queued_.clear();
  }
  return ring_->Submit(wait);
}

void BlockRing::Drain() {
  while (ring_->submitted() > 0) {
    if (!ring_->Wait()) return;  // the ring is broken; nothing more will arrive
    Reap([](uint64_t, int, char*) {});
  }
}

}  // namespace pacset::internal
