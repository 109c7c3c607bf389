// Buffers for the read threads' jobs (engine/internal/read_threads.h), each
// with room for one job's blocks (a gather's, or one block), kept for the
// next jobs with their pages touched: a fresh buffer costs a page fault per
// page to fill and, once freed, an unmap with a TLB shootdown, and a cold row
// through a mount makes many gathers (engine/DESIGN.md, "Through a pacsetfs
// mount").
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "util/free_list.h"
#include "util/populated_memory.h"

namespace pacset::internal {

// Thread-safe.
class BufferPool {
 public:
  using Buffer = PopulatedBuffer;
  // Buffers of `bytes` each; at most `keep` kept.
  BufferPool(uint64_t bytes, size_t keep) : bytes_(bytes), free_(keep) {}
  // A kept buffer, or a new one (populated: its pages exist before a read).
  Buffer Take() {
    return free_.TakeOr([this] { return AllocatePopulated(bytes_); });
  }
  void Give(Buffer b) { free_.Give(std::move(b)); }
  uint64_t bytes() const { return bytes_; }

 private:
  const uint64_t bytes_;
  FreeList<Buffer> free_;
};

}  // namespace pacset::internal
