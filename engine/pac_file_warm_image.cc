// PacFileSource::WarmImage (engine/block_source.h): promoting a range of the
// file to the warm image, which the engine then walks without asking Ready
// per block; reading what is missing of it in large sequential reads.
#include <unistd.h>

#include <algorithm>
#include <string>

#include "engine/internal/pac_file_source.h"
#include "util/file_io.h"

namespace pacset::internal {
namespace {

// Requests may promote a range to the warm image when they add up to one
// walk per this many bytes of the range: checking residency and verifying
// the range then costs a small part of what the walks cost (engine/DESIGN.md,
// "The warm image").
constexpr uint64_t kPromoteBytesPerWalk = 1024;
// Bytes per read when reading a range whole.
constexpr uint64_t kBulkReadChunk = 4 << 20;

}  // namespace

bool PacFileSource::ReadRange(uint64_t first, uint64_t end) {
  const uint64_t per_chunk = std::max<uint64_t>(1, kBulkReadChunk / bs_);
  std::string buf;
  for (uint64_t b = first; b < end; b += per_chunk) {
    const uint64_t n = std::min(per_chunk, end - b);
    bool all_ready = true;
    for (uint64_t i = 0; i < n && all_ready; ++i) all_ready = IsReady(b + i);
    if (all_ready) continue;
    const char* bytes = base_ + b * bs_;  // in memory: verify in place
    if (mapped_) {
      if (!verify_ && Resident(b * bs_, n * bs_)) {
        for (uint64_t i = 0; i < n; ++i) MarkReady(b + i);
        continue;
      }
      // From the page cache or the disk, into a buffer: a read error is a
      // status here, never a SIGBUS, and no page of the mapping is touched.
      buf.resize(n * bs_);
      if (!PreadFull(file_.fd(), buf.data(), buf.size(), b * bs_, file_.name()).ok()) return false;
      bytes = buf.data();
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (IsReady(b + i)) continue;
      if (verify_ && !BlockTrailerMatches(bytes + i * bs_, bs_, b + i, seed_)) {
        corrupt_seen_.store(true);  // a walk that needs the block reports it
        return false;
      }
      MarkReady(b + i);
    }
  }
  return true;
}

const char* PacFileSource::WarmImage(uint64_t first, uint64_t count, uint64_t work,
                                     bool read_missing) {
  const uint64_t end = first + count;
  auto promoted = [&] {
    const Range* warm = warm_.load(std::memory_order_acquire);
    return warm && warm->first <= first && warm->end >= end;
  };
  if (promoted()) return base_;
  if (corrupt_seen_.load(std::memory_order_relaxed)) return nullptr;
  // Requests add up: many one-row requests to a resident file promote too.
  const uint64_t pending = pending_work_.fetch_add(work) + work;
  if (!read_missing && pending * kPromoteBytesPerWalk < count * bs_) return nullptr;
  MutexLock lock(&warm_mu_);
  if (promoted()) return base_;
  pending_work_.store(0);
  if (mapped_ && !read_missing && !Resident(first * bs_, count * bs_)) return nullptr;
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * page_;
  if (mapped_ && count * bs_ > ram / 4) return nullptr;
  if (!ReadRange(first, end)) return nullptr;
  const Range* old = warm_.load();
  if (!old || end - first > old->end - old->first) {
    ranges_.push_back(std::make_unique<Range>(Range{first, end}));
    warm_.store(ranges_.back().get(), std::memory_order_release);
  }
  return base_;
}

}  // namespace pacset::internal
