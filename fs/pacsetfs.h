// pacsetfs: every forest in a block store, presented as a read-only file.
//
//   MOUNTPOINT/NAME.pac           the current generation of forest NAME,
//                                 byte-identical to `pacset export NAME`
//   MOUNTPOINT/.pacsetfs/stats    live counters (JSON)
//   MOUNTPOINT/.pacsetfs/control  write "drop NAME" / "drop *" to make forests cold
//                                 (protocol: protocol/control.h; only the mounting
//                                 user and root may use it)
//   MOUNTPOINT/.pacsetfs/gather   many blocks of a forest in one round trip
//                                 (protocol/gather.h; within caps per user)
//
// Reads map to the blocks that cover them; each block is fetched from the
// store once per cold access (an in-daemon cache with a memory bound and
// single-flight fetching), verified, and served. Generations are immutable,
// so pages stay in the kernel's page cache; each generation is its own inode,
// so a re-import never mixes old and new pages: new opens see the new
// generation, open files and live mappings keep theirs (pinned in the store
// until released). Kernel readahead is off, so an mmap reader pulls only the
// pages it touches; a freshly fetched block is then pushed whole into the
// page cache so the reader's next faults in it cost no request. Many reads
// are served at once (64 workers by default); a sequential reader gets the
// blocks ahead of it fetched in one store call and pushed the same way.
//
// Design notes: fs/DESIGN.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace pacset {

struct MountOptions {
  std::string mountpoint;
  std::string store_uri;  // empty: DefaultStoreUri()
  bool foreground = false;
  bool debug = false;  // libfuse request log (implies foreground)
  bool allow_other = false;
  bool read_only = false;           // -o ro: a read-only mount, no control file
  std::string password_file;        // redis password, read at mount time
  bool auto_unmount = true;         // unmount when the daemon dies
  size_t cache_bytes = 256u << 20;  // daemon block cache bound
  std::string trace_path;           // block-access log; empty: none
  size_t trace_queue_records = 1 << 16;
  int store_timeout_ms = 10000;    // deadline for one block fetch, retries included
  int catalog_refresh_ms = 500;    // how often to look for new generations
  bool push_blocks = true;         // push fetched blocks whole into the page cache
  bool direct_store_reads = true;  // StoreOptions::direct_reads (no_direct_store_reads)
  bool prefetch_bins = false;      // at open, fetch metadata and bin blocks ahead
  uint32_t max_readahead = 0;      // kernel readahead in bytes (0: exact page faults)
  // The daemon's read-ahead for page-faulting readers (fs/internal/fault_readahead.h):
  // the chunk in bytes (0: none), and what all read-aheads of one user, and
  // of all users but root and the mounting one, may hold at once.
  uint64_t fault_readahead = 1u << 20;
  uint64_t fault_readahead_file_max = 256u << 20;  // larger files: the bins only
  uint64_t fault_readahead_per_user = 32u << 20;
  uint64_t fault_readahead_total = 128u << 20;
  int max_threads = 64;  // FUSE workers: above the engine's 32 blocks in flight (fs/DESIGN.md)
  // What the gather file's open handles may hold (protocol/gather.h, "Limits"):
  // each user's handles and request bytes, and those of every user but root
  // and the mounting user together; those two share a budget of the totals
  // of their own. Over a cap an open fails with EMFILE (the user's) or
  // ENFILE (the total), a request with ENOMEM.
  uint64_t max_gather_handles_per_user = 4096;
  uint64_t max_gather_handles = 16384;
  uint64_t gather_memory_per_user = 4u << 20;
  uint64_t gather_memory = 16u << 20;
};

// Parses a comma-separated -o list into `opts`. Mount-table options that
// make no sense here (dev, suid, nofail, _netdev, defaults, ...) are accepted
// and ignored; unknown options are an error.
Status ParseMountOptionString(const std::string& list, MountOptions* opts);

// Mounts and serves until unmounted (or a signal). Without `foreground` the
// process daemonizes once the mount is up; errors found before that are
// returned to the caller.
Status RunMount(const MountOptions& opts);

// Unmounts (umount2 as root, fusermount3 -u otherwise).
Status Unmount(const std::string& mountpoint);

// Asks the daemon serving `where` to drop the kernel page cache and its own
// cache for forest `name` ("" or "*": all forests), even while mapped.
// `where` is the mountpoint, or a forest's file MOUNTPOINT/NAME.pac (then
// `name` is that forest; another non-empty `name` is kInvalidArgument).
Status DropCaches(const std::string& where, const std::string& name);

}  // namespace pacset
