#include "engine/internal/arrived_blocks.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace pacset::internal {

ArrivedBlocks::ArrivedBlocks(uint32_t block_size, uint32_t capacity, BufferPool* pool)
    : bs_(block_size),
      pool_(pool),
      bytes_(capacity > 0 ? AllocatePopulated(uint64_t{capacity} * block_size) : nullptr),
      bytes_capacity_(bytes_ ? uint64_t{capacity} * block_size : 0) {
  copies_.reserve(capacity);
  index_.reserve(capacity);
}

void ArrivedBlocks::Clear() {
  copies_.clear();
  index_.clear();
  for (BufferPool::Buffer& b : adopted_) pool_->Give(std::move(b));
  adopted_.clear();
}

void ArrivedBlocks::Add(uint64_t b, const char* block) {
  const uint64_t at = copies_.size() * bs_;
  if (at + bs_ > bytes_capacity_) {
    const uint64_t capacity = std::max<uint64_t>(at + bs_, 2 * bytes_capacity_);
    PopulatedBuffer bigger = AllocatePopulated(capacity);
    if (at > 0) std::memcpy(bigger.get(), bytes_.get(), at);
    bytes_ = std::move(bigger);
    bytes_capacity_ = capacity;
  }
  std::memcpy(bytes_.get() + at, block, bs_);
  copies_.emplace_back(b, at);
}

void ArrivedBlocks::Adopt(const std::vector<std::pair<uint64_t, const char*>>& blocks,
                          std::vector<BufferPool::Buffer>* buffers) {
  index_.insert(index_.end(), blocks.begin(), blocks.end());
  for (BufferPool::Buffer& b : *buffers) adopted_.push_back(std::move(b));
  buffers->clear();
}

void ArrivedBlocks::Seal() {
  for (const auto& [b, at] : copies_) index_.emplace_back(b, bytes_.get() + at);
  std::sort(index_.begin(), index_.end());
}

}  // namespace pacset::internal
