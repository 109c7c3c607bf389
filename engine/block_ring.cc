#include "engine/internal/block_ring.h"

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
      reaped_(depth),
      arrived_(block_size, depth),
      ring_(std::move(ring)) {
  for (uint32_t i = depth; i-- > 0;) free_.push_back(i);
}

void BlockRing::Queue(int fd, uint64_t b, uint64_t offset) {
  const uint32_t slot = free_.back();
  free_.pop_back();
  block_[slot] = b;
  ring_->Queue(fd, Buffer(slot), bs_, offset, slot);
}

void BlockRing::Drain() {
  while (ring_->submitted() > 0) {
    if (!ring_->Wait()) return;  // the ring is broken; nothing more will arrive
    Reap([](uint64_t, int, char*) {});
  }
}

}  // namespace pacset::internal
