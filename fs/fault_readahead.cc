#include "fs/internal/fault_readahead.h"

#include <algorithm>

#include "layout/block.h"
#include "layout/pac_format.h"

namespace pacset {
namespace fs_internal {

void FaultReadahead::Learn(fuse_ino_t ino, const std::string& block0, uint32_t block_size,
                           uint64_t block_count) {
  if (opts_.max_window_bytes == 0 || block_size <= kBlockTrailerSize ||
      block0.size() != block_size || Knows(ino))
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
  MutexLock lock(&mu_);
  if (layouts_.size() >= kMaxLayouts) layouts_.clear();  // learned again at the next block 0
  layouts_.emplace(ino, l);
}

bool FaultReadahead::Knows(fuse_ino_t ino) const {
  MutexLock lock(&mu_);
  return layouts_.count(ino) != 0;
}

FaultReadahead::Plan FaultReadahead::PlanFor(fuse_ino_t ino, uint32_t uid, uint32_t tid,
                                             uint64_t first, uint64_t last, uint64_t drops) {
  if (opts_.max_window_bytes == 0) return {};
  MutexLock lock(&mu_);
  auto it = layouts_.find(ino);
  if (it == layouts_.end()) return {};
  Layout& l = it->second;
  if (last >= l.block_count || first > last) return {};
  const uint64_t max_window = std::max<uint64_t>(1, opts_.max_window_bytes / l.block_size);
  // The bins: read by every row, all of them at the first fault there.
  if (first >= l.bins_first && first < l.bins_end) {
    if (l.bins_read && l.bins_drops == drops) return {};
    l.bins_read = true;
    l.bins_drops = drops;
    const uint64_t max_bins = std::max<uint64_t>(1, opts_.max_bins_bytes / l.block_size);
    const uint64_t end = std::min(l.bins_end, l.bins_first + max_bins);
    return Grant(uid, l.bins_first, end, l.block_size);
  }
  if (first < l.bins_end) return {};  // the metadata blocks: exact
  const int zone = first < l.node_end ? 0 : 1;
  const uint64_t zone_end = zone == 0 ? l.node_end : l.block_count;
  const uint64_t h = (static_cast<uint64_t>(ino) * 0x9E3779B97F4A7C15ull) ^
                     (tid * 0xC2B2AE3Dull) ^ (static_cast<uint64_t>(zone) << 7);
  Stream& s = streams_[(h >> 17) % kStreams];
  const bool forward = s.ino == ino && s.tid == tid && s.zone == zone && first > s.last &&
                       first <= std::max(s.last, s.ahead_end) + max_window;
  if (!forward) {
    s = Stream{};
    s.ino = ino;
    s.tid = tid;
    s.zone = zone;
    s.last = last;
    s.ahead_end = last + 1;
    s.window = std::min(max_window, std::max<uint64_t>(1, kFirstWindowBytes / l.block_size));
    return {};
  }
  s.last = last;
  // Enough is still ahead of the reader: wait until half of it is used.
  if (last + 1 + s.planned / 2 <= s.ahead_end) return {};
  const uint64_t from = std::max(last + 1, s.ahead_end);
  const uint64_t end = std::min(zone_end, last + 1 + s.window);
  s.window = std::min(max_window, s.window * 2);
  if (from >= end) return {};
  Plan p = Grant(uid, from, end, l.block_size);
  if (p.count > 0) {
    s.ahead_end = end;
    s.planned = end - from;
  }
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
