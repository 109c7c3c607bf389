// The daemon's own readahead for sequential readers.
//
// Kernel readahead is off (so that a page fault reads exactly its page), and
// then the kernel turns a large read() into one request per page, sent one
// after another: reading a whole file (cat, an engine reading a range of
// blocks) would wait for one store round trip per block. A reader whose
// requests follow each other — the same thread, each starting where the
// previous one ended or inside what was read ahead for it — is sequential
// from its eighth request on (32 KiB with 4 KiB pages: an engine opening a
// forest reads its first few blocks in a row, and a one-row prediction
// should still fetch exactly the blocks it needs); its request then also
// fetches the next window
// of blocks, in the same store call, and those are pushed into the page
// cache, so the kernel asks for none of them. The window starts at 128 KiB
// and doubles up to 1 MiB while the run lasts. Selective readers (an engine's
// I/O threads, each reading one block at a time wherever the walk goes)
// rarely read three adjacent blocks in a row, so they fetch only what they
// ask for.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>

#include "fs/internal/inodes.h"
#include "util/mutex.h"

namespace pacset {
namespace fs_internal {

class SequentialReads {
 public:
  static constexpr uint64_t kFirstWindow = 128 << 10;
  static constexpr uint64_t kMaxWindow = 1 << 20;
  static constexpr uint32_t kMinRun = 7;  // requests that followed the first one

  // Where the fetch for the request [off, end) of thread `tid` on inode
  // `ino` should end: `end` (nothing ahead) or further.
  uint64_t FetchEnd(fuse_ino_t ino, uint32_t tid, uint64_t off, uint64_t end) EXCLUDES(mu_);

 private:
  struct Stream {
    fuse_ino_t ino = 0;
    uint32_t tid = 0;
    uint32_t run = 0;        // requests in a row that followed the previous one
    uint64_t next = 0;       // where the previous request ended
    uint64_t ahead_end = 0;  // what was fetched ahead ends here
    uint64_t window = kFirstWindow;
  };
  static constexpr size_t kStreams = 64;  // readers tracked at once (hashed; a clash restarts one)

  Mutex mu_;
  Stream streams_[kStreams] GUARDED_BY(mu_);
};

}  // namespace fs_internal
}  // namespace pacset
