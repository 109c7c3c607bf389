// Whether blocks of a mapped file are in the page cache, asked with mincore
// and never by touching the mapping.
//
// A request asks once per window of kResidencyWindowBytes, not once per
// block: a cold row asks about every block it needs, and a system call per
// block cost more than the row's reads (engine/DESIGN.md, "Reading where the
// walks are").
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace pacset::internal {

// True when every page of [offset, offset + len) of the mapping at `base`
// (of `file_size` bytes, pages of `page` bytes) is in the page cache; false
// also when mincore fails. One mincore call per 1,024 pages; allocates
// nothing, so it may be called where BlockSource::Ready is.
bool PagesResident(const char* base, uint64_t file_size, uint64_t page, uint64_t offset,
                   uint64_t len);

inline constexpr uint64_t kResidencyWindowBytes = 4 << 20;

// Which blocks of a mapped file were in the page cache when a request first
// asked about their part of the file. A request's own snapshot: a block read
// since by anyone is at worst fetched again (a read from the page cache), and
// one evicted since is read through the mapping as before (a page fault,
// guarded against SIGBUS). One request's: not thread-safe.
class ResidencySnapshot {
 public:
  ResidencySnapshot(const char* base, uint64_t file_size, uint32_t block_size, uint64_t page);

  // True when block b was not wholly resident at the snapshot of its window.
  bool Missing(uint64_t b) {
    const uint64_t w = b / window_blocks_, i = b % window_blocks_;
    auto it = windows_.find(w);
    if (it == windows_.end()) it = windows_.emplace(w, Take(w)).first;
    return !((it->second[i / 64] >> (i % 64)) & 1);
  }

 private:
  // Bit i: block w * window_blocks_ + i was resident (all its pages). A
  // failed mincore leaves the blocks unknown, reported as resident (Ready
  // then asks about each itself).
  std::vector<uint64_t> Take(uint64_t w) const;

  const char* const base_;
  const uint64_t size_;
  const uint32_t bs_;
  const uint64_t page_;
  const uint64_t window_blocks_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> windows_;
};

}  // namespace pacset::internal
