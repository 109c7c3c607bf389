// The gather file's open handles (protocol/gather.h): the request each one holds,
// and the caps on what the handles of each user may hold.
//
// With allow_other every local user may open the gather file, and every open
// handle kept its request (up to 8 KiB) in the daemon until it was closed: a
// few processes of one user holding thousands of handles each grew a daemon
// without bound (issue 31; fs/DESIGN.md, "The gather file"). So:
//
//   * Each user's handles and request bytes are capped (MountOptions::
//     max_gather_handles_per_user, gather_memory_per_user): one user cannot
//     take what the others need. A handle counts for the user who opened it
//     (the uid of the open; whoever writes to it later): the kernel tells the
//     daemon who opens a file, not who holds its descriptor afterwards.
//   * The handles and bytes of all users but root and the mounting user
//     together are capped too (max_gather_handles, gather_memory).
//   * Root and the mounting user are not capped per user (they can stop or
//     reconfigure the daemon anyway) and share a budget of the totals of their
//     own, not counted with the others': a flood from other users never keeps
//     their engines from gathering, and a runaway one of theirs is bounded too.
//
// So the daemon holds at most 2 x max_gather_handles handles and
// 2 x gather_memory bytes of requests. A request counts as RequestBytes(its
// block count): 8 bytes per block index and kRequestOverheadBytes for its
// allocations. Over a handle cap an open fails with EMFILE (the user's cap)
// or ENFILE (the total); over a memory cap a write fails with ENOMEM and the
// handle keeps the request it had. Each of the four kinds of refusal is
// logged at most once a minute, with the number of refusals since its last
// line (uids and counts: nothing a user wrote).
//
// Memory given back: the daemon keeps the memory it frees in malloc's arenas
// (M_TRIM_THRESHOLD at the cache's bound, fs/mount.cc: so that the next cold
// reads do not fault it in again), and the requests of closed handles stayed
// in its RSS. Close tells its caller to call malloc_trim(0) when what the
// handles hold has fallen kTrimBytes below its peak since the last trim:
// after a flood of handles closes, not after an engine's few (a few hundred
// bytes each).
//
// Thread-safety: every method may be called from any thread. The lock is a
// leaf: no other lock is taken while it is held.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fs/internal/inodes.h"
#include "util/mutex.h"

namespace pacset {
namespace fs_internal {

class GatherHandles {
 public:
  // What a write set: blocks of `forest`, answered in this order.
  struct Request {
    std::shared_ptr<ForestInode> forest;
    std::vector<uint64_t> blocks;
  };
  struct Limits {
    uint64_t handles_per_user = 0;
    uint64_t handles = 0;
    uint64_t bytes_per_user = 0;
    uint64_t bytes = 0;
  };
  struct Usage {
    uint64_t handles = 0;
    uint64_t bytes = 0;  // of requests, as counted against the caps
  };

  // A Request's shared_ptr control block and vector, with malloc's headers.
  static constexpr uint64_t kRequestOverheadBytes = 96;
  // An open handle's entry in the table, counted only to decide when to trim.
  static constexpr uint64_t kHandleBytes = 128;
  static constexpr uint64_t kTrimBytes = 1 << 20;
  static constexpr std::chrono::seconds kLogEvery{60};

  static uint64_t RequestBytes(size_t blocks) {
    return kRequestOverheadBytes + 8 * uint64_t{blocks};
  }

  // `mounting_uid`: the user the daemon runs as; it and root are trusted.
  GatherHandles(const Limits& limits, uint32_t mounting_uid)
      : limits_(limits), mounting_uid_(mounting_uid) {}

  // A new handle for user `uid`: 0 and its number in *fh, or EMFILE (uid is
  // at its cap) or ENFILE (the total is).
  int Open(uint32_t uid, uint64_t* fh) EXCLUDES(mu_);
  // Handle fh's request becomes `r`, replacing the one it held: 0; EBADF for
  // a handle that is not open; ENOMEM when it would take its user or the
  // total over a memory cap (the handle keeps its request).
  int SetRequest(uint64_t fh, std::shared_ptr<const Request> r) EXCLUDES(mu_);
  // Handle fh's request (null before its first); false for a handle that is
  // not open.
  bool Get(uint64_t fh, std::shared_ptr<const Request>* r) const EXCLUDES(mu_);
  // Closes handle fh (nothing when it is not open). True when the caller
  // should give freed memory back to the kernel now (malloc_trim; see above).
  bool Close(uint64_t fh) EXCLUDES(mu_);

  // What the handles of `uid` hold; for root and the mounting user, what
  // their shared budget holds.
  Usage UsageOf(uint32_t uid) const EXCLUDES(mu_);
  // Every handle, and the refusals so far (for the stats file).
  struct Totals {
    Usage all;
    uint64_t refused_opens = 0;
    uint64_t refused_requests = 0;
  };
  Totals totals() const EXCLUDES(mu_);

 private:
  enum Limit { kUserHandles, kHandles, kUserBytes, kBytes, kLimits };
  struct Handle {
    uint32_t uid = 0;
    uint64_t bytes = 0;  // RequestBytes of its request, 0 before the first
    std::shared_ptr<const Request> request;
  };
  struct LogSlot {
    std::chrono::steady_clock::time_point last{};
    bool logged = false;
    uint64_t refused = 0;  // since its last line
  };

  bool Trusted(uint32_t uid) const { return uid == 0 || uid == mounting_uid_; }
  // Counts a refusal; the line to log for it now, or "" (one a minute per kind).
  std::string RefusedLocked(Limit limit, uint32_t uid, uint64_t held) REQUIRES(mu_);
  uint64_t HeldLocked() const REQUIRES(mu_) {
    return others_.bytes + trusted_.bytes + handles_.size() * kHandleBytes;
  }

  const Limits limits_;
  const uint32_t mounting_uid_;

  mutable Mutex mu_;
  uint64_t next_fh_ GUARDED_BY(mu_) = 0;
  std::unordered_map<uint64_t, Handle> handles_ GUARDED_BY(mu_);
  // Users other than root and the mounting user with handles open (an entry
  // goes with its last handle), their sum, and the trusted users' budget.
  std::unordered_map<uint32_t, Usage> users_ GUARDED_BY(mu_);
  Usage others_ GUARDED_BY(mu_);
  Usage trusted_ GUARDED_BY(mu_);
  uint64_t peak_since_trim_ GUARDED_BY(mu_) = 0;  // HeldLocked()'s
  uint64_t refused_opens_ GUARDED_BY(mu_) = 0;
  uint64_t refused_requests_ GUARDED_BY(mu_) = 0;
  LogSlot log_[kLimits] GUARDED_BY(mu_);
};

}  // namespace fs_internal
}  // namespace pacset
