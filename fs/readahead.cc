#include "fs/internal/readahead.h"

#include <algorithm>

namespace pacset {
namespace fs_internal {

uint64_t SequentialReads::FetchEnd(fuse_ino_t ino, uint32_t tid, uint64_t off, uint64_t end) {
  const uint64_t h = (static_cast<uint64_t>(ino) * 0x9E3779B97F4A7C15ull) ^ (tid * 0xC2B2AE3Dull);
  MutexLock lock(&mu_);
  Stream& s = streams_[(h >> 17) % kStreams];
  const bool follows =
      s.ino == ino && s.tid == tid && off >= s.next && off <= std::max(s.next, s.ahead_end);
  if (!follows) {
    s = Stream{};
    s.ino = ino;
    s.tid = tid;
    s.next = end;
    return end;
  }
  ++s.run;
  s.next = end;
  if (s.run < kMinRun) return end;
  // Refill once half of what was read ahead is used.
  if (end + s.window / 2 <= s.ahead_end) return end;
  if (s.ahead_end > end) s.window = std::min(kMaxWindow, s.window * 2);
  s.ahead_end = std::max(s.ahead_end, end + s.window);
  return s.ahead_end;
}

}  // namespace fs_internal
}  // namespace pacset
