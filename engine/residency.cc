#include "engine/internal/residency.h"

#include <sys/mman.h>

#include <algorithm>

namespace pacset::internal {

bool PagesResident(const char* base, uint64_t file_size, uint64_t page, uint64_t offset,
                   uint64_t len) {
  const uint64_t first = offset / page * page;
  const uint64_t end = std::min(offset + len, file_size);
  unsigned char vec[1024];
  for (uint64_t at = first; at < end;) {
    const uint64_t pages = std::min<uint64_t>(sizeof(vec), (end - at + page - 1) / page);
    if (mincore(const_cast<char*>(base) + at, pages * page, vec) != 0) return false;
    for (uint64_t i = 0; i < pages; ++i)
      if (!(vec[i] & 1)) return false;
    at += pages * page;
  }
  return true;
}

ResidencySnapshot::ResidencySnapshot(const char* base, uint64_t file_size, uint32_t block_size,
                                     uint64_t page)
    : base_(base),
      size_(file_size),
      bs_(block_size),
      page_(page),
      window_blocks_(std::max<uint64_t>(1, kResidencyWindowBytes / block_size)) {}

std::vector<uint64_t> ResidencySnapshot::Take(uint64_t w) const {
  std::vector<uint64_t> bits((window_blocks_ + 63) / 64, 0);
  const uint64_t b0 = w * window_blocks_;
  const uint64_t first = b0 * bs_ / page_ * page_;
  const uint64_t end = std::min(size_, (b0 + window_blocks_) * bs_);
  if (end <= b0 * bs_) return bits;
  std::vector<unsigned char> vec((end - first + page_ - 1) / page_);
  const bool known = mincore(const_cast<char*>(base_) + first, vec.size() * page_, vec.data()) == 0;
  for (uint64_t i = 0; i < window_blocks_ && (b0 + i) * bs_ < end; ++i) {
    const uint64_t lo = ((b0 + i) * bs_ - first) / page_;
    const uint64_t hi = (std::min(end, (b0 + i + 1) * bs_) - 1 - first) / page_;
    bool resident = true;
    for (uint64_t q = lo; q <= hi && resident && known; ++q) resident = vec[q] & 1;
    if (resident) bits[i / 64] |= uint64_t{1} << (i % 64);
  }
  return bits;
}

}  // namespace pacset::internal
