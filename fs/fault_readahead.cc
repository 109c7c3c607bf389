#include "fs/internal/fault_readahead.h"

#include <algorithm>

#include "layout/block.h"
#include "layout/pac_format.h"

namespace pacset {
namespace fs_internal {

void FaultReadahead::Learn(fuse_ino_t ino, const std::string& block0, uint32_t block_size,
                           uint64_t block_count) {
  if (opts_.chunk_bytes == 0 || block_size <= kBlockTrailerSize || block0.size() != block_size ||
      Knows(ino))
    return;
  auto h = PacHeader::DecodeFrom(block0.data(), block_size - kBlockTrailerSize, "block 0");
  if (!h.ok()) return;
  // The header is the file's word: keep every region inside the file.
  Layout l;
  l.block_count = block_count;
  l.block_size = block_size;
  l.bins_first = std::min(h->node_first_block, block_count);
  l.bins_end = l.bins_first + std::min(h->bin_block_count, block_count - l.bins_first);
  l.node_end = l.bins_first + std::min(h->node_block_count, block_count - l.bins_first);
  l.node_end = std::max(l.node_end, l.bins_end);
  l.chunks = block_count <= opts_.max_file_bytes / block_size;
  if (l.chunks) {
    const uint64_t chunk = ChunkBlocks(l);
    l.chunks_read.assign((l.node_end - l.bins_end + chunk - 1) / chunk +
                             (l.block_count - l.node_end + chunk - 1) / chunk,
                         false);
  }
  MutexLock lock(&mu_);
  if (layouts_.size() >= kMaxLayouts) layouts_.clear();  // learned again at the next block 0
  layouts_.emplace(ino, std::move(l));
}

uint64_t FaultReadahead::ChunkBlocks(const Layout& l) const {
  const uint64_t chunk = std::max<uint64_t>(1, opts_.chunk_bytes / l.block_size);
  // Never more than kMaxChunks per inode: a huge file gets larger chunks.
  return std::max(chunk, l.block_count / kMaxChunks + 1);
}

bool FaultReadahead::Knows(fuse_ino_t ino) const {
  MutexLock lock(&mu_);
  return layouts_.count(ino) != 0;
}

FaultReadahead::Plan FaultReadahead::PlanFor(fuse_ino_t ino, uint32_t uid, uint64_t first,
                                             uint64_t last, uint64_t drops) {
  if (opts_.chunk_bytes == 0) return {};
  MutexLock lock(&mu_);
  auto it = layouts_.find(ino);
  if (it == layouts_.end()) return {};
  Layout& l = it->second;
  if (last >= l.block_count || first > last || first < l.bins_first) return {};  // metadata: exact
  if (l.drops != drops) {  // dropped since: everything is cold again
    l.drops = drops;
    l.bins_read = false;
    std::fill(l.chunks_read.begin(), l.chunks_read.end(), false);
  }
  // The bins: read by every row, all of them at the first fault there.
  if (first < l.bins_end) {
    if (l.bins_read) return {};
    const uint64_t max_bins = std::max<uint64_t>(1, opts_.max_bins_bytes / l.block_size);
    Plan p = Grant(uid, l.bins_first, std::min(l.bins_end, l.bins_first + max_bins), l.block_size);
    l.bins_read = p.count > 0;
    return p;
  }
  // The chunk of the residual node region, or of what follows it, that
  // holds the fault; in a large file, only the fault.
  if (!l.chunks) return {};
  const uint64_t chunk = ChunkBlocks(l);
  const bool nodes = first < l.node_end;
  const uint64_t region = nodes ? l.bins_end : l.node_end;
  const uint64_t region_end = nodes ? l.node_end : l.block_count;
  const uint64_t index = (first - region) / chunk;
  const size_t bit =
      static_cast<size_t>(index + (nodes ? 0 : (l.node_end - l.bins_end + chunk - 1) / chunk));
  if (bit >= l.chunks_read.size() || l.chunks_read[bit]) return {};
  const uint64_t from = region + index * chunk;
  Plan p = Grant(uid, from, std::min(region_end, from + chunk), l.block_size);
  l.chunks_read[bit] = p.count > 0;
  return p;
}

FaultReadahead::Plan FaultReadahead::Grant(uint32_t uid, uint64_t first, uint64_t end,
                                           uint32_t block_size) {
  const uint64_t bytes = (end - first) * block_size;
  const bool capped = uid != 0 && uid != opts_.mounting_uid;
  {
    Budget& b = *budget_;
    MutexLock lock(&b.mu);
    if (capped) {
      uint64_t& mine = b.held_of[uid];
      if (mine + bytes > opts_.max_bytes_per_user || b.held_capped + bytes > opts_.max_bytes) {
        if (mine == 0) b.held_of.erase(uid);
        ++b.refused;
        return {};
      }
      mine += bytes;
      b.held_capped += bytes;
      b.peak_of_one_user = std::max(b.peak_of_one_user, mine);
      b.peak_capped = std::max(b.peak_capped, b.held_capped);
    } else {
      if (b.held_uncapped + bytes > opts_.max_bytes) {
        ++b.refused;
        return {};
      }
      b.held_uncapped += bytes;
    }
  }
  // Given back when the last copy of the hold goes (the push is done or dropped).
  std::shared_ptr<Budget> budget = budget_;
  std::shared_ptr<const void> hold(nullptr, [budget, uid, capped, bytes](const void*) {
    MutexLock lock(&budget->mu);
    if (capped) {
      auto it = budget->held_of.find(uid);
      if (it != budget->held_of.end() && (it->second -= bytes) == 0) budget->held_of.erase(it);
      budget->held_capped -= bytes;
    } else {
      budget->held_uncapped -= bytes;
    }
  });
  return Plan{first, end - first, std::move(hold)};
}

uint64_t FaultReadahead::held_bytes() const {
  MutexLock lock(&budget_->mu);
  return budget_->held_capped + budget_->held_uncapped;
}

FaultReadahead::Totals FaultReadahead::totals() const {
  MutexLock lock(&budget_->mu);
  return Totals{budget_->held_capped + budget_->held_uncapped, budget_->peak_of_one_user,
                budget_->peak_capped, budget_->refused};
}

uint64_t FaultReadahead::held_bytes_of(uint32_t uid) const {
  MutexLock lock(&budget_->mu);
  auto it = budget_->held_of.find(uid);
  return it == budget_->held_of.end() ? 0 : it->second;
}

}  // namespace fs_internal
}  // namespace pacset
